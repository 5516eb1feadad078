import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import { SANDBOX_ID_ATTRIBUTE, setSpanAttribute, SvcError } from '@svc/common';
import type {
  PublicPath, WireForkRequest, WireNetworkUpdate, WireNewSandbox, WirePauseRequest, WireSnapshotRequest, WireNodeLabelNames, WireNodeLabels, WireRefresh, WireSetTimeout, WireSvcDeadline,
  WireSvcRefresh, WireSvcSetTimeout, WireTimeoutRequest,
} from '@svc/contracts';
import type { ListSandboxesQuery, MasterClient } from '@svc/contracts/master';
import type { SandboxLogsQuery } from '@svc/contracts/node-agent';
import { parseNewSandbox, toE2bDetail, toE2bListed, toE2bLogs, toE2bMetric, toE2bSandbox, toE2bSnapshot } from './e2b-shapes.ts';
import { documentedRoute } from '@svc/contracts/route-schemas';
import { requireAdmin, teamHeaders } from './request-identity.ts';

type Id = { sandboxID: string };
type Parts = { Params?: unknown; Querystring?: unknown; Body?: unknown };
type Handler<P extends Parts> = (req: FastifyRequest<P>, reply: FastifyReply) => Promise<unknown>;

/**
 * The E2B-shaped sandbox routes plus svc's /svc/sandbox extensions and /nodes. Each is registered
 * under its path in the public OpenAPI document, whose schemas check its input and shape its answer.
 */
