import type { Logger } from '@svc/common';
import { pathTo } from '@svc/contracts/route-table';
import { TEMPLATE_CALLBACK_ROUTES } from '@svc/contracts/template-callback';
import { CALLBACK_TOKEN_HEADER, type JobStatusReport } from '@svc/contracts/template-center';
import { clusterHeaders } from '@svc/contracts/cluster-token';

export interface CallbackOptions {
  masterAddr: string;
  token: string;
  /** cluster_token: the master takes it on every route (docs/cluster.md). */
  clusterToken?: string;
  logger: Logger;
  /** How long delivery of one report is retried while the master is unreachable (default 15 min). */
  retryForMs?: number;
  /** First retry delay; doubles up to maxDelayMs. */
  initialDelayMs?: number;
  maxDelayMs?: number;
}

interface JobQueue {
  pending: JobStatusReport | undefined;
  sending: Promise<void> | undefined;
}

const isTerminal = (r: JobStatusReport) => r.status === 'BUILT' || r.status === 'FAILED';

/**
 * Status callbacks to the master, TEMPLATE_CALLBACK_ROUTES.status. Reports of one job
 * go out one at a time and in order; a phase report still waiting when a newer one arrives is
 * dropped (only the latest state matters), a terminal report never is. Delivery retries with
 * exponential backoff while the master is down or answers 5xx; a 4xx is final.
 */
export class CallbackSender {
  private readonly queues = new Map<string, JobQueue>();
  private readonly stopping = new AbortController();

  constructor(private readonly o: CallbackOptions) {}

  /** Resolves when the report (or a newer one of the same job) was delivered or given up. */
  report(jobId: string, report: JobStatusReport): Promise<void> {
    let q = this.queues.get(jobId);
    if (!q) { q = { pending: undefined, sending: undefined }; this.queues.set(jobId, q); }
    if (!(q.pending && isTerminal(q.pending) && !isTerminal(report))) q.pending = report;
    if (!q.sending) {
      const queue = q;
      q.sending = this.drain(jobId, queue).finally(() => {
        queue.sending = undefined;
        if (!queue.pending) this.queues.delete(jobId);
      });
    }
    return q.sending;
  }

  /** Stops retrying; reports not delivered by then are dropped (the master's reconciler covers them). */
  close(): void {
    this.stopping.abort();
  }

  private async drain(jobId: string, q: JobQueue): Promise<void> {
    while (q.pending) {
      const report = q.pending;
      q.pending = undefined;
      await this.deliver(jobId, report, () => q.pending !== undefined && !isTerminal(report));
    }
  }

  private async deliver(jobId: string, report: JobStatusReport, superseded: () => boolean): Promise<void> {
    const url = `${this.o.masterAddr.replace(/\/+$/, '')}${pathTo(TEMPLATE_CALLBACK_ROUTES.status, { jobId })}`;
    const headers: Record<string, string> = { 'content-type': 'application/json', ...clusterHeaders(this.o.clusterToken) };
    if (this.o.token) headers[CALLBACK_TOKEN_HEADER] = this.o.token;
    const body = JSON.stringify(report);
    const deadline = Date.now() + (this.o.retryForMs ?? 15 * 60_000);
    let delay = this.o.initialDelayMs ?? 250;
    for (let attempt = 1; ; attempt++) {
      let problem: string;
      try {
        const res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(10_000) });
        const text = await res.text().catch(() => { /* a cut-off body: the status alone says what went wrong */ return ''; });
        if (res.ok) return;
        problem = `${res.status} ${text.slice(0, 200)}`;
        if (res.status < 500 && res.status !== 408 && res.status !== 429) {
          this.o.logger.error({ jobId, status: res.status, body: text.slice(0, 300), report: report.status },
            res.status === 401 || res.status === 503 ? 'master refused the template callback token' : 'master rejected the status callback');
          return;
        }
      } catch (err) {
        problem = ((err as Error).cause as Error)?.message ?? (err as Error).message;
      }
      if (superseded()) return;
      if (this.stopping.signal.aborted || Date.now() + delay > deadline) {
        this.o.logger.error({ jobId, report: report.status, attempts: attempt, problem }, 'giving up on the status callback');
        return;
      }
      if (attempt === 1 || attempt % 10 === 0) this.o.logger.warn({ jobId, attempt, problem }, 'status callback failed; retrying');
      await sleep(delay, this.stopping.signal);
      delay = Math.min(delay * 2, this.o.maxDelayMs ?? 15_000);
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(() => { signal.removeEventListener('abort', done); resolve(); }, ms);
    const done = () => { clearTimeout(t); resolve(); };
    signal.addEventListener('abort', done, { once: true });
  });
}
