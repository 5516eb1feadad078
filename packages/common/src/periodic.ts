import type { Logger } from './log.ts';

/** How one repeating task has fared, as a component's health answer reports it. */
export interface TaskStats {
  runs: number;
  failures: number;
  /** When the current streak of failures began; null while runs succeed. */
  failingSince: string | null;
  lastFailure: string | null;
  lastFailureAt: string | null;
}

interface Task {
  timer: NodeJS.Timeout | undefined;
  running: Promise<void> | undefined;
  stats: TaskStats;
}

/**
 * A component's background work that repeats (sweeps, reconciles, measurements). Each task runs
 * on its interval and never overlaps itself; a failure is counted, and logged with the task's
 * name when a streak of failures starts (and when its message changes), and its end is logged
 * too, so an outage is one line and not one a run. The counts go into the component's health
 * answer (docs/design.md, "No silent failure").
 */
export class Periodic {
  private readonly tasks = new Map<string, Task>();
  private stopped = false;

  constructor(private readonly logger: Logger) {}

  /** Runs `work` every `intervalMs`, the first time after `firstAfterMs` (default: one interval). */
  every(name: string, intervalMs: number, work: () => Promise<unknown> | unknown, opts: { firstAfterMs?: number } = {}): void {
    if (this.tasks.has(name)) throw new Error(`periodic task ${name} is already registered`);
    const task: Task = {
      timer: undefined,
      running: undefined,
      stats: { runs: 0, failures: 0, failingSince: null, lastFailure: null, lastFailureAt: null },
    };
    this.tasks.set(name, task);
    const schedule = (ms: number) => {
      if (this.stopped) return;
      task.timer = setTimeout(() => {
        task.running = this.run(name, task, work).finally(() => {
          task.running = undefined;
          schedule(intervalMs);
        });
      }, ms);
      task.timer.unref();
    };
    schedule(opts.firstAfterMs ?? intervalMs);
  }

  private async run(name: string, task: Task, work: () => Promise<unknown> | unknown): Promise<void> {
    const s = task.stats;
    s.runs++;
    try {
      await work();
      if (s.failingSince !== null) this.logger.info({ task: name, failedSince: s.failingSince }, `${name} works again`);
      s.failingSince = null;
    } catch (err) {
      const message = (err as Error)?.message ?? String(err);
      const now = new Date().toISOString();
      if (s.failingSince === null || message !== s.lastFailure) this.logger.warn({ task: name, err: message }, `${name} failed`);
      s.failures++;
      s.failingSince ??= now;
      s.lastFailure = message;
      s.lastFailureAt = now;
    }
  }

  stats(): Record<string, TaskStats> {
    return Object.fromEntries([...this.tasks].map(([name, t]) => [name, { ...t.stats }]));
  }

  /** Stops every task; resolves when the runs under way have ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.tasks.values()) clearTimeout(t.timer);
    await Promise.all([...this.tasks.values()].map((t) => t.running));
  }
}
