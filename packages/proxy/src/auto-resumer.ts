import { SvcError, type Logger } from '@svc/common';
import { LifecycleClient } from '@svc/contracts/lifecycle';
import type { SandboxRoute } from '@svc/contracts/master-internal';

/**
 * Asks a lifecycle replica to resume a paused sandbox while the data-plane request waits.
 * One call per sandbox at a time in this proxy; the replicas coalesce across proxies.
 */
export class AutoResumer {
  private readonly replicas: LifecycleClient[];
  private readonly inflight = new Map<string, Promise<SandboxRoute>>();

  constructor(lifecycleUrls: string[], clusterToken: string | undefined, private readonly timeoutMs: number, private readonly logger: Logger) {
    this.replicas = lifecycleUrls.map((u) => new LifecycleClient(u, { timeoutMs, clusterToken }));
  }

  resume(sandboxId: string): Promise<SandboxRoute> {
    const pending = this.inflight.get(sandboxId);
    if (pending) return pending;
    const p = this.callReplicas(sandboxId).finally(() => { this.inflight.delete(sandboxId); });
    this.inflight.set(sandboxId, p);
    return p;
  }

  private async callReplicas(sandboxId: string): Promise<SandboxRoute> {
    const n = this.replicas.length;
    if (n === 0) throw resumeFailed(sandboxId);
    // The same sandbox goes to the same replica first, so concurrent proxies meet there.
    const first = hash(sandboxId) % n;
    for (let i = 0; i < n; i++) {
      const replica = this.replicas[(first + i) % n];
      try {
        return await replica.resume(sandboxId, this.timeoutMs);
      } catch (err) {
        const e = err instanceof SvcError ? err : new SvcError(503, String(err));
        if (e.status === 409) {
          throw new SvcError(409, `sandbox ${sandboxId} cannot be resumed right now: ${e.message}`, { headers: { 'Retry-After': '2' } });
        }
        if (e.status === 404 || e.status === 410) throw new SvcError(e.status, e.message);
        // A replica that answered itself sets Retry-After; an unreachable one does not: try the next.
        const unreachable = e.status === 503 && e.headers['Retry-After'] === undefined;
        this.logger.warn({ sandboxId, replica: replica.baseUrl, status: e.status, err: e.message }, 'auto-resume call failed');
        if (!unreachable) break;
      }
    }
    throw resumeFailed(sandboxId);
  }
}

function resumeFailed(sandboxId: string) {
  return new SvcError(503, `sandbox ${sandboxId} is paused and could not be resumed automatically; retry later`, {
    headers: { 'Retry-After': '1' },
  });
}

function hash(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
  return h >>> 0;
}
