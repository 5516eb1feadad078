import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { createHttpApp, randomId, silentLogger, type DatabaseConfig } from '@svc/common';
import { TEAM_HEADER } from '@svc/contracts/teams';
import type { NodeVolumeAttachment } from '@svc/contracts/volumes';
import { VolumePluginRegistry } from '@svc/volumes';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import { VolumeRepo } from './repo.ts';
import { registerVolumeRoutes } from './routes.ts';
import { VolumeService } from './service.ts';
import type { VolumeNodes } from './ports.ts';

const LOCAL_PLUGIN = fileURLToPath(new URL('../../../volumes/src/local-plugin/binary-main.ts', import.meta.url));

interface Answer { status: number; body: any }

async function call(app: FastifyInstance, method: 'GET' | 'POST' | 'DELETE', url: string, o: { team?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...(o.team ? { [TEAM_HEADER]: o.team } : {}), ...o.headers };
  if ('body' in o) headers['content-type'] = 'application/json';
  const res = await app.inject({ method, url, headers, ...('body' in o ? { payload: JSON.stringify(o.body) } : {}) });
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
}

/**
 * The master's volume routes and service on each engine, with the real local plugin (its
 * controller hooks run as a binary plugin) and nodes whose attachment lists the test sets.
 */
async function setup(config: DatabaseConfig) {
  const dir = await mkdtemp(join(tmpdir(), 'master-volumes-'));
  const plugin = join(dir, 'local');
  await writeFile(plugin, `#!/bin/sh\nSVC_LOCAL_VOLUME_ROOT='${join(dir, 'data')}' exec '${process.execPath}' --import tsx '${LOCAL_PLUGIN}' "$@"\n`);
  await chmod(plugin, 0o755);
  const failing = join(dir, 'failing');
  await writeFile(failing, '#!/bin/sh\necho \'{"error":"backend refused"}\'\n');
  await chmod(failing, 0o755);
  const db = await openDatabase(config);
  await migrate(db.kysely, db.driver, migrations);
  const held = new Map<string, NodeVolumeAttachment[]>();
  /** A node's agent, where the test runs one; else a port where nothing listens. */
  const urls = new Map<string, string>();
  const nodes: VolumeNodes = {
    live: async () => [...held.keys()].map((nodeId) => ({ nodeId, baseUrl: urls.get(nodeId) ?? 'http://127.0.0.1:9', headers: {} })),
    attachments: async (nodeId) => held.get(nodeId) ?? [],
    unreachableHolders: async () => [],
  };
  const plugins = new VolumePluginRegistry([{ name: 'local', type: 'binary', binary_path: plugin }, { name: 'failing', type: 'binary', binary_path: failing }]);
  const repo = new VolumeRepo(db.kysely);
  const service = new VolumeService({ repo, plugins, nodes, logger: silentLogger() });
  const app = createHttpApp({ logger: silentLogger() });
  await registerVolumeRoutes(app, service);
  await app.ready();
  return {
    app, service, repo, held, urls, dataDir: join(dir, 'data'),
    async close() {
      await app.close();
      await plugins.close();
      await db.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

for (const engine of availableTestDatabases()) {
  test(`master volumes on ${engine.driver}`, { skip: engine.skip }, async (t) => {
    const tdb = await engine.create!();
    const h = await setup(tdb.config);
    const teamA = `team-${randomId(8)}`;
    const teamB = `team-${randomId(8)}`;
    try {
      await t.test('create: 201 with the plugin\'s token; a name, or the id as the name; private data never shown', async () => {
        const named = await call(h.app, 'POST', '/svc/volume', { team: teamA, body: { name: 'work' } });
        assert.equal(named.status, 201);
        assert.deepEqual(Object.keys(named.body).sort(), ['name', 'token', 'volumeID']);
        assert.equal(named.body.name, 'work');
        assert.match(named.body.volumeID, /^[0-9a-f-]{36}$/);
        assert.match(named.body.token, /^svcvol_/);
        assert.ok(existsSync(join(h.dataDir, named.body.volumeID)), 'the plugin made its data');
        const unnamed = await call(h.app, 'POST', '/svc/volume', { team: teamA, body: {} });
        assert.equal(unnamed.status, 201);
        assert.equal(unnamed.body.name, unnamed.body.volumeID);
        const got = await call(h.app, 'GET', `/svc/volume/${named.body.volumeID}`, { team: teamA });
        assert.deepEqual(got.body, named.body);
        assert.deepEqual((await call(h.app, 'GET', '/svc/volume/work', { team: teamA })).body, named.body, 'by name too');
        const list = await call(h.app, 'GET', '/svc/volume', { team: teamA });
        assert.deepEqual(list.body.map((v: object) => Object.keys(v).sort()), [['name', 'volumeID'], ['name', 'volumeID']], 'no token in the list');
      });

      await t.test('bad input: names, drivers, duplicates', async () => {
        for (const name of ['bad name', 'a/b', 'x'.repeat(129), '', 'ünï', '-h', '--op']) {
          assert.equal((await call(h.app, 'POST', '/svc/volume', { team: teamA, body: { name } })).status, 400, JSON.stringify(name));
        }
        assert.match((await call(h.app, 'POST', '/svc/volume', { team: teamA, body: { name: '-h' } })).body.message, /must not begin with '-'/, 'a binary plugin would read it as a flag');
        assert.equal((await call(h.app, 'POST', '/svc/volume', { team: teamA, body: { name: 'a-' } })).status, 201, 'a dash elsewhere is fine');
        assert.equal((await call(h.app, 'POST', '/svc/volume', { team: teamA, body: { name: 5 } })).status, 400);
        const ok128 = await call(h.app, 'POST', '/svc/volume', { team: teamA, body: { name: 'n'.repeat(128) } });
        assert.equal(ok128.status, 201, 'a 128-character name is fine');
        assert.equal((await call(h.app, 'GET', `/svc/volume/${'n'.repeat(128)}`, { team: teamA })).status, 200);
        const unknown = await call(h.app, 'POST', '/svc/volume', { team: teamA, body: { name: 'x', driver: 'nfs' } });
        assert.equal(unknown.status, 400);
        assert.equal(unknown.body.code, 130400);
        assert.match(unknown.body.message, /unknown driver/);
        const dup = await call(h.app, 'POST', '/svc/volume', { team: teamA, body: { name: 'work' } });
        assert.equal(dup.status, 400);
        assert.match(dup.body.message, /already exists/);
        assert.equal((await call(h.app, 'POST', '/svc/volume', { team: teamB, body: { name: 'work' } })).status, 201, 'names are per team');
        const refused = await call(h.app, 'POST', '/svc/volume', { team: teamA, body: { name: 'refused', driver: 'failing' } });
        assert.equal(refused.status, 500);
        assert.equal(refused.body.message, 'the volume plugin \'failing\' could not create volume refused; the master\'s log has the detail', 'the plugin\'s own words (they may name host paths) go to the log');
        assert.equal((await call(h.app, 'GET', '/svc/volume/refused', { team: teamA })).status, 404, 'nothing recorded');
      });

      await t.test('teams see only their own; the operator sees all', async () => {
        const a = (await call(h.app, 'GET', '/svc/volume/work', { team: teamA })).body;
        assert.equal((await call(h.app, 'GET', `/svc/volume/${a.volumeID}`, { team: teamB })).status, 404);
        assert.equal((await call(h.app, 'DELETE', `/svc/volume/${a.volumeID}`, { team: teamB })).status, 404);
        assert.equal((await call(h.app, 'GET', `/svc/volume/${a.volumeID}`)).status, 200);
        assert.ok((await call(h.app, 'GET', '/svc/volume')).body.length >= 4);
        assert.equal((await call(h.app, 'GET', '/svc/volume/missing', { team: teamA })).status, 404);
      });

      await t.test('delete: 409 code 130409 while a node holds it, whatever the count says; then 204 and the data is gone', async () => {
        const v = (await call(h.app, 'GET', '/svc/volume/work', { team: teamA })).body;
        await h.service.applyFlips([{ volumeId: v.volumeID, delta: 1 }]);
        h.held.set('node-1', [{ volumeId: v.volumeID, driver: 'local', hostPath: '/x', refCount: 1, holders: ['sb1'] }]);
        const busy = await call(h.app, 'DELETE', `/svc/volume/${v.volumeID}`, { team: teamA });
        assert.equal(busy.status, 409);
        assert.equal(busy.body.code, 130409);
        // The count lost the node's -1 (a lost answer): the node's own list decides.
        h.held.set('node-1', []);
        assert.equal((await call(h.app, 'DELETE', '/svc/volume/work', { team: teamA })).status, 204);
        assert.equal(existsSync(join(h.dataDir, v.volumeID)), false, 'Destroy removed the backend data');
        assert.equal((await call(h.app, 'DELETE', `/svc/volume/${v.volumeID}`, { team: teamA })).status, 404);
        // A count that lags the other way: a node holds it but the count says 0.
        const w = (await call(h.app, 'POST', '/svc/volume', { team: teamA, body: { name: 'held' } })).body;
        h.held.set('node-2', [{ volumeId: w.volumeID, driver: 'local', hostPath: '/y', refCount: 1, holders: ['sb2'] }]);
        assert.equal((await call(h.app, 'DELETE', '/svc/volume/held', { team: teamA })).status, 409);
        h.held.clear();
      });

      await t.test('flips move the count, never below 0; a recount sets it from the nodes', async () => {
        const v = (await call(h.app, 'POST', '/svc/volume', { team: teamA, body: { name: 'counted' } })).body;
        const count = async () => (await h.service.refcounts()).find((r) => r.volumeID === v.volumeID)?.refcount;
        await h.service.applyFlips([{ volumeId: v.volumeID, delta: 1 }, { volumeId: v.volumeID, delta: 1 }]);
        assert.equal(await count(), 2);
        await h.service.applyFlips([{ volumeId: v.volumeID, delta: -1 }, { volumeId: v.volumeID, delta: -1 }, { volumeId: v.volumeID, delta: -1 }]);
        assert.equal(await count(), 0);
        h.held.set('n1', [{ volumeId: v.volumeID, driver: 'local', hostPath: '/a', refCount: 2, holders: ['s1', 's2'] }]);
        h.held.set('n2', [{ volumeId: v.volumeID, driver: 'local', hostPath: '/a', refCount: 1, holders: ['content:abc'] }]);
        await h.service.recount();
        assert.equal(await count(), 0, 'a difference seen once may be a create whose answer is on the way: left alone');
        await h.service.recount();
        assert.equal(await count(), 1, 'seen twice, it is mended: one node holds it for sandboxes (a content call does not count)');
        h.held.clear();
        await h.service.applyFlips([{ volumeId: v.volumeID, delta: 1 }]);
        await h.service.recount();
        await h.service.applyFlips([{ volumeId: v.volumeID, delta: -1 }]);
        await h.service.recount();
        assert.equal(await count(), 1, 'a difference that moved between recounts is not mended');
        await h.service.recount();
        assert.equal(await count(), 0);
      });

      await t.test('mounts resolve in the team by id or name; another team\'s volume is as missing as none', async () => {
        const v = (await call(h.app, 'GET', '/svc/volume/counted', { team: teamA })).body;
        const byName = await h.service.resolveMounts(teamA, [{ name: 'counted', path: '/a', readOnly: true }]);
        assert.equal(byName[0].onNode.volumeId, v.volumeID);
        assert.equal(byName[0].onNode.readOnly, true);
        await assert.rejects(h.service.resolveMounts(teamB, [{ name: v.volumeID, path: '/a', readOnly: false }]), { status: 404 });
        await assert.rejects(h.service.resolveMounts(teamA, [{ name: 'counted', path: '/a', readOnly: false }, { name: v.volumeID, path: '/b', readOnly: false }]), { status: 400 });
      });

      await t.test('content calls: the team, or the volume\'s token; anything else 401', async () => {
        const v = (await call(h.app, 'GET', '/svc/volume/counted', { team: teamA })).body;
        const url = `/svc/volumecontent/${v.volumeID}/path?path=/`;
        assert.equal((await call(h.app, 'GET', url, { headers: { authorization: 'Bearer wrong' } })).status, 401);
        assert.equal((await call(h.app, 'GET', url, { headers: { authorization: `Bearer ${v.token}x` } })).status, 401);
        assert.equal((await call(h.app, 'GET', `/svc/volumecontent/counted/path?path=/`, { headers: { authorization: `Bearer ${v.token}` } })).status, 401, 'a token goes with the id');
        // Authorized, but no node serves volumes here: 503, not a hang.
        assert.equal((await call(h.app, 'GET', url, { headers: { authorization: `Bearer ${v.token}` } })).status, 503);
        assert.equal((await call(h.app, 'GET', url, { team: teamA })).status, 503);
        assert.equal((await call(h.app, 'GET', url, { team: teamB })).status, 404);
        assert.equal((await call(h.app, 'GET', `/svc/volumecontent/${v.volumeID}/nope`, { team: teamA })).status, 404);
      });

      await t.test('a DELETE while a content call waits for its node is refused (409 130409); once the node answered, the call holds nothing more', async () => {
        const made = await call(h.app, 'POST', '/svc/volume', { team: teamA, body: { name: 'read-now' } });
        assert.equal(made.status, 201);
        // A node agent that answers the content call only when the test says.
        let answer!: () => void;
        const answered = new Promise<void>((r) => { answer = r; });
        let arrived!: () => void;
        const asked = new Promise<void>((r) => { arrived = r; });
        const agent = createServer((_req, res) => {
          arrived();
          void answered.then(() => res.writeHead(200, { 'content-type': 'application/json' }).end('[]'));
        });
        await new Promise<void>((r) => agent.listen(0, '127.0.0.1', r));
        h.urls.set('node-slow', `http://127.0.0.1:${(agent.address() as AddressInfo).port}`);
        h.held.set('node-slow', []);
        try {
          const reading = call(h.app, 'GET', `/svc/volumecontent/${made.body.volumeID}/path?path=/`, { team: teamA });
          await asked;
          const refused = await call(h.app, 'DELETE', '/svc/volume/read-now', { team: teamA });
          assert.deepEqual([refused.status, refused.body.code], [409, 130409], JSON.stringify(refused.body));
          answer();
          assert.equal((await reading).status, 200);
          assert.equal((await call(h.app, 'DELETE', '/svc/volume/read-now', { team: teamA })).status, 204);
        } finally {
          h.held.delete('node-slow');
          h.urls.delete('node-slow');
          agent.closeAllConnections();
          await new Promise((r) => agent.close(r));
        }
      });

      await t.test('names and ids are exact on every engine: Data and data are two volumes, each found by its own name only', async () => {
        const upper = await call(h.app, 'POST', '/svc/volume', { team: teamA, body: { name: 'Data' } });
        assert.equal(upper.status, 201);
        assert.equal((await call(h.app, 'GET', '/svc/volume/data', { team: teamA })).status, 404, 'data is not Data');
        const lower = await call(h.app, 'POST', '/svc/volume', { team: teamA, body: { name: 'data' } });
        assert.equal(lower.status, 201, JSON.stringify(lower.body));
        assert.notEqual(lower.body.volumeID, upper.body.volumeID);
        assert.equal((await call(h.app, 'GET', '/svc/volume/data', { team: teamA })).body.volumeID, lower.body.volumeID);
        assert.equal((await call(h.app, 'GET', '/svc/volume/Data', { team: teamA })).body.volumeID, upper.body.volumeID);
        assert.equal((await call(h.app, 'GET', '/svc/volume/DATA', { team: teamA })).status, 404);
        assert.equal((await call(h.app, 'GET', `/svc/volume/${upper.body.volumeID.toUpperCase()}`, { team: teamA })).status, 404);
        assert.equal((await h.service.resolveMounts(teamA, [{ name: 'data', path: '/a', readOnly: false }]))[0].onNode.volumeId, lower.body.volumeID);
        await assert.rejects(h.service.resolveMounts(teamA, [{ name: 'DATA', path: '/a', readOnly: false }]), { status: 404 });
        assert.equal((await call(h.app, 'DELETE', '/svc/volume/data', { team: teamA })).status, 204);
        assert.equal((await call(h.app, 'GET', '/svc/volume/Data', { team: teamA })).body.volumeID, upper.body.volumeID, 'the other is left');
        assert.equal((await call(h.app, 'DELETE', '/svc/volume/Data', { team: teamA })).status, 204);
      });
    } finally {
      await h.close();
      await tdb.drop();
    }
  });
}
