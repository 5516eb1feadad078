/**
 * The API gateway's sandbox and node routes through to the master, in E2B's wire shapes: the
 * lifecycle (pause, connect, resume, timeouts, delete), lists with their filters and pages,
 * metrics, logs, the egress lists, node labels, and the official e2b SDK driving them; and what
 * the master does when its database refuses a row, holds a damaged one, or is gone. The fixture
 * is testing/gateway-fixture.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox } from 'e2b';
import type { SandboxLogEntry } from '@svc/contracts/node-agent';
import { CLUSTER_TOKEN, KEY, platform } from './testing/gateway-fixture.ts';
import { clusterHeaders } from '@svc/contracts/cluster-token';

test('API gateway: sandbox and node routes over the master', async (t) => {
  const p = await platform();
  try {
    await t.test('a create the master cannot record stops the sandbox and leaves no row', async () => {
      const { sql } = await import('kysely');
      await sql`CREATE TRIGGER no_insert BEFORE INSERT ON t_svc_sandbox BEGIN SELECT RAISE(ABORT, 'disk is full'); END`.execute(p.master.db.kysely);
      try {
        const r = await p.call('POST', '/v2/sandboxes', { templateID: 'base' });
        assert.equal(r.status, 503);
        assert.match(r.body.message, /could not be recorded/);
        const created = p.node.calls.filter((c) => c.startsWith('create ')).at(-1)!.slice(7);
        for (let i = 0; i < 50 && p.node.sandboxes.has(created); i++) await new Promise((res) => setTimeout(res, 20));
        assert.equal(p.node.sandboxes.has(created), false, 'the started sandbox was removed');
      } finally {
        await sql`DROP TRIGGER no_insert`.execute(p.master.db.kysely);
      }
    });

    await t.test('a damaged row is skipped by lists and shown on the health route', async () => {
      const ok = await p.call('POST', '/v2/sandboxes', { templateID: 'base', metadata: { damage: 'test' } });
      await p.master.db.kysely.updateTable('t_svc_sandbox').set({ end_at: 9.9e18, metadata: '{nope' }).where('sandbox_id', '=', ok.body.sandboxID).execute();
      assert.equal((await p.call('GET', '/sandboxes')).status, 200);
      const v2 = await p.call('GET', '/v2/sandboxes');
      assert.equal(v2.status, 200);
      assert.ok(!v2.body.some((s: { sandboxID: string }) => s.sandboxID === ok.body.sandboxID));
      const health = await (await fetch(`${p.master.url}/notify/health`)).json() as { damagedSandboxRows: Array<{ sandboxId: string }> };
      assert.ok(health.damagedSandboxRows.some((d) => d.sandboxId === ok.body.sandboxID));
      await p.master.db.kysely.deleteFrom('t_svc_sandbox').where('sandbox_id', '=', ok.body.sandboxID).execute();
    });

    await t.test('lifecycle routes: pause 204/409, connect 201/200, resume, timeout, refreshes, delete 204/404', async () => {
      const c = await p.call('POST', '/v2/sandboxes', { templateID: 'base', timeout: 60, autoPause: true, autoResume: { enabled: true } });
      const id = c.body.sandboxID;
      const detail = await p.call('GET', `/sandboxes/${id}`);
      assert.deepEqual(detail.body.lifecycle, { onTimeout: 'pause', autoResume: true });
      assert.equal((await p.call('POST', `/sandboxes/${id}/pause`)).status, 204);
      assert.equal((await p.call('POST', `/sandboxes/${id}/pause`)).status, 409);
      const paused = await p.call('GET', `/sandboxes/${id}`);
      assert.equal(paused.body.state, 'paused');
      assert.equal(paused.body.pauseKind, 'freeze');
      assert.equal(paused.body.endAt, detail.body.endAt, 'pause keeps endAt');
      assert.equal((await p.call('POST', `/v2/sandboxes/${id}/connect`, { timeout: 0 })).status, 400);
      assert.equal((await p.call('POST', `/v2/sandboxes/${id}/connect`, {})).status, 201);
      assert.equal((await p.call('POST', `/sandboxes/${id}/connect`, { timeout: 30 })).status, 200);
      assert.equal((await p.call('POST', `/sandboxes/${id}/pause`)).status, 204);
      assert.equal((await p.call('POST', `/sandboxes/${id}/resume`, { timeout: -2 })).status, 400);
      assert.equal((await p.call('POST', `/sandboxes/${id}/resume`, { timeout: 100 })).status, 201);
      assert.equal((await p.call('POST', `/sandboxes/${id}/timeout`, { timeout: 10 })).status, 204);
      const ext = await p.call('POST', '/svc/sandbox/timeout', { sandbox_id: id, timeout: 20 });
      assert.equal(ext.status, 200);
      assert.ok(Date.parse(ext.body.end_at) > Date.now() + 19_000);
      const ref = await p.call('POST', '/svc/sandbox/refresh', { sandbox_id: id });
      assert.equal(ref.body.timeout, 20);
      assert.equal((await p.call('POST', `/sandboxes/${id}/refreshes`, { duration: 30 })).status, 204);
      const m = await p.call('GET', `/sandboxes/${id}/metrics`);
      assert.equal(m.status, 200);
      for (const f of ['timestamp', 'timestampUnix', 'cpuCount', 'cpuUsedPct', 'memUsed', 'memTotal', 'memCache', 'diskUsed', 'diskTotal']) assert.ok(f in m.body[0], f);
      assert.equal((await p.call('DELETE', `/sandboxes/${id}`)).status, 204);
      assert.equal((await p.call('DELETE', `/sandboxes/${id}`)).status, 404);
      // E2B's answer for a killed sandbox on its REST routes is 404 (the SDK's SandboxNotFoundError), message kept.
      const killed = await p.call('GET', `/sandboxes/${id}`);
      assert.equal(killed.status, 404);
      assert.match(killed.body.message, /was killed/);
      assert.equal((await p.call('POST', `/sandboxes/${id}/connect`, { timeout: 10 })).status, 404);
      assert.equal((await p.call('POST', `/sandboxes/${id}/timeout`, { timeout: 10 })).status, 404);
      assert.equal((await p.call('POST', '/svc/sandbox/timeout', { sandbox_id: id, timeout: 10 })).status, 410, 'svc routes keep their 410 (docs/compatibility.md)');
    });

    await t.test('list v2: state filter, metadata filter, limit with X-Next-Token', async () => {
      const tag = `t${Date.now()}`;
      for (let i = 0; i < 3; i++) await p.call('POST', '/v2/sandboxes', { templateID: 'base', metadata: { tag } });
      const q = encodeURIComponent(new URLSearchParams({ tag }).toString());
      const first = await p.call('GET', `/v2/sandboxes?metadata=${q}&limit=2`);
      assert.equal(first.body.length, 2);
      const token = first.headers.get('x-next-token');
      assert.ok(token);
      const second = await p.call('GET', `/v2/sandboxes?metadata=${q}&limit=2&nextToken=${token}`);
      assert.equal(second.body.length, 1);
      assert.equal(second.headers.get('x-next-token'), null);
      const running = await p.call('GET', `/v2/sandboxes?metadata=${q}&state=running,paused`);
      assert.equal(running.body.length, 3);
      assert.equal((await p.call('GET', '/v2/sandboxes?state=weird')).status, 400);
    });

    await t.test('list v2: order, startedAfter/startedBefore and X-Total-Running as E2B\'s openapi says', async () => {
      const tag = `o${Date.now()}`;
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        ids.push((await p.call('POST', '/v2/sandboxes', { templateID: 'base', metadata: { tag } })).body.sandboxID);
        await new Promise((r) => setTimeout(r, 15));
      }
      const q = `metadata=${encodeURIComponent(`tag=${tag}`)}`;
      const listed = async (extra: string) => ((await p.call('GET', `/v2/sandboxes?${q}&${extra}`)).body as Array<{ sandboxID: string; startedAt: string }>);
      assert.deepEqual((await listed('')).map((s) => s.sandboxID), [...ids].reverse(), 'newest first by default');
      assert.deepEqual((await listed('order=asc')).map((s) => s.sandboxID), ids);
      // Pages in ascending order continue in ascending order.
      const first = await p.call('GET', `/v2/sandboxes?${q}&order=asc&limit=2`);
      const rest = await p.call('GET', `/v2/sandboxes?${q}&order=asc&limit=2&nextToken=${first.headers.get('x-next-token')}`);
      assert.deepEqual([...first.body, ...rest.body].map((s: { sandboxID: string }) => s.sandboxID), ids);
      assert.equal(rest.headers.get('x-next-token'), null);
      // A page that ends on the filter's last match has no next token, whatever else runs (as E2B).
      await p.call('POST', '/v2/sandboxes', { templateID: 'base', metadata: { tag: 'someone-else' } });
      for (const order of ['asc', 'desc']) {
        const exact = await p.call('GET', `/v2/sandboxes?${q}&order=${order}&limit=3`);
        assert.equal(exact.body.length, 3);
        assert.equal(exact.headers.get('x-next-token'), null, order);
      }
      const all = await listed('order=asc');
      const middle = all[1].startedAt;
      assert.deepEqual((await listed(`startedAfter=${encodeURIComponent(middle)}&order=asc`)).map((s) => s.sandboxID), ids.slice(1));
      assert.deepEqual((await listed(`startedBefore=${encodeURIComponent(middle)}&order=asc`)).map((s) => s.sandboxID), ids.slice(0, 2));
      assert.deepEqual(await listed('startedAfter=2999-01-01T00:00:00Z'), []);
      const running = await p.call('GET', '/v2/sandboxes?limit=1');
      assert.ok(Number(running.headers.get('x-total-running')) >= 3, 'X-Total-Running counts every running sandbox');
      const bad = await p.call('GET', '/v2/sandboxes?order=sideways');
      assert.equal(bad.status, 400);
      assert.match(bad.body.message, /order/);
      const badTime = await p.call('GET', '/v2/sandboxes?startedAfter=yesterday');
      assert.equal(badTime.status, 400);
      assert.match(badTime.body.message, /startedAfter/);
    });

    await t.test('metrics: start and end (unix seconds) bound what comes back', async () => {
      const id = (await p.call('POST', '/v2/sandboxes', { templateID: 'base' })).body.sandboxID;
      const now = Math.floor(Date.now() / 1000);
      assert.equal((await p.call('GET', `/sandboxes/${id}/metrics`)).body.length, 1);
      assert.equal((await p.call('GET', `/sandboxes/${id}/metrics?start=${now - 60}&end=${now + 60}`)).body.length, 1);
      assert.deepEqual((await p.call('GET', `/sandboxes/${id}/metrics?start=${now - 3600}&end=${now - 600}`)).body, [], 'a range in the past holds no sample');
      assert.deepEqual((await p.call('GET', `/sandboxes/${id}/metrics?start=${now + 600}`)).body, [], 'nor one in the future');
      for (const bad of ['start=abc', 'end=-5', `start=${now}&end=${now - 10}`]) {
        const r = await p.call('GET', `/sandboxes/${id}/metrics?${bad}`);
        assert.equal(r.status, 400, bad);
      }
    });

    await t.test("logs: E2B's v1 and v2 shapes of the node's entries, narrowed by the query; 400 naming the field; 404 when unknown or killed", async () => {
      const id = (await p.call('POST', '/v2/sandboxes', { templateID: 'base' })).body.sandboxID;
      const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
      const entries: SandboxLogEntry[] = [
        { timestamp: at(0), level: 'info', message: 'sandbox booting', fields: { logger: 'node-agent' } },
        { timestamp: at(1), level: 'debug', message: 'envd: detail', fields: { logger: 'envd' } },
        { timestamp: at(2), level: 'warn', message: 'envd: memory low', fields: { logger: 'envd' } },
        { timestamp: at(3), level: 'error', message: 'envd: memory guard killed pid 7', fields: { logger: 'envd' } },
      ];
      p.node.logs.set(id, entries);
      const v2 = await p.call('GET', `/v2/sandboxes/${id}/logs`);
      assert.equal(v2.status, 200);
      assert.deepEqual(v2.body, { logs: entries });
      const messages = async (q: string) => ((await p.call('GET', `/v2/sandboxes/${id}/logs?${q}`)).body.logs as SandboxLogEntry[]).map((e) => e.message);
      assert.deepEqual(await messages('direction=backward&limit=2'), ['envd: memory guard killed pid 7', 'envd: memory low']);
      assert.deepEqual(await messages(`cursor=${Date.parse(at(1))}&limit=2`), ['envd: detail', 'envd: memory low']);
      assert.deepEqual(await messages(`cursor=${Date.parse(at(1))}&direction=backward`), ['envd: detail', 'sandbox booting']);
      assert.deepEqual(await messages('level=warn'), ['envd: memory low', 'envd: memory guard killed pid 7']);
      assert.deepEqual(await messages('search=memory&level=error'), ['envd: memory guard killed pid 7']);
      assert.deepEqual(await messages('search=Memory'), [], 'the search is case-sensitive');

      const v1 = await p.call('GET', `/sandboxes/${id}/logs?start=${Date.parse(at(2))}`);
      assert.equal(v1.status, 200);
      assert.deepEqual(v1.body.logEntries, entries.slice(2));
      // E2B's CLI prints `logs`: each line is JSON with the level, the message and the fields.
      assert.deepEqual(v1.body.logs, entries.slice(2).map((e) => ({ timestamp: e.timestamp, line: JSON.stringify({ logger: 'envd', level: e.level, message: e.message }) })));
      assert.equal((await p.call('GET', `/sandboxes/${id}/logs?limit=1`)).body.logEntries[0].message, 'sandbox booting');

      const refused: Array<[string, RegExp]> = [
        [`/v2/sandboxes/${id}/logs?limit=0`, /^query parameter limit must be >= 1$/],
        [`/v2/sandboxes/${id}/logs?limit=10001`, /^query parameter limit must be <= 1000$/],
        [`/v2/sandboxes/${id}/logs?limit=abc`, /^query parameter limit must be integer$/],
        [`/v2/sandboxes/${id}/logs?direction=sideways`, /^query parameter direction must be one of forward, backward$/],
        [`/v2/sandboxes/${id}/logs?level=loud`, /^query parameter level must be one of debug, info, warn, error$/],
        [`/v2/sandboxes/${id}/logs?cursor=-1`, /^query parameter cursor must be >= 0$/],
        [`/v2/sandboxes/${id}/logs?search=${'x'.repeat(257)}`, /^query parameter search must NOT have more than 256 characters$/],
        [`/sandboxes/${id}/logs?limit=0`, /^query parameter limit must be >= 1$/],
        [`/sandboxes/${id}/logs?start=soon`, /^query parameter start must be integer$/],
      ];
      for (const [path, message] of refused) {
        const r = await p.call('GET', path);
        assert.equal(r.status, 400, path);
        assert.match(r.body.message, message, path);
      }

      for (const path of ['/v2/sandboxes/inosuchsandbox0000000/logs', '/sandboxes/inosuchsandbox0000000/logs']) {
        const r = await p.call('GET', path);
        assert.equal(r.status, 404, path);
        assert.deepEqual(Object.keys(r.body).sort(), ['code', 'message']);
      }
      assert.equal((await p.call('DELETE', `/sandboxes/${id}`)).status, 204);
      for (const path of [`/v2/sandboxes/${id}/logs`, `/sandboxes/${id}/logs`]) {
        const r = await p.call('GET', path);
        assert.equal(r.status, 404, `${path} of a killed sandbox`);
        assert.deepEqual(r.body, { code: 404, message: `sandbox ${id} was killed` });
      }
    });

    await t.test('updateNetwork (PUT /sandboxes/{id}/network): replaces the egress lists, 409 when paused, 404 when killed', async () => {
      const id = (await p.call('POST', '/v2/sandboxes', { templateID: 'base', network: { allowOut: ['10.0.0.1'], rules: { 'a.example': [] } } })).body.sandboxID;
      const put = await p.call('PUT', `/sandboxes/${id}/network`, { allow_internet_access: false, denyOut: ['10.9.0.0/16'] });
      assert.equal(put.status, 204);
      const detail = (await p.call('GET', `/sandboxes/${id}`)).body;
      assert.deepEqual(detail.network.allowOut, [], 'a field left out is cleared');
      assert.deepEqual(detail.network.denyOut, ['10.9.0.0/16']);
      assert.equal(detail.network.rules, undefined);
      assert.equal(detail.allowInternetAccess, false);
      assert.ok(p.node.calls.some((c) => c === `network ${id} {"allowInternetAccess":false,"network":{"allowOut":[],"denyOut":["10.9.0.0/16"]}}`));
      for (const bad of [{ allowOut: 'x' }, { allow_internet_access: 'yes' }, { egressProxy: { address: 'no-port' } }, { egressProxy: 'x' }, []]) {
        const r = await p.call('PUT', `/sandboxes/${id}/network`, bad);
        assert.equal(r.status, 400, JSON.stringify(bad));
      }
      await p.call('POST', `/sandboxes/${id}/pause`);
      assert.equal((await p.call('PUT', `/sandboxes/${id}/network`, {})).status, 409);
      await p.call('DELETE', `/sandboxes/${id}`);
      assert.equal((await p.call('PUT', `/sandboxes/${id}/network`, {})).status, 404);
      assert.equal((await p.call('PUT', '/sandboxes/inosuchsandbox0000000/network', {})).status, 404);
      assert.equal((await p.call('PUT', `/sandboxes/${'c'.repeat(65)}/network`, { denyOut: ['10.9.0.0/16'] })).status, 404, 'an overlong id is unknown, not an error (found by the fuzzer)');
    });

    await t.test('node labels through the gateway', async () => {
      const ok = await p.call('POST', '/nodes/n1/labels', { labels: { 'example.com/zone': 'a', tier: 'gold' } });
      assert.equal(ok.status, 200);
      assert.deepEqual(ok.body.labels, { 'example.com/zone': 'a', tier: 'gold' });
      assert.equal((await p.call('POST', '/nodes/n1/labels', { labels: { 'kubernetes.io/arch': 'x' } })).status, 400);
      assert.equal((await p.call('POST', '/nodes/n1/labels', { labels: { 'Bad_Prefix/x': 'y' } })).status, 400);
      const many: Record<string, string> = {};
      for (let i = 0; i < 70; i++) many[`l${i}`] = 'v';
      assert.equal((await p.call('POST', '/nodes/n1/labels', { labels: many })).status, 400);
      const concurrent = await Promise.all(Array.from({ length: 10 }, (_, i) => p.call('POST', '/nodes/n1/labels', { labels: { [`c${i}`]: 'v' } })));
      assert.ok(concurrent.every((r) => r.status === 200));
      const after = await p.call('GET', '/nodes/n1');
      for (let i = 0; i < 10; i++) assert.equal(after.body.labels[`c${i}`], 'v', 'no update lost');
      const del = await p.call('DELETE', '/nodes/n1/labels', { names: ['tier'] });
      assert.equal(del.body.labels.tier, undefined);
      assert.equal((await p.call('POST', '/nodes/nope/labels', { labels: { a: 'b' } })).status, 404);
    });

    await t.test('the official e2b SDK drives the REST surface', async () => {
      const env = { apiKey: KEY, apiUrl: p.gw.url, domain: 'localhost:3002' };
      const sbx = await Sandbox.create('base', { ...env, timeoutMs: 120_000, metadata: { who: 'sdk' } });
      const info = await Sandbox.getInfo(sbx.sandboxId, env);
      assert.equal(info.templateId, 'tpl-base');
      assert.equal(info.state, 'running');
      assert.deepEqual(info.metadata, { who: 'sdk' });
      const listed = await Sandbox.list({ ...env, query: { metadata: { who: 'sdk' } } }).nextItems();
      assert.deepEqual(listed.map((s) => s.sandboxId), [sbx.sandboxId]);
      await Sandbox.setTimeout(sbx.sandboxId, 60_000, env);
      assert.equal(await Sandbox.pause(sbx.sandboxId, env), true);
      assert.equal(await Sandbox.pause(sbx.sandboxId, env), false, 'already paused: 409 → false');
      const again = await Sandbox.connect(sbx.sandboxId, env);
      assert.equal(again.sandboxId, sbx.sandboxId);
      assert.equal(await Sandbox.kill(sbx.sandboxId, env), true);
      assert.equal(await Sandbox.kill(sbx.sandboxId, env), false, 'already killed: 404 → false');
    });
  } finally {
    await p.close();
  }
});

test("the master's /notify/health answers without touching its database", async () => {
  const p = await platform();
  try {
    await p.master.db.close();
    const r = await fetch(`${p.master.url}/notify/health`);
    assert.equal(r.status, 200);
    const health = await r.json() as { ok: boolean; damagedSandboxRows: unknown[]; tasks: Record<string, { runs: number; failures: number }> };
    assert.deepEqual({ ok: health.ok, damagedSandboxRows: health.damagedSandboxRows }, { ok: true, damagedSandboxRows: [] });
    assert.deepEqual(Object.keys(health.tasks).sort(), ['event and metrics retention prune', 'lost node sweep', 'orphan sandbox sweep', 'orphan snapshot layer sweep', 'pending snapshot sweep', 'stale pause package sweep', 'stuck sandbox reconcile', 'team metrics sampler', 'terminated sandbox purge', 'volume refcount recount', 'workload identity key rotation']);
    const nodes = await fetch(`${p.master.url}/v1/nodes`, { headers: clusterHeaders(CLUSTER_TOKEN) });
    assert.equal(nodes.status, 500, 'routes that need the database fail while it is gone');
    assert.equal((await fetch(`${p.master.url}/v1/nodes`)).status, 401, 'and without cluster_token, before anything else');
  } finally {
    await p.close();
  }
});
