import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { createHttpApp, servedRoutes, silentLogger, type SvcConfig } from '@svc/common';
import { CONTEXT_FILES_UPLOAD_PATH } from '@svc/contracts';
import { EGRESS_ADMIN_TOKEN_HEADER } from '@svc/contracts/egress';
import { IDENTITY_ROUTES } from '@svc/contracts/identity';
import { MASTER_DOWNLOAD_ROUTES } from '@svc/contracts/master-downloads';
import { routeGaps, type RouteTable } from '@svc/contracts/route-table';
import { SECRET_ROUTES } from '@svc/contracts/secrets';
import { TEMPLATE_CALLBACK_ROUTES } from '@svc/contracts/template-callback';
import { CALLBACK_TOKEN_HEADER } from '@svc/contracts/template-center';
import { DEFAULT_TEAM_ID, TEAM_HEADER, TEAM_ROUTES } from '@svc/contracts/teams';
import { MASTER_VOLUME_ROUTES, VOLUME_CONTENT_PATH } from '@svc/contracts/volumes';
import { ContextFiles } from './builds/context-files.ts';
import { registerMintRoute } from './identity/mint-route.ts';
import { registerIdentityRoutes } from './identity/routes.ts';
import { registerSecretRoutes } from './secrets/routes.ts';
import type { SecretService } from './secrets/service.ts';
import { TemplateCenterLayerStorage } from './snapshots/layer-storage.ts';
import { registerTeamRoutes, type TeamSandboxAdmin } from './teams/routes.ts';
import type { TeamService } from './teams/service.ts';
import type { BuildJobs } from './templates/build-jobs.ts';
import { registerCallbackRoute } from './templates/routes/callback.ts';
import { registerVolumeRoutes } from './volumes/routes.ts';
import type { VolumeService } from './volumes/service.ts';

const TOKEN = 'side-routes-token';
const HASH = 'a'.repeat(64);

/** A service whose every method answers what it was given: a call that gets past the schemas shows its arguments. */
function echo<T>(overrides: Record<string, unknown> = {}): T {
  return new Proxy({}, { get: (_t, name) => overrides[String(name)] ?? (async (...args: unknown[]) => ({ [String(name)]: args })) }) as T;
}

/** The master's team, key, secret, identity, volume, template callback and download routes, each module on its own app. */
const MODULES: Array<{ name: string; table: RouteTable; register: (app: FastifyInstance) => void | Promise<void>; inScope?: (url: string) => boolean }> = [
  { name: 'teams', table: TEAM_ROUTES, register: (app) => registerTeamRoutes(app, echo<TeamService>(), echo<TeamSandboxAdmin>()) },
  { name: 'secrets', table: SECRET_ROUTES, register: (app) => registerSecretRoutes(app, echo<SecretService>({ list: async (...args: unknown[]) => ({ secrets: { list: args } }) }), TOKEN) },
  {
    name: 'identity', table: IDENTITY_ROUTES,
    register: (app) => {
      registerIdentityRoutes(app, echo());
      registerMintRoute(app, echo(), { of: async () => undefined }, TOKEN);
    },
  },
  // The content API is every method passed through to a node agent (VOLUME_CONTENT_PATH), not a table's route.
  { name: 'volumes', table: MASTER_VOLUME_ROUTES, register: (app) => registerVolumeRoutes(app, echo<VolumeService>()), inScope: (url) => !url.startsWith(`${VOLUME_CONTENT_PATH}/`) },
  {
    name: 'template callback', table: TEMPLATE_CALLBACK_ROUTES,
    register: (app) => registerCallbackRoute(app, { callback_token: TOKEN, insecure_no_token: false } as SvcConfig['template_center'], echo<BuildJobs>()),
  },
  {
    // The context files upload is a route of the public document (CONTEXT_FILES_UPLOAD_PATH).
    name: 'downloads', table: MASTER_DOWNLOAD_ROUTES, inScope: (url) => !url.startsWith(`${CONTEXT_FILES_UPLOAD_PATH}/`),
    register: async (app) => {
      await new ContextFiles({ templateCenter: echo(), masterAddr: 'http://master', signingKey: 'k', logger: silentLogger(), records: {} as never, teamMaxBytes: 1 }).registerRoutes(app);
      new TemplateCenterLayerStorage(echo(), 'http://master').registerDownloadRoute(app);
    },
  },
];

async function appOf(register: (app: FastifyInstance) => void | Promise<void>): Promise<FastifyInstance> {
  const app = createHttpApp({ logger: silentLogger() });
  await register(app);
  await app.ready();
  return app;
}

async function send(app: FastifyInstance, method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await app.inject({ method, url, headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) }, ...(body !== undefined ? { payload: JSON.stringify(body) } : {}) });
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) as Record<string, unknown> : undefined };
}

/** Each case: [what, method, url, body, the 400's message, headers]. */
type BadInput = [string, 'GET' | 'POST' | 'PATCH', string, unknown, RegExp, Record<string, string>?];

