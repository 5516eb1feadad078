import { SvcError, withRenewedLock, type Coordination, type Logger } from '@svc/common';
import type { MasterInternalClient, SandboxRoute } from '@svc/contracts/master-internal';
import { sandboxLockName } from './sandbox-lock.ts';

export interface ResumeTiming {
  /** Longest one resume request may take before it answers 503. */
  timeoutMs: number;
  /** How often the route is polled while another replica resumes the sandbox. */
  pollMs: number;
  lockTtlMs: number;
}

/**
 * Drives auto-resumes. Concurrent requests for one sandbox share one promise in this replica;
 * across replicas the per-sandbox lock picks one resumer and the others poll the route until
 * the sandbox runs.
 */
export class ResumeCoordinator {
  private readonly inflight = new Map<string, Promise<SandboxRoute>>();
  private seq = 0;

  constructor(
    private readonly master: MasterInternalClient,
    private readonly coord: Coordination,
    private readonly replicaId: string,
    private readonly timing: ResumeTiming,
    private readonly logger: Logger,
  ) {}

  resume(sandboxId: string): Promise<SandboxRoute> {
    const pending = this.inflight.get(sandboxId);
    if (pending) return pending;
    const p = this.run(sandboxId).catch((err) => { throw asResumeError(sandboxId, err); })
      .finally(() => { this.inflight.delete(sandboxId); });
    this.inflight.set(sandboxId, p);
    return p;
  }

  private async run(sandboxId: string): Promise<SandboxRoute> {
    const deadline = Date.now() + this.timing.timeoutMs;
    for (;;) {
      const route = await this.master.route(sandboxId);
      switch (route.state) {
        case 'running':
          return route;
        case 'killing':
        case 'terminated':
          throw new SvcError(410, `sandbox ${sandboxId} was killed; it cannot be resumed`);
        case 'paused': {
          const holder = `${this.replicaId}:resume:${++this.seq}`;
          const r = await withRenewedLock(this.coord, sandboxLockName(sandboxId), holder, this.timing.lockTtlMs, () => this.resumeLocked(sandboxId));
          if (r.acquired && r.value.state === 'running') return r.value;
          break;
        }
        default:
          break; // pausing or resuming: someone else is on it
      }
      if (Date.now() + this.timing.pollMs > deadline) throw new SvcError(504, `sandbox ${sandboxId} did not resume within ${this.timing.timeoutMs} ms`);
      await sleep(this.timing.pollMs);
    }
  }

  private async resumeLocked(sandboxId: string): Promise<SandboxRoute> {
    // Another replica may have resumed it between our look and our lock.
    const current = await this.master.route(sandboxId);
    if (current.state !== 'paused') return current;
    const started = Date.now();
    const route = await this.master.resume(sandboxId, 'auto');
    this.logger.info({ sandboxId, ms: Date.now() - started }, 'auto-resumed sandbox');
    return route;
  }
}

/** The master's 409 (and a sandbox that is gone or unknown) passes through; anything else is 503. */
function asResumeError(sandboxId: string, err: unknown): SvcError {
  if (err instanceof SvcError && (err.status === 409 || err.status === 404 || err.status === 410)) {
    return new SvcError(err.status, err.message, { code: err.code, headers: err.status === 409 ? { 'Retry-After': '2' } : {} });
  }
  const why = err instanceof Error ? err.message : String(err);
  return new SvcError(503, `resume of sandbox ${sandboxId} failed: ${why}`, { headers: { 'Retry-After': '1' } });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