export function registerSandboxRoutes(app: FastifyInstance, master: MasterClient, domain: string): void {
  const on = <P extends Parts>(method: HTTPMethods, path: PublicPath, handler: Handler<P>) =>
    app.route({ ...documentedRoute(method, path), handler: handler as Handler<Parts> });
  const noContent = (reply: FastifyReply) => reply.status(204).send();
  // Every call goes to the master on behalf of the key's team (docs/security.md).
  const m = (req: FastifyRequest) => master.with(teamHeaders(req));

  const create: Handler<{ Body: WireNewSandbox }> = async (req, reply) => {
    const sandbox = await m(req).createSandbox(parseNewSandbox(req.body));
    // The request named no sandbox: its span learns the id here (docs/observability.md, "Traces").
    setSpanAttribute(SANDBOX_ID_ATTRIBUTE, sandbox.sandboxId);
    reply.status(201);
    return toE2bSandbox(sandbox, domain);
  };
  on('POST', '/sandboxes', create);
  on('POST', '/v2/sandboxes', create);

  on<{ Querystring: { metadata?: string } }>('GET', '/sandboxes', async (req) => {
    const out = [];
    let nextToken: string | undefined;
    do {
      const page = await m(req).listSandboxes({ metadata: req.query.metadata, state: 'running', limit: 1000, nextToken });
      out.push(...page.sandboxes.map(toE2bListed));
      nextToken = page.nextToken;
    } while (nextToken);
    return out;
  });
  // The public document has checked these (order is asc or desc): the master's list query, states a list.
  type ListQuery = Omit<ListSandboxesQuery, 'state'> & { state?: string[] };
  on<{ Querystring: ListQuery }>('GET', '/v2/sandboxes', async (req, reply) => {
    const { state, ...q } = req.query;
    const page = await m(req).listSandboxes({ ...q, state: state?.join(',') });
    if (page.nextToken) reply.header('X-Next-Token', page.nextToken);
    reply.header('X-Total-Running', String(page.totalRunning));
    return page.sandboxes.map(toE2bListed);
  });

  on<{ Params: Id }>('GET', '/sandboxes/{sandboxID}', async (req) => toE2bDetail(await asE2b(m(req).getSandbox(req.params.sandboxID)), domain));
  on<{ Params: Id }>('DELETE', '/sandboxes/{sandboxID}', async (req, reply) => {
    await m(req).killSandbox(req.params.sandboxID);
    return noContent(reply);
  });
  on<{ Params: Id; Body?: WirePauseRequest }>('POST', '/sandboxes/{sandboxID}/pause', async (req, reply) => {
    await asE2b(m(req).pauseSandbox(req.params.sandboxID, memoryOf(req.body)));
    return noContent(reply);
  });
  on<{ Params: Id; Body?: WireTimeoutRequest }>('POST', '/sandboxes/{sandboxID}/resume', async (req, reply) => {
    const s = await asE2b(m(req).resumeSandbox(req.params.sandboxID, req.body?.timeout ?? undefined, memoryOf(req.body)));
    reply.status(201);
    return toE2bSandbox(s, domain);
  });
  const connect: Handler<{ Params: Id; Body?: WireTimeoutRequest }> = async (req, reply) => {
    const r = await asE2b(m(req).connectSandbox(req.params.sandboxID, req.body?.timeout ?? undefined, memoryOf(req.body)));
    reply.status(r.resumed ? 201 : 200);
    return toE2bSandbox(r.sandbox, domain);
  };
  on('POST', '/sandboxes/{sandboxID}/connect', connect);
  on('POST', '/v2/sandboxes/{sandboxID}/connect', connect);
  on<{ Params: Id; Body: WireSetTimeout }>('POST', '/sandboxes/{sandboxID}/timeout', async (req, reply) => {
    await asE2b(m(req).setTimeout(req.params.sandboxID, req.body.timeout));
    return noContent(reply);
  });
  on<{ Params: Id; Body?: WireRefresh }>('POST', '/sandboxes/{sandboxID}/refreshes', async (req, reply) => {
    await asE2b(m(req).refresh(req.params.sandboxID, req.body?.duration));
    return noContent(reply);
  });
  on<{ Params: Id; Body: WireNetworkUpdate }>('PUT', '/sandboxes/{sandboxID}/network', async (req, reply) => {
    await asE2b(m(req).updateNetwork(req.params.sandboxID, req.body));
    return noContent(reply);
  });
  on<{ Params: Id; Querystring: { start?: number; end?: number } }>('GET', '/sandboxes/{sandboxID}/metrics', async (req) =>
    (await asE2b(m(req).metrics(req.params.sandboxID, req.query))).map(toE2bMetric));

  on<{ Params: Id; Querystring: { start?: number; limit?: number } }>('GET', '/sandboxes/{sandboxID}/logs', async (req) =>
    toE2bLogs((await asE2b(m(req).sandboxLogs(req.params.sandboxID, { cursor: req.query.start, limit: req.query.limit }))).logs));
  on<{ Params: Id; Querystring: SandboxLogsQuery }>('GET', '/v2/sandboxes/{sandboxID}/logs', async (req) =>
    ({ logs: (await asE2b(m(req).sandboxLogs(req.params.sandboxID, req.query))).logs }));

  on<{ Params: Id; Body?: WireSnapshotRequest }>('POST', '/sandboxes/{sandboxID}/snapshots', async (req, reply) => {
    const s = await asE2b(m(req).createSnapshot(req.params.sandboxID, { ...(req.body?.name ? { name: req.body.name } : {}) }));
    reply.status(201);
    return toE2bSnapshot(s);
  });
  on<{ Querystring: { sandboxID?: string; name?: string; limit?: number; nextToken?: string } }>('GET', '/snapshots', async (req, reply) => {
    const page = await m(req).listSnapshots({ sandboxId: req.query.sandboxID, name: req.query.name, limit: req.query.limit, nextToken: req.query.nextToken });
    if (page.nextToken) reply.header('X-Next-Token', page.nextToken);
    return page.snapshots.map(toE2bSnapshot);
  });
  on<{ Params: Id; Body?: WireForkRequest }>('POST', '/sandboxes/{sandboxID}/fork', async (req, reply) => {
    const results = await asE2b(m(req).forkSandbox(req.params.sandboxID, { ...(req.body?.count === undefined ? {} : { count: req.body.count }), ...(req.body?.timeout === undefined ? {} : { timeout: req.body.timeout }) }));
    reply.status(201);
    return results.map((r) => (r.sandbox ? { sandbox: toE2bSandbox(r.sandbox, domain) } : { error: r.error ?? { code: 500, message: 'the fork did not start' } }));
  });

  on<{ Body: WireSvcSetTimeout }>('POST', '/svc/sandbox/timeout', async (req) =>
    deadlineOf(await m(req).setTimeout(req.body.sandbox_id, req.body.timeout)));
  on<{ Body: WireSvcRefresh }>('POST', '/svc/sandbox/refresh', async (req) =>
    deadlineOf(await m(req).refresh(req.body.sandbox_id, req.body.duration)));

  // Nodes are the operator's: the admin key only (docs/security.md).
  app.addHook('preHandler', async (req) => { if (req.routeOptions.url?.startsWith('/nodes')) requireAdmin(req, 'nodes'); });
  on('GET', '/nodes', async (req) => m(req).listNodes());
  on<{ Params: { id: string } }>('GET', '/nodes/{id}', async (req) => m(req).getNode(req.params.id));
  on<{ Params: { id: string }; Body: WireNodeLabels }>('POST', '/nodes/{id}/labels', async (req) => m(req).addNodeLabels(req.params.id, req.body.labels));
  on<{ Params: { id: string }; Body: WireNodeLabelNames }>('DELETE', '/nodes/{id}/labels', async (req) => m(req).removeNodeLabels(req.params.id, req.body.names));
  on<{ Params: { id: string } }>('POST', '/nodes/{id}/drain', async (req, reply) => reply.status(202).send(await m(req).drainNode(req.params.id)));
  on<{ Params: { id: string } }>('GET', '/nodes/{id}/drain', async (req) => m(req).drainStatus(req.params.id));
  on<{ Params: { id: string } }>('DELETE', '/nodes/{id}/drain', async (req) => m(req).undrainNode(req.params.id));
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

/** `memory: false` of a pause, connect or resume (free the memory, or boot from the files); nothing else is passed on. */
function memoryOf(body: { memory?: boolean } | undefined): { memory?: false } {
  return body?.memory === false ? { memory: false } : {};
}

function deadlineOf(s: { sandboxId: string; timeout: number; endAt?: string }): WireSvcDeadline {
  return { sandbox_id: s.sandboxId, timeout: s.timeout, end_at: s.endAt ?? null };
}
