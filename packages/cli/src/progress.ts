/**
 * Shows a template build while the CLI waits: on a terminal, a bar per image layer
 * (bytes pulled, from the job's progress) under a line with the build phase; elsewhere,
 * one line per phase change.
 */
import cliProgress from 'cli-progress';
import type { JobInfo } from '@svc/sdk';
import { formatBytes } from './output.ts';

export interface BuildReporter {
  update(job: JobInfo): void;
  stop(): void;
}

export function buildReporter(stream: NodeJS.WriteStream = process.stderr): BuildReporter {
  return stream.isTTY ? new BarReporter(stream) : new LineReporter(stream);
}

const phaseText = (job: JobInfo) => {
  const stage = job.status === 'RUNNING' && job.phase ? job.phase : job.status;
  return `${job.jobId}: ${stage.toLowerCase()}${job.progress.message ? ` - ${job.progress.message}` : ''}`;
};

class BarReporter implements BuildReporter {
  private readonly bars: cliProgress.MultiBar;
  private readonly phase: cliProgress.SingleBar;
  private readonly layers = new Map<string, cliProgress.SingleBar>();

  constructor(stream: NodeJS.WriteStream) {
    this.bars = new cliProgress.MultiBar({
      stream,
      format: ' {name} |{bar}| {percentage}% {pulled}/{size}',
      hideCursor: true,
      clearOnComplete: false,
      barsize: 30,
    }, cliProgress.Presets.shades_classic);
    this.phase = this.bars.create(1, 0, { text: 'waiting for the build' }, { format: '{text}' });
  }

  update(job: JobInfo): void {
    this.phase.update(0, { text: phaseText(job) });
    for (const layer of job.progress.layers) {
      const total = layer.totalBytes && layer.totalBytes > 0 ? layer.totalBytes : Math.max(layer.doneBytes, 1);
      const payload = { name: layer.digest.replace(/^sha256:/, '').slice(0, 12), pulled: formatBytes(layer.doneBytes), size: formatBytes(layer.totalBytes) };
      let bar = this.layers.get(layer.digest);
      if (!bar) {
        bar = this.bars.create(total, layer.doneBytes, payload);
        this.layers.set(layer.digest, bar);
      }
      bar.setTotal(total);
      bar.update(layer.doneBytes, payload);
    }
  }

  stop(): void {
    this.bars.stop();
  }
}

class LineReporter implements BuildReporter {
  private last = '';

  constructor(private readonly stream: NodeJS.WritableStream) {}

  update(job: JobInfo): void {
    const text = phaseText(job);
    if (text === this.last) return;
    this.last = text;
    const layers = job.progress.layers;
    const pulled = layers.length && job.phase === 'PULLING'
      ? ` (${formatBytes(layers.reduce((n, l) => n + l.doneBytes, 0))} of ${formatBytes(layers.reduce((n, l) => n + (l.totalBytes ?? 0), 0))} in ${layers.length} layers)`
      : '';
    this.stream.write(`${text}${pulled}\n`);
  }

  stop(): void {}
}