async function refusesEach(app: FastifyInstance, cases: BadInput[]) {
  for (const [what, method, url, body, message, headers] of cases) {
    const r = await send(app, method, url, body, headers);
    assert.equal(r.status, 400, `${what}: ${JSON.stringify(r.body)}`);
    assert.match(String(r.body?.message), message, what);
  }
}

test('the master serves exactly the routes of its team, secret, identity, volume, callback and download tables', async (t) => {
  for (const m of MODULES) {
    await t.test(m.name, async () => {
      const app = await appOf(m.register);
      try {
        assert.deepEqual(routeGaps(m.table, servedRoutes(app), m.inScope), { unlisted: [], unserved: [] });
      } finally {
        await app.close();
      }
    });
  }
});

test('team and key routes: a bad body or query is a 400 naming the field; what was taken before still is', async () => {
  const app = await appOf(MODULES[0]!.register);
  try {
    await refusesEach(app, [
      ['no name', 'POST', '/v1/teams', {}, /^name is required$/],
      ['a name off the pattern', 'POST', '/v1/teams', { name: 'a b' }, /^name must match pattern/],
      ['an unknown field', 'POST', '/v1/teams', { name: 'x', extra: 1 }, /^extra is not a known field$/],
      ['a negative limit', 'POST', '/v1/teams', { name: 'x', limits: { maxSandboxes: -1 } }, /^limits\.maxSandboxes /],
      ['an unknown limit', 'POST', '/v1/teams', { name: 'x', limits: { nope: 1 } }, /^limits\.nope is not a known field$/],
      ['a list body', 'POST', '/v1/teams', [], /^request body must be object$/],
      ['a fractional limit', 'PATCH', '/v1/teams/t1', { limits: { maxVcpus: 1.5 } }, /^limits\.maxVcpus must be integer$/],
      ['limits as a list', 'PATCH', '/v1/teams/t1', { limits: [] }, /^limits must be object or null$/],
      ['another field beside limits', 'PATCH', '/v1/teams/t1', { limits: {}, name: 'x' }, /^name is not a known field$/],
      ['a numeric key name', 'POST', '/v1/teams/t1/keys', { name: 5 }, /^name must be string or null$/],
      ['a string body', 'POST', '/v1/teams/t1/keys', 'ci', /^request body must be object or null$/],
      ['another field in a rename', 'PATCH', '/v1/keys/k1', { name: 'x', other: 1 }, /^other is not a known field$/],
      ['a key hash that is not one', 'POST', '/internal/v1/keys/verify', { keyHash: 'xyz' }, /^keyHash must match pattern/],
      ['no key hash', 'POST', '/internal/v1/keys/verify', {}, /^keyHash is required$/],
      ['teamId given twice', 'GET', '/v1/keys?teamId=a&teamId=b', undefined, /^query parameter teamId must be string$/],
    ]);
    assert.equal((await send(app, 'POST', '/v1/teams', { bad: true }, { [TEAM_HEADER]: 't1' })).status, 404, 'a team key is refused before its body is looked at');
    assert.equal((await send(app, 'PATCH', '/v1/teams/t1', [], { [TEAM_HEADER]: 't1' })).status, 404);

    // Taken as before (the echoing service shows what the route passed on; undefined arrives as null).
    assert.deepEqual((await send(app, 'POST', '/v1/teams/t1/keys')).body, { createKey: [null, 't1', null] }, 'no body: the default name');
    assert.deepEqual((await send(app, 'POST', '/v1/teams/t1/keys', null)).body, { createKey: [null, 't1', null] });
    assert.deepEqual((await send(app, 'POST', '/v1/teams/t1/keys', { name: null })).body, { createKey: [null, 't1', null] });
    assert.deepEqual((await send(app, 'PATCH', '/v1/teams/t1', null)).body, { setLimits: [null, 't1', null] });
    assert.deepEqual((await send(app, 'PATCH', '/v1/teams/t1', { limits: null })).body, { setLimits: [null, 't1', null] });
    assert.deepEqual((await send(app, 'POST', '/v1/teams', { name: 'x', limits: { maxSandboxes: 0, maxRequestsPerMinute: 60 } })).body,
      { createTeam: [null, { name: 'x', limits: { maxSandboxes: 0, maxRequestsPerMinute: 60 } }] });
    assert.deepEqual((await send(app, 'POST', '/internal/v1/keys/verify', { keyHash: HASH, more: 1 })).body, { verify: [HASH] }, 'other fields are let through');
    assert.deepEqual((await send(app, 'GET', '/v1/keys?teamId=t1')).body, { listKeys: [null, 't1'] });
  } finally {
    await app.close();
  }
});

