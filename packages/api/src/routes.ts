import type { FastifyInstance } from 'fastify';
import { badRequest, SvcError } from '@svc/common';
import type { MasterClient } from '@svc/master/api';
import { parseNewSandbox, toE2bListed, toE2bMetric, toE2bSandbox } from './e2b-shapes.ts';

type Id = { Params: { sandboxID: string } };
type Body = { Body: Record<string, unknown> | undefined };

/** The E2B-shaped sandbox routes plus svc's /svc/sandbox extensions and /nodes. */
export function registerSandboxRoutes(app: FastifyInstance, master: MasterClient, domain: string): void {
  const create = async (req: { body: unknown }, reply: { status(n: number): unknown }) => {
    const sandbox = await master.createSandbox(parseNewSandbox(req.body));
    reply.status(201);
    return toE2bSandbox(sandbox, domain);
  };
  app.post('/sandboxes', create);
  app.post('/v2/sandboxes', create);

  app.get<{ Querystring: { metadata?: string } }>('/sandboxes', async (req) => {
    const out = [];
    let nextToken: string | undefined;
    do {
      const page = await master.listSandboxes({ metadata: req.query.metadata, state: 'running', limit: 1000, nextToken });
      out.push(...page.sandboxes.map((s) => toE2bListed(s, domain)));
      nextToken = page.nextToken;
    } while (nextToken);
    return out;
  });
  app.get<{ Querystring: { metadata?: string; state?: string | string[]; limit?: string; nextToken?: string; template?: string; order?: string; startedAfter?: string; startedBefore?: string } }>(
    '/v2/sandboxes', async (req, reply) => {
      const q = req.query;
      const state = Array.isArray(q.state) ? q.state.join(',') : q.state;
      const limit = q.limit === undefined ? undefined : Number(q.limit);
      if (limit !== undefined && !Number.isInteger(limit)) throw badRequest('limit must be an integer');
      const page = await master.listSandboxes({
        metadata: q.metadata, state, limit, nextToken: q.nextToken, template: q.template,
        order: q.order, startedAfter: q.startedAfter, startedBefore: q.startedBefore,
      });
      if (page.nextToken) reply.header('X-Next-Token', page.nextToken);
      reply.header('X-Total-Running', String(page.totalRunning));
      return page.sandboxes.map((s) => toE2bListed(s, domain));
    });

  app.get<Id>('/sandboxes/:sandboxID', async (req) => toE2bListed(await asE2b(master.getSandbox(req.params.sandboxID)), domain, true));
  app.delete<Id>('/sandboxes/:sandboxID', async (req, reply) => {
    await master.killSandbox(req.params.sandboxID);
    return reply.status(204).send();
  });
  app.post<Id>('/sandboxes/:sandboxID/pause', async (req, reply) => {
    await asE2b(master.pauseSandbox(req.params.sandboxID));
    return reply.status(204).send();
  });
  app.post<Id & Body>('/sandboxes/:sandboxID/resume', async (req, reply) => {
    const s = await asE2b(master.resumeSandbox(req.params.sandboxID, timeoutOf(req.body)));
    reply.status(201);
    return toE2bSandbox(s, domain);
  });
  const connect = async (req: { params: { sandboxID: string }; body: Record<string, unknown> | undefined }, reply: { status(n: number): unknown }) => {
    const r = await asE2b(master.connectSandbox(req.params.sandboxID, timeoutOf(req.body)));
    reply.status(r.resumed ? 201 : 200);
    return toE2bSandbox(r.sandbox, domain);
  };
  app.post<Id & Body>('/sandboxes/:sandboxID/connect', connect);
  app.post<Id & Body>('/v2/sandboxes/:sandboxID/connect', connect);
  app.post<Id & Body>('/sandboxes/:sandboxID/timeout', async (req, reply) => {
    if (req.body?.timeout === undefined) throw badRequest('timeout is required (seconds)');
    await asE2b(master.setTimeout(req.params.sandboxID, req.body.timeout as number));
    return reply.status(204).send();
  });
  app.post<Id & Body>('/sandboxes/:sandboxID/refreshes', async (req, reply) => {
    await asE2b(master.refresh(req.params.sandboxID, req.body?.duration as number | undefined));
    return reply.status(204).send();
  });
  app.put<Id & Body>('/sandboxes/:sandboxID/network', async (req, reply) => {
    await asE2b(master.updateNetwork(req.params.sandboxID, req.body));
    return reply.status(204).send();
  });
  app.get<Id & { Querystring: { start?: string; end?: string } }>('/sandboxes/:sandboxID/metrics', async (req) =>
    (await asE2b(master.metrics(req.params.sandboxID, { start: req.query.start, end: req.query.end }))).map(toE2bMetric));

  app.post<Body>('/svc/sandbox/timeout', async (req) => {
    const id = sandboxIdOf(req.body);
    if (req.body?.timeout === undefined) throw badRequest('timeout is required (seconds)');
    return endAtView(await master.setTimeout(id, req.body.timeout as number));
  });
  app.post<Body>('/svc/sandbox/refresh', async (req) => {
    const id = sandboxIdOf(req.body);
    return endAtView(await master.refresh(id, req.body?.duration as number | undefined));
  });

  app.get('/nodes', async () => master.listNodes());
  app.get<{ Params: { id: string } }>('/nodes/:id', async (req) => master.getNode(req.params.id));
  app.post<{ Params: { id: string }; Body: { labels?: Record<string, string> } | undefined }>('/nodes/:id/labels', async (req) =>
    master.addNodeLabels(req.params.id, req.body?.labels as Record<string, string>));
  app.delete<{ Params: { id: string }; Body: { names?: string[] } | undefined }>('/nodes/:id/labels', async (req) =>
    master.removeNodeLabels(req.params.id, req.body?.names as string[]));
}

/**
 * E2B answers every REST route of a sandbox that was killed or timed out with 404, which the
 * official SDK raises as SandboxNotFoundError; the master's 410 becomes that 404, its message
 * kept (docs/compatibility.md). The /svc/... routes keep the 410.
 */
function asE2b<T>(call: Promise<T>): Promise<T> {
  return call.catch((err: unknown) => {
    throw err instanceof SvcError && err.status === 410 ? new SvcError(404, err.message) : err;
  });
}

function timeoutOf(body: Record<string, unknown> | undefined): number | undefined {
  const t = body?.timeout;
  if (t === undefined || t === null) return undefined;
  if (typeof t !== 'number' || !Number.isInteger(t)) throw badRequest('timeout must be an integer number of seconds');
  return t;
}

function sandboxIdOf(body: Record<string, unknown> | undefined): string {
  const id = body?.sandbox_id ?? body?.sandboxID;
  if (typeof id !== 'string' || !id) throw badRequest('sandbox_id is required');
  return id;
}

function endAtView(s: { sandboxId: string; timeout: number; endAt?: string }) {
  return { sandbox_id: s.sandboxId, timeout: s.timeout, end_at: s.endAt ?? null };
}
