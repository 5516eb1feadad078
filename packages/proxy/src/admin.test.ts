import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PROXY_INDEX_KEY, PROXY_KV_PREFIX } from '@svc/contracts/lifecycle';
import { silentLogger } from '@svc/common';
import { ProxyAdminClient } from '@svc/contracts/proxy-admin';
import { ProxyRegistry } from '@svc/contracts/proxy-registry';
import { call, sandboxHost } from './testing/client.ts';
import { startPlatform, Upstream } from './testing/harness.ts';

test('backend cache purge: 403 on mismatch or a token on one side only; 204 and a fresh lookup with the right token', async () => {
  const p = await startPlatform({ proxyAdminToken: 'admin-tok' });
  const a = new Upstream('a');
  const b = new Upstream('b');
  await a.listen();
  await b.listen();
  try {
    p.master.add({ sandboxId: 'pur', envdPort: a.port });
    const viaHeaders = () => call(p.proxy.httpUrl, { host: 'localhost', headers: { 'E2b-Sandbox-Id': 'pur' } });
    assert.equal((await viaHeaders()).json().upstream, 'a');
    p.master.set('pur', { envdPort: b.port });
    assert.equal((await viaHeaders()).json().upstream, 'a', 'still cached');

    for (const token of ['', 'wrong']) {
      await assert.rejects(new ProxyAdminClient(p.proxy.adminUrl, token).purge(['pur']), (e: { status: number }) => e.status === 403);
    }
    const r = await call(p.proxy.adminUrl, { method: 'POST', path: '/admin/backend_cache/delete', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(r.status, 403);
    assert.equal(r.json().code, 403);
    assert.equal((await viaHeaders()).json().upstream, 'a', 'refused purges change nothing');

    await new ProxyAdminClient(p.proxy.adminUrl, 'admin-tok').purge(['pur']);
    assert.equal((await viaHeaders()).json().upstream, 'b');
  } finally {
    await p.close();
    await a.close();
    await b.close();
  }
});

test('a proxy with no admin token refuses every purge (503), with a token or without: no open development mode', async () => {
  const p = await startPlatform({ proxyAdminToken: '' });
  try {
    for (const token of ['master-has-one', '']) {
      await assert.rejects(new ProxyAdminClient(p.proxy.adminUrl, token).purge(), (e: { status: number }) => e.status === 503);
    }
  } finally {
    await p.close();
  }
});

test('healthz reports the last announcement; the proxy is recorded in the lifecycle kv', async () => {
  const p = await startPlatform();
  try {
    const admin = new ProxyAdminClient(p.proxy.adminUrl, '');
    await waitFor(async () => (await admin.health()).heartbeat_last_pushed_ms > 0);
    const h = await admin.health();
    assert.equal(h.ok, true);
    assert.equal(h.proxyId, p.proxy.proxyId);
    assert.ok(Math.abs(Date.now() - h.heartbeat_last_pushed_ms) < 5_000);
    assert.deepEqual(Object.keys(h.tasks).sort(), ['activity report', 'proxy announcement']);
    assert.equal(h.tasks['proxy announcement']!.failures, 0);
    assert.deepEqual(JSON.parse((await p.coordination.kvGet(PROXY_INDEX_KEY))!), [p.proxy.proxyId]);
    assert.equal(await p.coordination.kvGet(PROXY_KV_PREFIX + p.proxy.proxyId), p.proxy.adminUrl);
  } finally {
    await p.close();
  }
});

test('announcements no lifecycle replica accepts are counted as failures in the health answer', async () => {
  const p = await startPlatform({ lifecycleReplicas: 1, lifecycleUrls: ['http://127.0.0.1:9'] });
  try {
    const admin = new ProxyAdminClient(p.proxy.adminUrl, '');
    await waitFor(async () => ((await admin.health()).tasks['proxy announcement']?.failures ?? 0) >= 2);
    const h = await admin.health();
    assert.equal(h.heartbeat_last_pushed_ms, 0);
    assert.match(h.tasks['proxy announcement']!.lastFailure!, /no lifecycle replica accepted/);
    assert.ok(h.tasks['proxy announcement']!.failingSince);
  } finally {
    await p.close();
  }
});

test('a purge sent to every announced proxy, as the master sends one after a change, empties their caches', async () => {
  const p = await startPlatform({ proxyAdminToken: 'tok-x' });
  const up = new Upstream();
  await up.listen();
  try {
    const admin = new ProxyAdminClient(p.proxy.adminUrl, '');
    await waitFor(async () => (await admin.health()).heartbeat_last_pushed_ms > 0);
    p.master.add({ sandboxId: 'cached', envdPort: up.port });
    await call(p.proxy.httpUrl, { host: sandboxHost(up.port, 'cached') });
    assert.equal((await admin.health()).cachedBackends, 1);
    // A resume by the lifecycle manager no longer purges by itself: the master's resume does.
    p.master.set('cached', { state: 'paused' });
    const lifecycle = await fetch(`${p.lifecycles[0].url}/internal/resume`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"sandboxId":"cached"}' });
    assert.equal(lifecycle.status, 200);
    assert.equal((await admin.health()).cachedBackends, 1);
    const announced = await new ProxyRegistry(p.coordination, 'test', silentLogger()).list();
    assert.deepEqual(announced.map((a) => a.proxyId), [p.proxy.proxyId]);
    for (const a of announced) await new ProxyAdminClient(a.adminUrl, 'tok-x').purge(['cached']);
    assert.equal((await admin.health()).cachedBackends, 0);
  } finally {
    await p.close();
    await up.close();
  }
});

test('activity is batched: many requests, about one report a second; an open, silent stream is idle', async () => {
  const p = await startPlatform({ tuning: { activityFlushMs: 300 } });
  const up = new Upstream();
  await up.listen();
  try {
    p.master.add({ sandboxId: 'busy', envdPort: up.port });
    p.master.add({ sandboxId: 'busy2', envdPort: up.port });
    await new Promise((r) => setTimeout(r, 350));
    p.master.resetCalls();
    const started = Date.now();
    await Promise.all(Array.from({ length: 50 }, (_, i) => call(p.proxy.httpUrl, { host: sandboxHost(up.port, i % 2 ? 'busy' : 'busy2') })));
    await new Promise((r) => setTimeout(r, 400));
    const elapsed = Date.now() - started;
    const reports = p.master.calls.activity;
    assert.ok(reports.length >= 1 && reports.length <= Math.ceil(elapsed / 300) + 1, `${reports.length} reports in ${elapsed} ms`);
    assert.deepEqual([...new Set(reports.flat())].sort(), ['busy', 'busy2']);

    // A stream held open but silent is idle: no reports until bytes move again.
    up.armStream();
    const stream = call(p.proxy.httpUrl, { host: sandboxHost(up.port, 'busy'), path: '/stream' });
    await new Promise((r) => setTimeout(r, 400));
    p.master.resetCalls();
    await new Promise((r) => setTimeout(r, 1_000));
    assert.equal(p.master.calls.activity.length, 0, 'an open, silent stream is idle');
    up.releaseStream();
    await stream;
    await new Promise((r) => setTimeout(r, 400));
    assert.deepEqual(p.master.calls.activity, [['busy']], 'its last chunk is activity');
    p.master.resetCalls();
    await new Promise((r) => setTimeout(r, 700));
    assert.equal(p.master.calls.activity.length, 0, 'nothing to report once idle');
  } finally {
    await p.close();
    await up.close();
  }
});

async function waitFor(cond: () => Promise<boolean>, timeoutMs = 3_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