test('secret routes: a bad body or query is a 400 naming the field, the resolve route checks its token first', async () => {
  const app = await appOf(MODULES[1]!.register);
  const admin = { [EGRESS_ADMIN_TOKEN_HEADER]: TOKEN };
  try {
    await refusesEach(app, [
      ['no value', 'POST', '/secrets', { name: 'x' }, /^value is required$/],
      ['an empty value', 'POST', '/secrets', { name: 'x', value: '' }, /^value must NOT have fewer than 1 characters$/],
      ['a name off the pattern', 'POST', '/secrets', { name: 'a b', value: 'v' }, /^name must match pattern/],
      ['a numeric metadata value', 'POST', '/secrets', { name: 'x', value: 'v', metadata: { k: 1 } }, /^metadata\.k must be string$/],
      ['33 metadata entries', 'POST', '/secrets', { name: 'x', value: 'v', metadata: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v'])) }, /^metadata must NOT have more than 32 properties$/],
      ['an unknown field', 'POST', '/secrets', { name: 'x', value: 'v', secretID: 'sec_x' }, /^secretID is not a known field$/],
      ['a name in an update', 'POST', '/secrets/x', { value: 'v', name: 'y' }, /^name is not a known field$/],
      ['a null update', 'POST', '/secrets/x', null, /^request body must be object$/],
      ['a limit that is not a number', 'GET', '/secrets?limit=x', undefined, /^query parameter limit must match pattern/],
      ['a token given twice', 'GET', '/secrets?nextToken=a&nextToken=b', undefined, /^query parameter nextToken must be string$/],
      ['no names', 'POST', '/internal/v1/secrets/resolve', { teamId: 't' }, /^names is required$/, admin],
      ['65 names', 'POST', '/internal/v1/secrets/resolve', { teamId: 't', names: Array.from({ length: 65 }, (_, i) => `n${i}`) }, /^names must NOT have more than 64 items$/, admin],
      ['an empty team', 'POST', '/internal/v1/secrets/resolve', { teamId: '', names: [] }, /^teamId must NOT have fewer than 1 characters$/, admin],
    ]);
    assert.equal((await send(app, 'POST', '/internal/v1/secrets/resolve', { nonsense: true })).status, 403, 'no token: refused before the body is looked at');
    // Taken as before.
    assert.deepEqual((await send(app, 'GET', '/secrets?limit=')).body, { list: [DEFAULT_TEAM_ID, { limit: '' }] }, 'an empty limit is the default');
    assert.deepEqual((await send(app, 'POST', '/internal/v1/secrets/resolve', { teamId: 't', names: [] }, admin)).body, { resolve: ['t', []] });
  } finally {
    await app.close();
  }
});

test('identity, volume and callback routes: a bad body is a 400 naming the field; a token is checked before it', async () => {
  const identity = await appOf(MODULES[2]!.register);
  const volumes = await appOf(MODULES[3]!.register);
  const callback = await appOf(MODULES[4]!.register);
  try {
    const admin = { [EGRESS_ADMIN_TOKEN_HEADER]: TOKEN };
    await refusesEach(identity, [
      ['a numeric sandbox id', 'POST', '/internal/v1/identity/tokens', { sandboxId: 1, name: 'aws' }, /^sandboxId must be string$/, admin],
      ['no name', 'POST', '/internal/v1/identity/tokens', { sandboxId: 's' }, /^name is required$/, admin],
    ]);
    assert.equal((await send(identity, 'POST', '/internal/v1/identity/tokens', {})).status, 403, 'no token: refused before the body is looked at');
    assert.equal((await send(identity, 'POST', '/internal/v1/identity/tokens', { sandboxId: 's', name: 'aws', extra: 1 }, admin)).status, 404, 'other fields are let through');

    await refusesEach(volumes, [
      ['a numeric name', 'POST', '/svc/volume', { name: 5 }, /^name must be string$/],
      ['a null driver', 'POST', '/svc/volume', { driver: null }, /^driver must be string$/],
      ['a list body', 'POST', '/svc/volume', [], /^request body must be object or null$/],
    ]);
    assert.deepEqual((await send(volumes, 'POST', '/svc/volume')).body, { create: [DEFAULT_TEAM_ID, {}] }, 'no body: a volume with no name given');

    const token = { [CALLBACK_TOKEN_HEADER]: TOKEN };
    const status = '/internal/template/jobs/job-1/status';
    await refusesEach(callback, [
      ['an unknown status', 'POST', status, { status: 'DONE' }, /^status must be one of PENDING, RUNNING, BUILT, FAILED$/, token],
      ['an unknown phase', 'POST', status, { status: 'RUNNING', phase: 'COOKING' }, /^phase must be one of /, token],
      ['a BUILT report without its artifact', 'POST', status, { status: 'BUILT' }, /^artifact is required$/, token],
      ['a BUILT report with an empty artifact id', 'POST', status, { status: 'BUILT', artifact: { artifactId: '', sha256: 'x', sizeBytes: 1, storage: 'local', location: '/a' } }, /^artifact\.artifactId /, token],
      ['an artifact in an unknown store', 'POST', status, { status: 'BUILT', artifact: { artifactId: 'a', sha256: 'x', sizeBytes: 1, storage: 'ftp', location: '/a' } }, /^artifact\.storage must be one of local, s3$/, token],
    ]);
    assert.equal((await send(callback, 'POST', status, { status: 'DONE' })).status, 401, 'no token: refused before the body is looked at');
    assert.equal((await send(callback, 'POST', status, { status: 'RUNNING', phase: null, error: 5 }, token)).status, 204, 'a null phase and the unchecked fields are taken');
  } finally {
    await Promise.all([identity.close(), volumes.close(), callback.close()]);
  }
});
