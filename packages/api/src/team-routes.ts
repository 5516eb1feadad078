import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { badRequest } from '@svc/common';
import { DEFAULT_TEAM_ID, TEAM_HEADER, TeamsClient, type ApiKeyRecord, type CreatedKey, type TeamRecord } from '@svc/contracts/teams';
import { identityOf, requireAdmin, teamHeaders } from './request-identity.ts';
import { presentedKey } from './auth.ts';
import type { MasterAddress } from './master-address.ts';

type Id = { Params: { id: string } };

/**
 * Teams and keys on the public API (docs/security.md): E2B's /teams, /api-keys and admin routes,
 * and svc's /svc/teams and /svc/keys. The admin key (svc up's) manages every team; a team key
 * sees and manages its own team's keys.
 */
export function registerTeamRoutes(app: FastifyInstance, master: MasterAddress): void {
  const operator = new TeamsClient(master.url, { headers: master.headers });
  const asCaller = (req: FastifyRequest) => new TeamsClient(master.url, { headers: { ...master.headers, ...teamHeaders(req) } });
  /** The team a team-scoped call is about: the key's; the admin key may name one in X-Team-ID (E2B's AdminTeamAuth). */
  const teamOf = (req: FastifyRequest): string => {
    const id = identityOf(req);
    const named = req.headers['x-team-id'];
    if (typeof named === 'string' && named && (!id || id.admin)) return named;
    return id?.teamId ?? DEFAULT_TEAM_ID;
  };
  const clientFor = (req: FastifyRequest) => (identityOf(req)?.admin || !identityOf(req) ? operator : asCaller(req));

  // E2B's team routes.
  app.get('/teams', async (req) => {
    const id = identityOf(req);
    const teams = await clientFor(req).listTeams();
    const key = presentedKey(req) ?? '';
    return teams.map((t) => ({ teamID: t.teamId, name: t.name, isDefault: t.isDefault, apiKey: id && t.teamId === id.teamId ? key : '' }));
  });
  app.get('/api-keys', async (req) => (await clientFor(req).listKeys(teamOf(req))).map(e2bKey));
  app.post('/api-keys', async (req, reply) => created(reply, e2bCreatedKey(await clientFor(req).createKey(teamOf(req), nameOf(req.body)))));
  app.patch<{ Params: { apiKeyID: string } }>('/api-keys/:apiKeyID', async (req, reply) => {
    await clientFor(req).renameKey(req.params.apiKeyID, nameOf(req.body));
    return reply.status(200).send();
  });
  app.delete<{ Params: { apiKeyID: string } }>('/api-keys/:apiKeyID', async (req, reply) => {
    await clientFor(req).revokeKey(req.params.apiKeyID);
    return reply.status(204).send();
  });

  // E2B's admin routes: the admin key only.
  app.post<{ Params: { teamID: string } }>('/admin/teams/:teamID/api-keys', async (req, reply) => {
    requireAdmin(req, 'admin routes');
    return created(reply, e2bCreatedKey(await operator.createKey(req.params.teamID, nameOf(req.body))));
  });
  app.delete<{ Params: { teamID: string; apiKeyID: string } }>('/admin/teams/:teamID/api-keys/:apiKeyID', async (req, reply) => {
    requireAdmin(req, 'admin routes');
    // Scoped to the named team by the master, as a team key's call is: another team's key is its 404.
    await new TeamsClient(master.url, { headers: { ...master.headers, [TEAM_HEADER]: req.params.teamID } }).revokeKey(req.params.apiKeyID);
    return reply.status(204).send();
  });
  app.post<{ Params: { teamID: string } }>('/admin/teams/:teamID/sandboxes/kill', async (req) => {
    requireAdmin(req, 'admin routes');
    return operator.killTeamSandboxes(req.params.teamID);
  });
  app.get('/admin/sandboxes/running-counts', async (req) => {
    requireAdmin(req, 'admin routes');
    return operator.runningCounts();
  });

  // svc's own: who the presented key is (the web console asks once at sign-in, docs/console.md);
  // with authentication off every call is the operator's, of the default team.
  app.get('/svc/whoami', async (req) => {
    const id = identityOf(req);
    const teamId = id?.teamId ?? DEFAULT_TEAM_ID;
    const team = await clientFor(req).getTeam(teamId);
    return { teamId, teamName: team.name, keyId: id?.keyId ?? null, admin: id ? id.admin : true };
  });

  // svc's own: what `svc team` and `svc key` call.
  app.post('/svc/teams', async (req, reply) => {
    requireAdmin(req, 'teams');
    const made = await operator.createTeam(req.body as never);
    return created(reply, { teamId: made.team.teamId, apiKey: made.key.apiKey, apiKeyId: made.key.keyId, team: made.team });
  });
  app.get('/svc/teams', async (req): Promise<TeamRecord[]> => clientFor(req).listTeams());
  app.get<Id>('/svc/teams/:id', async (req): Promise<TeamRecord> => clientFor(req).getTeam(req.params.id));
  app.patch<Id>('/svc/teams/:id', async (req) => {
    requireAdmin(req, 'team limits');
    return operator.setLimits(req.params.id, ((req.body ?? {}) as { limits?: never }).limits ?? {});
  });
  app.post<Id>('/svc/teams/:id/keys', async (req, reply) => created(reply, await clientFor(req).createKey(req.params.id, nameOf(req.body))));
  app.get<{ Querystring: { teamId?: unknown } }>('/svc/keys', async (req): Promise<ApiKeyRecord[]> => {
    const { teamId } = req.query;
    if (teamId !== undefined && typeof teamId !== 'string') throw badRequest('teamId must be given once');
    return clientFor(req).listKeys(teamId);
  });
  app.delete<Id>('/svc/keys/:id', async (req, reply) => {
    await clientFor(req).revokeKey(req.params.id);
    return reply.status(204).send();
  });
}

function created<T>(reply: FastifyReply, body: T): T {
  reply.status(201);
  return body;
}

function nameOf(body: unknown): string | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body !== 'object' || Array.isArray(body)) throw badRequest('the body must be {"name": ...}');
  const name = (body as { name?: unknown }).name;
  if (name !== undefined && typeof name !== 'string') throw badRequest('name must be a string');
  return name;
}

/** E2B's TeamAPIKey. */
function e2bKey(k: ApiKeyRecord) {
  return { id: k.keyId, name: k.name, mask: k.mask, createdAt: k.createdAt, createdBy: null, lastUsed: k.lastUsedAt ?? null };
}

function e2bCreatedKey(k: CreatedKey) {
  return { ...e2bKey(k), key: k.apiKey };
}
