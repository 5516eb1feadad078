import type { Coordination, Logger } from '@svc/common';
import { progressKey, type JobPhase, type JobProgress, type LayerProgress } from '@svc/contracts/template-center';

export interface ProgressTiming {
  /** Byte progress is written at most this often. */
  intervalMs: number;
  /** The snapshot is rewritten at least this often while the job runs: the master's staleness clock. */
  heartbeatMs: number;
  ttlMs: number;
}

const DEFAULT_TIMING: ProgressTiming = { intervalMs: 1000, heartbeatMs: 3000, ttlMs: 3600_000 };
const FINAL_TTL_MS = 10 * 60_000;

/** Live progress of one job in the coordination kv under progressKey(jobId), throttled. */
export class ProgressReporter {
  private readonly snapshot: JobProgress;
  private readonly timing: ProgressTiming;
  private timer: NodeJS.Timeout | undefined;
  private dirty = false;
  private lastWrite = 0;
  private writing: Promise<void> | undefined;

  constructor(private readonly coordination: Coordination, jobId: string, private readonly logger: Logger, timing: Partial<ProgressTiming> = {}) {
    this.timing = { ...DEFAULT_TIMING, ...timing };
    this.snapshot = { jobId, phase: 'PULLING', layers: [], updatedAt: new Date().toISOString() };
  }

  start(phase: JobPhase, message?: string): void {
    this.setPhase(phase, message);
    this.timer = setInterval(() => this.tick(), this.timing.intervalMs);
    this.timer.unref();
  }

  setPhase(phase: JobPhase, message?: string): void {
    this.snapshot.phase = phase;
    this.snapshot.message = message;
    this.write();
  }

  setMessage(message: string): void {
    this.snapshot.message = message;
    this.dirty = true;
  }

  setLayers(layers: Array<{ digest: string; totalBytes: number }>): void {
    this.snapshot.layers = layers.map((l): LayerProgress => ({ ...l, doneBytes: 0 }));
    this.write();
  }

  addLayerBytes(index: number, n: number): void {
    const layer = this.snapshot.layers[index];
    if (!layer) return;
    layer.doneBytes += n;
    this.dirty = true;
  }

  markLayerCached(index: number): void {
    const layer = this.snapshot.layers[index];
    if (!layer) return;
    layer.cached = true;
    this.dirty = true;
  }

  current(): JobProgress {
    return structuredClone(this.snapshot);
  }

  /** Stops the clock and leaves a last snapshot that expires soon after (the callback carries the result). */
  async stop(message: string): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.snapshot.message = message;
    await this.writing;
    await this.persist(FINAL_TTL_MS);
  }

  private tick(): void {
    if (this.dirty || Date.now() - this.lastWrite >= this.timing.heartbeatMs) this.write();
  }

  private write(): void {
    if (this.writing) { this.dirty = true; return; }
    this.writing = this.persist(this.timing.ttlMs).finally(() => { this.writing = undefined; });
  }

  private async persist(ttlMs: number): Promise<void> {
    this.dirty = false;
    this.lastWrite = Date.now();
    this.snapshot.updatedAt = new Date().toISOString();
    try {
      await this.coordination.kvSet(progressKey(this.snapshot.jobId), JSON.stringify(this.snapshot), ttlMs);
    } catch (err) {
      this.logger.warn({ err: (err as Error).message, jobId: this.snapshot.jobId }, 'progress write failed');
    }
  }
}
