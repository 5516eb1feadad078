import type { FastifyInstance } from 'fastify';
import { SANDBOX_ID_ATTRIBUTE, setSpanAttribute } from '@svc/common';
import { MASTER_EGRESS_ROUTES } from '@svc/contracts/egress-routes';
import { MASTER_ROUTES as R } from '@svc/contracts/master';
import { MASTER_INTERNAL_ROUTES as I } from '@svc/contracts/master-internal';
import { serve } from '@svc/contracts/route-table';
import { parseSandboxLogsQuery } from '@svc/contracts/sandbox-logs';
import { requireEgressAdmin } from '../egress-admin-auth.ts';
import type { MasterSandboxes } from './service.ts';
import { checkCreateInput, parseNetworkUpdate } from './create-input.ts';
import { callerTeam } from '../teams/caller.ts';

/**
 * Gateway-facing sandbox routes (MASTER_ROUTES) and the internal ones (MASTER_INTERNAL_ROUTES):
 * their schemas have checked every body and query before a handler runs, so the service takes
 * typed values. A create and a network update are checked by hand (create-input.ts): sizes in
 * bytes and E2B's two spellings are more than a schema says.
 */
export function registerSandboxRoutes(app: FastifyInstance, svc: MasterSandboxes, egressAdminToken = ''): void {
  serve(app, R.createSandbox, async (req, reply) => {
    const input = checkCreateInput(req.body);
    reply.status(201);
    const created = await svc.create(input, undefined, callerTeam(req));
    // The request named no sandbox: its span learns the id here (docs/observability.md, "Traces").
    setSpanAttribute(SANDBOX_ID_ATTRIBUTE, created.sandboxId);
    return created;
  });
  serve(app, R.listSandboxes, async (req) => svc.list(req.query, callerTeam(req)));
  serve(app, R.getSandbox, async (req) => svc.get(req.params.id));
  serve(app, R.killSandbox, async (req, reply) => {
    await svc.kill(req.params.id, 'killed');
    return reply.status(204).send();
  });
  serve(app, R.pauseSandbox, async (req) => svc.pause(req.params.id, 'api', memoryOpt(req.body.memory)));
  serve(app, R.updateNetwork, async (req) => svc.updateNetwork(req.params.id, parseNetworkUpdate(req.body)));
  serve(app, R.connectSandbox, async (req) => svc.connect(req.params.id, req.body.timeout ?? undefined, memoryOpt(req.body.memory)));
  serve(app, R.resumeSandbox, async (req) => svc.resume(req.params.id, req.body.timeout ?? undefined, memoryOpt(req.body.memory)));
  serve(app, R.setTimeout, async (req) => svc.setTimeout(req.params.id, req.body.timeout));
  serve(app, R.refresh, async (req) => svc.refresh(req.params.id, req.body.duration ?? undefined));
  serve(app, R.metrics, async (req) => svc.metrics(req.params.id, req.query));
  serve(app, R.sandboxLogs, async (req) => svc.logs(req.params.id, parseSandboxLogsQuery(req.query)));

  // The egress proxy loads its node's policies here at start; they hold the inject secrets.
  serve(app, MASTER_EGRESS_ROUTES.policies, async (req) => {
    requireEgressAdmin(req, egressAdminToken, 'load policies');
    return svc.egressPolicies(req.query.nodeId);
  });
  serve(app, MASTER_EGRESS_ROUTES.platformAddresses, async (req) => {
    requireEgressAdmin(req, egressAdminToken, 'load the platform\'s addresses');
    return svc.platformAddresses();
  });
  serve(app, I.route, async (req) => svc.route(req.params.id));
  serve(app, I.routeBySignature, async (req) => svc.routeBySignature(req.body));
  serve(app, I.activity, async (req, reply) => {
    await svc.activity(req.body.sandboxIds);
    return reply.status(204).send();
  });
  serve(app, I.due, async () => svc.due());
  // Node agents drop a sandbox's own packets to these; addresses and ports, no secret in them.
  serve(app, I.platformAddresses, async () => svc.platformAddresses());
  serve(app, I.pause, async (req) => {
    await svc.pause(req.params.id, req.body.reason);
    return svc.route(req.params.id);
  });
  serve(app, I.resume, async (req) => svc.resumeForTraffic(req.params.id, req.body.reason));
  serve(app, I.kill, async (req, reply) => {
    await svc.kill(req.params.id, req.body.reason === 'timeout' ? 'timeout' : 'killed');
    return reply.status(204).send();
  });
}

/** `memory` of a pause, connect or resume body: false asks for the files alone. */
function memoryOpt(memory: boolean | null | undefined): { memory?: boolean } {
  return memory === undefined || memory === null ? {} : { memory };
}
