import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { RateLimitError, Sandbox, Secret } from 'e2b';
import { silentLogger } from '@svc/common';
import { startMasterOverFakeNode } from '@svc/master/testing/master-over-fake-node';
import { API_KEY_PATTERN } from '@svc/contracts/teams';
import { PUBLIC_API } from '@svc/contracts';
import { auditLogPath, startApiGateway } from './index.ts';
import { KEY_CACHE_MS } from './key-verifier.ts';

const ADMIN = 'e2b_00000000000000000000000000000000000000ad';

async function platform() {
  const m = await startMasterOverFakeNode((c) => {
    c.api.api_key = ADMIN;
    c.api.max_failed_keys_per_min = 5;
  });
  const gw = await startApiGateway(m.cfg, { logger: silentLogger(), masterUrl: m.master.url });
  const call = async (key: string | undefined, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(gw.url + path, {
      method,
      headers: { ...(key ? { 'x-api-key': key } : {}), ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: unknown;
    try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = text; }
    return { status: res.status, headers: res.headers, body: parsed as any };
  };
  const sdk = (key: string) => ({ apiKey: key, apiUrl: gw.url, domain: 'localhost:1' });
  return { ...m, gw, call, sdk, async close() { await gw.close(); await m.close(); } };
}

test('teams: keys, isolation, quotas, revocation, the vault, audit', async (t) => {
  const p = await platform();
  try {
    const made = async (name: string, limits?: object) => {
      const r = await p.call(ADMIN, 'POST', '/svc/teams', { name, ...(limits ? { limits } : {}) });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      return r.body as { teamId: string; apiKey: string; apiKeyId: string };
    };
    const a = await made('team-a');
    const b = await made('team-b', { maxSandboxes: 1 });

    await t.test('a team is made with the admin key only, with a key in E2B\'s format, shown once', async () => {
      assert.match(a.apiKey, API_KEY_PATTERN);
      assert.equal((await p.call(a.apiKey, 'POST', '/svc/teams', { name: 'sneaky' })).status, 403, 'a team key makes no teams');
      assert.equal((await p.call(ADMIN, 'POST', '/svc/teams', { name: 'team-a' })).status, 409, 'names are unique');
      for (const bad of [{}, { name: '' }, { name: 'a b' }, { name: 'x', limits: { maxSandboxes: -1 } }, { name: 'x', limits: { nope: 1 } }, { name: 'x', extra: 1 }]) {
        assert.equal((await p.call(ADMIN, 'POST', '/svc/teams', bad)).status, 400, JSON.stringify(bad));
      }
      const keys = (await p.call(a.apiKey, 'GET', '/api-keys')).body as Array<{ id: string; mask: { maskedValueSuffix: string }; key?: string }>;
      assert.equal(keys.length, 1);
      assert.equal(keys[0]!.mask.maskedValueSuffix, a.apiKey.slice(-4));
      assert.ok(!JSON.stringify(keys).includes(a.apiKey), 'a listed key never shows its value');
      const db = readFileSync((p.cfg.master.database as { path: string }).path);
      assert.ok(!db.includes(Buffer.from(a.apiKey)), 'the database holds no key, only its hash');
    });

    await t.test('/svc/whoami names the key\'s team and whether it is the admin key', async () => {
      const team = await p.call(a.apiKey, 'GET', '/svc/whoami');
      assert.deepEqual({ ...team.body, keyId: typeof team.body.keyId }, { teamId: a.teamId, teamName: 'team-a', keyId: 'string', admin: false });
      const admin = await p.call(ADMIN, 'GET', '/svc/whoami');
      assert.equal(admin.body.admin, true);
    });

    await t.test('E2B\'s /api-keys: create, rename, delete a key of one\'s own team', async () => {
      const k = await p.call(a.apiKey, 'POST', '/api-keys', { name: 'ci' });
      assert.equal(k.status, 201);
      assert.match(k.body.key, API_KEY_PATTERN);
      assert.equal((await p.call(k.body.key, 'GET', '/v2/sandboxes')).status, 200, 'the new key opens the API');
      assert.equal((await p.call(a.apiKey, 'PATCH', `/api-keys/${k.body.id}`, { name: 'ci-2' })).status, 200);
      assert.equal((await p.call(b.apiKey, 'PATCH', `/api-keys/${k.body.id}`, { name: 'x' })).status, 404, 'another team\'s key is not found');
      assert.equal((await p.call(b.apiKey, 'DELETE', `/api-keys/${k.body.id}`)).status, 404);
      assert.equal((await p.call(a.apiKey, 'DELETE', `/api-keys/${k.body.id}`)).status, 204);
      const teams = (await p.call(a.apiKey, 'GET', '/teams')).body as Array<{ teamID: string; apiKey: string }>;
      assert.deepEqual(teams.map((x) => x.teamID), [a.teamId], 'a team key sees its own team only');
    });

    const sbxA = (await p.call(a.apiKey, 'POST', '/sandboxes', { templateID: 'base' })).body.sandboxID as string;
    const snapA = await p.call(a.apiKey, 'POST', `/sandboxes/${sbxA}/snapshots`, { name: 'snap-of-a' });
    await Secret.create('db-password', 'hunter2-team-a', p.sdk(a.apiKey));

    await t.test('isolation: team B sees none of team A\'s resources; every route answers 404 as for a missing id', async () => {
      assert.equal(snapA.status, 201, JSON.stringify(snapA.body));
      // Every route of the OpenAPI document that names a sandbox, with a body its schema takes.
      const bodies: Record<string, unknown> = { '/sandboxes/{sandboxID}/timeout': { timeout: 10 }, '/sandboxes/{sandboxID}/connect': { timeout: 10 }, '/v2/sandboxes/{sandboxID}/connect': { timeout: 10 } };
      const routes: Array<[string, string, unknown?]> = [];
      for (const [path, item] of Object.entries(PUBLIC_API.paths)) {
        if (!path.includes('{sandboxID}')) continue;
        for (const method of Object.keys(item)) routes.push([method.toUpperCase(), path.replace('{sandboxID}', sbxA), method === 'get' || method === 'delete' ? undefined : bodies[path] ?? {}]);
      }
      assert.ok(routes.length >= 14, `the document names ${routes.length} sandbox routes`);
      routes.push(
        ['POST', '/svc/sandbox/timeout', { sandbox_id: sbxA, timeout: 10 }], ['POST', '/svc/sandbox/refresh', { sandbox_id: sbxA }],
        ['DELETE', '/templates/snap-of-a'], ['GET', '/secrets/db-password'], ['POST', '/secrets/db-password', { value: 'x' }], ['DELETE', '/secrets/db-password'],
      );
      for (const [method, path, body] of routes) {
        const r = await p.call(b.apiKey, method, path, body);
        const missing = await p.call(b.apiKey, method, path.replace(sbxA, 'i0000000000000000000').replace('snap-of-a', 'no-such-snap').replace('db-password', 'no-such-secret'), body);
        assert.equal(r.status, 404, `${method} ${path}: ${JSON.stringify(r.body)}`);
        assert.equal(r.status, missing.status, `${method} ${path} answers as for a missing id`);
      }
      const listed = (await p.call(b.apiKey, 'GET', '/v2/sandboxes?state=running&state=paused')).body as Array<{ sandboxID: string }>;
      assert.deepEqual(listed, [], 'team B lists none of A\'s sandboxes');
      assert.deepEqual((await p.call(b.apiKey, 'GET', '/snapshots')).body, []);
      assert.equal((await p.call(b.apiKey, 'GET', '/v2/sandboxes')).headers.get('x-total-running'), '0');
      assert.equal((await p.call(b.apiKey, 'POST', '/sandboxes', { templateID: 'snap-of-a' })).status, 404, 'nor starts from A\'s snapshot');
      assert.equal((await p.call(b.apiKey, 'POST', `/sandboxes/${sbxA}/snapshots`, { name: 'snap-of-a' })).status, 404);
      assert.equal((await p.call(a.apiKey, 'GET', `/sandboxes/${sbxA}`)).status, 200, 'A still has it');
      assert.equal((await p.call(a.apiKey, 'GET', '/secrets/db-password')).status, 200);
      assert.equal(await Sandbox.kill(sbxA, p.sdk(b.apiKey)), false, 'the SDK\'s kill with B\'s key finds nothing');
      assert.equal(await Secret.exists('db-password', p.sdk(b.apiKey)), false);
      assert.deepEqual(await Secret.list(p.sdk(b.apiKey)).nextItems(), []);
      // The operator's routes.
      for (const [method, path] of [['GET', '/nodes'], ['GET', '/admin/sandboxes/running-counts'], ['POST', `/admin/teams/${a.teamId}/sandboxes/kill`], ['GET', '/svc/template/artifact/download?artifact_id=a']] as const) {
        assert.equal((await p.call(b.apiKey, method, path)).status, 403, `${method} ${path} needs the admin key`);
      }
      // Templates from files on the platform's host: the template center would read them as root for any team.
      for (const [path, body] of [
        ['/svc/template', { rootfs_tar: '/var/lib/svc/artifacts/other.tar' }], ['/svc/template/from-image', { oci_layout: '/' }],
        ['/templates', { docker_archive: '/dev/zero' }], ['/svc/template?x=1', { rootfs_tar: '/etc/shadow', alias: 'x' }],
      ] as const) {
        const r = await p.call(b.apiKey, 'POST', path, body);
        assert.equal(r.status, 403, `${path} ${JSON.stringify(body)}`);
        assert.match(r.body.message, /^templates made from files on the platform's host \((rootfs_tar|oci_layout|docker_archive)\) are the operator's: this needs the admin API key/);
        assert.notEqual((await p.call(ADMIN, 'POST', path, body)).status, 403, `the admin key may: ${path}`);
      }
      assert.notEqual((await p.call(b.apiKey, 'POST', '/svc/template', { image: 'registry.example/app:1' })).status, 403, 'a registry image is any team\'s');
      assert.notEqual((await p.call(b.apiKey, 'POST', '/svc/template', { rootfs_tar: '' })).status, 403, 'an empty field names no file (the master\'s to refuse)');
      assert.equal((await p.call(b.apiKey, 'GET', '/v2/sandboxes', undefined, { 'x-svc-team': a.teamId })).body.length, 0, 'a team header sent by a client is not believed');
    });

    await t.test('quotas: over maxSandboxes E2B\'s 429 names the limit and the use, and nothing starts', async () => {
      const first = await Sandbox.create('base', p.sdk(b.apiKey)).catch((e: Error) => e);
      assert.ok(!(first instanceof Error), String(first));
      const before = p.node.sandboxes.size;
      const second = await Sandbox.create('base', p.sdk(b.apiKey)).catch((e: Error) => e);
      assert.ok(second instanceof RateLimitError, `RateLimitError, got ${String(second)}`);
      assert.match(second.message, /maxSandboxes.*1.*uses 1/);
      assert.equal(p.node.sandboxes.size, before, 'nothing was started on the node');
      await p.call(ADMIN, 'PATCH', `/svc/teams/${b.teamId}`, { limits: { maxSandboxes: 0, maxMemoryMB: 300 } });
      const third = await p.call(b.apiKey, 'POST', '/sandboxes', { templateID: 'base', memoryMB: 256 });
      assert.equal(third.status, 429, 'the memory quota counts the running sandbox\'s 256 MB');
      assert.match(third.body.message, /maxMemoryMB/);
      const counts = (await p.call(ADMIN, 'GET', '/admin/sandboxes/running-counts')).body as Record<string, number>;
      assert.equal(counts[b.teamId], 1);
      const killed = await p.call(ADMIN, 'POST', `/admin/teams/${b.teamId}/sandboxes/kill`);
      assert.deepEqual(killed.body, { killedCount: 1, failedCount: 0 });
    });

    await t.test('request rate: over maxRequestsPerMinute 429 with Retry-After', async () => {
      const c = await made('team-c', { maxRequestsPerMinute: 3 });
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push((await p.call(c.apiKey, 'GET', '/v2/sandboxes')).status);
      assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
      const r = await p.call(c.apiKey, 'GET', '/v2/sandboxes');
      assert.ok(Number(r.headers.get('retry-after')) >= 1);
      assert.match(r.body.message, /maxRequestsPerMinute/);
    });

    await t.test('revocation: a revoked key is refused within a second', async () => {
      const k = (await p.call(ADMIN, 'POST', `/admin/teams/${a.teamId}/api-keys`, { name: 'short-lived' })).body;
      assert.equal((await p.call(k.key, 'GET', '/v2/sandboxes')).status, 200);
      assert.equal((await p.call(ADMIN, 'DELETE', `/admin/teams/${b.teamId}/api-keys/${k.id}`)).status, 404, 'the key is A\'s, not B\'s');
      assert.equal((await p.call(ADMIN, 'DELETE', `/admin/teams/${a.teamId}/api-keys/${k.id}`)).status, 204);
      await new Promise((r) => setTimeout(r, KEY_CACHE_MS + 50));
      assert.equal((await p.call(k.key, 'GET', '/v2/sandboxes')).status, 401);
    });

    await t.test('failed key checks from one address are cut off with 429', async () => {
      const statuses = [];
      for (let i = 0; i < 7; i++) statuses.push((await p.call(`e2b_${'f'.repeat(39)}${i}`, 'GET', '/v2/sandboxes')).status);
      // The limit is 5 a minute; the revoked key's refusal above was one of them.
      const cut = statuses.indexOf(429);
      assert.ok(cut >= 4 && cut <= 5 && statuses.slice(cut).every((s) => s === 429), statuses.join(','));
      assert.equal((await p.call(ADMIN, 'GET', '/v2/sandboxes')).status, 200, 'a good key from that address is served: only failing checks wait');
    });

    await t.test('audit: mutating calls are recorded with key, team, resource and result; no secret value', async () => {
      await new Promise((r) => setTimeout(r, 200));
      const lines = readFileSync(auditLogPath(p.cfg), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      const secretCreate = lines.find((l) => l.method === 'POST' && l.path === '/secrets');
      assert.equal(secretCreate.team_id, a.teamId);
      assert.equal(secretCreate.status, 201);
      assert.ok(lines.some((l) => l.method === 'DELETE' && l.resource === sbxA && l.status === 404 && l.team_id === b.teamId), 'B\'s refused kill of A\'s sandbox');
      assert.ok(!readFileSync(auditLogPath(p.cfg), 'utf8').includes('hunter2'), 'no secret value');
      assert.ok(!lines.some((l) => l.method === 'GET'), 'reads are not audited');
    });
  } finally {
    await p.close();
  }
});
