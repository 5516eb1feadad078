import type { Logger } from '@svc/common';
import { MAX_SAMPLES_PER_REPORT, SAMPLE_INTERVAL_MS, type SandboxMetricSample } from '@svc/contracts/metrics-history';
import type { SandboxMetrics } from '@svc/contracts/node-agent';

/** Samples kept while the master cannot be told: an hour of 100 sandboxes, then the oldest go. */
const MAX_BUFFERED = 72_000;

export interface MetricsSamplerOptions {
  /** The sandboxes running on this node now (a paused one has no samples). */
  running: () => string[];
  /** Whether it still runs: one paused while it was read has no sample (its cgroup can still be read). */
  stillRunning: (sandboxId: string) => boolean;
  /** A sandbox's metrics read from the host side (cgroup files, the layer's size), never from inside it. */
  read: (sandboxId: string) => Promise<SandboxMetrics>;
  /** Sends samples to the master. */
  send: (samples: SandboxMetricSample[]) => Promise<void>;
  logger: Logger;
  intervalMs?: number;
}

/**
 * Samples every running sandbox every SAMPLE_INTERVAL_MS and sends the samples to the master
 * (docs/observability.md, "Metrics history"). A master that cannot be reached keeps them here, up
 * to MAX_BUFFERED, sent with the next report; a sandbox that ends between the list and its read
 * is skipped.
 */
export class MetricsSampler {
  private timer: NodeJS.Timeout | undefined;
  private buffered: SandboxMetricSample[] = [];
  private running: Promise<void> | undefined;
  private failures = 0;

  constructor(private readonly o: MetricsSamplerOptions) {}

  start(): void {
    this.timer = setInterval(() => { if (!this.running) this.running = this.tick().finally(() => { this.running = undefined; }); }, this.o.intervalMs ?? SAMPLE_INTERVAL_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One round: read each running sandbox, then send what is buffered. */
  async tick(): Promise<void> {
    let read = 0;
    for (const id of this.o.running()) {
      // The reads are synchronous underneath (gvisor.ts): the agent's other work gets a turn every 50.
      if (++read % 50 === 0) await new Promise((r) => setImmediate(r));
      try {
        const sample = await this.o.read(id);
        if (this.o.stillRunning(id)) this.buffered.push({ sandboxId: id, ...sample });
      } catch (err) {
        // Ended or pausing under the read: it has no sample this round.
        this.o.logger.debug({ sandboxId: id, err: (err as Error).message }, 'sandbox not sampled this round');
      }
    }
    if (this.buffered.length > MAX_BUFFERED) {
      const dropped = this.buffered.length - MAX_BUFFERED;
      this.buffered.splice(0, dropped);
      this.o.logger.warn({ dropped }, 'metrics samples dropped: the master has not taken them for too long');
    }
    while (this.buffered.length) {
      const batch = this.buffered.slice(0, MAX_SAMPLES_PER_REPORT);
      try {
        await this.o.send(batch);
      } catch (err) {
        // Kept for the next round; the first failure of a run of them is logged, then every 12th.
        if (this.failures++ % 12 === 0) this.o.logger.warn({ buffered: this.buffered.length, err: (err as Error).message }, 'metrics samples not sent to the master; kept for the next round');
        return;
      }
      this.failures = 0;
      this.buffered.splice(0, batch.length);
    }
  }
}
