import { createHttpApp, silentLogger } from '@svc/common';
import { serve } from '@svc/contracts/route-table';
import type { JobStatusReport } from '@svc/contracts/template-center';
import { CALLBACK_TOKEN_HEADER } from '@svc/contracts/template-center';
import { TEMPLATE_CALLBACK_ROUTES, verifyCallbackToken } from '@svc/contracts/template-callback';

export interface FakeMaster {
  url: string;
  reports: Map<string, JobStatusReport[]>;
  /** Every accepted callback with the time it arrived. */
  events: Array<{ jobId: string; report: JobStatusReport; at: number }>;
  /** Callbacks refused (token). */
  refused: number;
  /** Answer 503 to every callback while true (master down). */
  failing: boolean;
  waitFor(jobId: string, pred: (r: JobStatusReport) => boolean, timeoutMs?: number): Promise<JobStatusReport>;
  final(jobId: string, timeoutMs?: number): Promise<JobStatusReport>;
  /** A job the master knows of (as the real one does once it has asked for the build); others are 404. */
  expect(jobId: string): void;
  close(): Promise<void>;
}

/**
 * A master that records status callbacks, checking the token, the report and the job the way the
 * real one does: it passes the callback's contract suite (contracts/template-callback.contract.ts).
 */
export async function startFakeMaster(token: string, port = 0): Promise<FakeMaster> {
  const app = createHttpApp({ logger: silentLogger() });
  const reports = new Map<string, JobStatusReport[]>();
  const waiters = new Set<() => void>();
  const jobs = new Set<string>();
  const self: FakeMaster = {
    url: '', reports, events: [], refused: 0, failing: false,
    waitFor: (jobId, pred, timeoutMs = 60_000) => new Promise((resolve, reject) => {
      const check = () => {
        const hit = reports.get(jobId)?.find(pred);
        if (hit) { waiters.delete(check); clearTimeout(t); resolve(hit); }
      };
      const t = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`timeout waiting for job ${jobId}; got ${JSON.stringify(reports.get(jobId) ?? [])}`));
      }, timeoutMs);
      waiters.add(check);
      check();
    }),
    final: (jobId, timeoutMs) => self.waitFor(jobId, (r) => r.status === 'BUILT' || r.status === 'FAILED', timeoutMs),
    expect: (jobId) => { jobs.add(jobId); },
    close: () => app.close(),
  };
  // The token (and a master that is down) answer before the report's schema is checked, as on the real master.
  app.addHook('preValidation', async (req, reply) => {
    const check = verifyCallbackToken(req.headers[CALLBACK_TOKEN_HEADER], token, false);
    if (!check.ok) { self.refused++; return reply.status(check.status).send({ code: check.status, message: check.message }); }
    if (self.failing) return reply.status(503).send({ code: 503, message: 'down' });
    return undefined;
  });
  serve(app, TEMPLATE_CALLBACK_ROUTES.status, async (req, reply) => {
    // As the real master reads it: a null phase is none.
    const { phase, ...rest } = req.body;
    const report: JobStatusReport = { ...rest, ...(phase ? { phase } : {}) };
    if (!jobs.has(req.params.jobId)) return reply.status(404).send({ code: 404, message: `build job ${req.params.jobId} not found` });
    const list = reports.get(req.params.jobId) ?? [];
    list.push(report);
    self.events.push({ jobId: req.params.jobId, report, at: performance.now() });
    reports.set(req.params.jobId, list);
    for (const w of [...waiters]) w();
    return reply.status(204).send();
  });
  await app.listen({ host: '127.0.0.1', port });
  self.url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  return self;
}
