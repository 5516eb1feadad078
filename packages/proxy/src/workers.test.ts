/**
 * The data path in two worker processes behind the same listener (docs/data-plane.md, "Worker
 * processes"): served, purged in every worker before the admin API answers, a killed worker
 * replaced without a refused connection (every worker at once too), and the workers' request
 * counts summed in /metrics.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { ADMIN_TOKEN_HEADER, ProxyAdminClient } from '@svc/contracts/proxy-admin';
import { SANDBOX_EVENTS_TOPIC } from '@svc/contracts/lifecycle';
import { call, sandboxHost } from './testing/client.ts';
import { startPlatform, Upstream, type Platform } from './testing/harness.ts';
import { proxyWorkerSourceEntry } from './worker.ts';
import type { ProxyWorkerStats } from './worker-protocol.ts';

let p: Platform;
let a: Upstream;
let b: Upstream;
const TOKEN = 'tok';

before(async () => {
  a = new Upstream('a');
  b = new Upstream('b');
  await a.listen();
  await b.listen();
  // A long TTL: a route changes in the workers only by the purge under test.
  p = await startPlatform({ proxyAdminToken: TOKEN, lifecycleReplicas: 1, workers: { count: 2, entry: proxyWorkerSourceEntry() }, tuning: { routeCacheTtlMs: 60_000 } });
});
after(async () => {
  await p.close();
  await a.close();
  await b.close();
});

/** One request on a new connection (agent: false), routed by the sandbox headers. */
async function get(sandboxId: string) {
  const r = await call(p.proxy.httpUrl, { host: sandboxHost(0, sandboxId), headers: { 'E2b-Sandbox-Id': sandboxId } });
  assert.equal(r.status, 200, r.body);
  return r.json<{ upstream: string }>().upstream;
}

const answeredByPid = async () => new Map((await p.proxy.workerStats!()).map((s: ProxyWorkerStats) => [s.pid, s.answered]));

/**
 * Requests on new connections, in small concurrent rounds, until each of the two workers answered
 * at least `each` of them (which worker accepts a connection is the kernel's choice); the upstreams named.
 */
async function spreadOverWorkers(sandboxId: string, each = 3): Promise<{ upstreams: string[]; perWorker: number[] }> {
  const before = await answeredByPid();
  const upstreams: string[] = [];
  for (let round = 0; round < 100; round++) {
    upstreams.push(...await Promise.all(Array.from({ length: 4 }, () => get(sandboxId))));
    const now = await answeredByPid();
    const perWorker = [...now].map(([pid, n]) => n - (before.get(pid) ?? 0));
    if (perWorker.length === 2 && perWorker.every((n) => n >= each)) return { upstreams, perWorker };
  }
  throw new Error('the requests did not reach both workers');
}

async function waitFor(what: string, check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('workers: requests are served by two worker processes, not by the primary', async () => {
  p.master.add({ sandboxId: 'served', envdPort: a.port });
  const pids = p.proxy.pids!();
  assert.equal(pids.length, 2);
  for (const pid of pids) {
    assert.notEqual(pid, process.pid);
    assert.ok(existsSync(`/proc/${pid}`), `worker ${pid} runs`);
  }
  const { upstreams } = await spreadOverWorkers('served', 1);
  assert.ok(upstreams.every((u) => u === 'a'));
});

test('workers: a purge is answered only once every worker forgot the route; the next request anywhere finds the new address', async () => {
  p.master.add({ sandboxId: 'inv', envdPort: a.port });
  // The created event makes each worker look the route up: one look-up per worker.
  await p.coordination.publish(SANDBOX_EVENTS_TOPIC, { kind: 'sandbox.created', sandboxId: 'inv' });
  await waitFor('a look-up from each worker', () => p.master.calls.route.filter((id) => id === 'inv').length === 2);
  const cached = await spreadOverWorkers('inv');
  assert.ok(cached.upstreams.every((u) => u === 'a'));
  assert.equal(p.master.calls.route.filter((id) => id === 'inv').length, 2, 'both workers answered from their cache');

  p.master.set('inv', { envdPort: b.port });
  assert.ok((await spreadOverWorkers('inv', 1)).upstreams.every((u) => u === 'a'), 'still cached in both');

  await new ProxyAdminClient(p.proxy.adminUrl, TOKEN).purge(['inv']);
  // Right after the 204: every request, on whichever worker, reaches the new address.
  const fresh = await spreadOverWorkers('inv');
  assert.deepEqual([...new Set(fresh.upstreams)], ['b'], `per worker: ${fresh.perWorker.join(', ')}`);
});

test('workers: the admin health sums the workers\' cached routes and merges their tasks', async () => {
  const admin = new ProxyAdminClient(p.proxy.adminUrl, TOKEN);
  const stats = await p.proxy.workerStats!();
  const health = await admin.health();
  assert.equal(health.cachedBackends, stats.reduce((n, s) => n + s.cachedBackends, 0));
  assert.ok(health.cachedBackends >= 2, 'the sandboxes above, in each worker');
  assert.deepEqual(Object.keys(health.tasks).sort(), ['activity report', 'proxy announcement']);
  await admin.purge();
  assert.equal((await admin.health()).cachedBackends, 0);
});

test('workers: the primary\'s /metrics sums the workers\' request counts', async () => {
  p.master.add({ sandboxId: 'counted', envdPort: a.port });
  const scrape = async () => {
    const r = await call(p.proxy.adminUrl, { path: '/metrics', headers: { [ADMIN_TOKEN_HEADER]: TOKEN } });
    assert.equal(r.status, 200);
    return Number(/^svc_proxy_requests_total\{code="200"\} (\S+)$/m.exec(r.body)?.[1] ?? 0);
  };
  const before = await scrape();
  const { upstreams, perWorker } = await spreadOverWorkers('counted');
  assert.equal(await scrape() - before, upstreams.length);
  assert.equal(perWorker.reduce((x, y) => x + y, 0), upstreams.length);
});

test('workers: a worker killed with SIGKILL is replaced while the other keeps the listener (no refused connection)', async (t) => {
  p.master.add({ sandboxId: 'kill', envdPort: a.port });
  const [victim, survivor] = p.proxy.pids!();
  const errors: string[] = [];
  let served = 0;
  let stop = false;
  const loop = (async () => {
    while (!stop) {
      try {
        if (await get('kill') === 'a') served++;
      } catch (err) {
        errors.push((err as NodeJS.ErrnoException).code ?? (err as Error).message);
      }
    }
  })();
  await waitFor('traffic before the kill', () => served >= 20);
  process.kill(victim!, 'SIGKILL');
  const servedAtKill = served;
  await waitFor('the replacement worker', async () => {
    const pids = p.proxy.pids!();
    return pids.length === 2 && !pids.includes(victim!) && pids.includes(survivor!) && (await p.proxy.workerStats!()).length === 2;
  });
  await waitFor('traffic after the replacement', () => served >= servedAtKill + 40);
  stop = true;
  await loop;
  t.diagnostic(`requests served: ${served}; failed: ${errors.length ? errors.join(', ') : 'none'}`);
  assert.ok(!errors.includes('ECONNREFUSED'), `refused: ${errors.join(', ')}`);
  // At most the one request the killed worker held when it died (the loop sends one at a time).
  assert.ok(errors.length <= 1, `errors: ${errors.join(', ')}`);
  for (const pid of p.proxy.pids!()) assert.ok(existsSync(`/proc/${pid}`));
  assert.ok(!existsSync(`/proc/${victim}`), 'the killed worker is gone (reaped)');
});

test('workers: when every worker dies at once, the port stays open and a request made meanwhile is answered by a replacement', async () => {
  p.master.add({ sandboxId: 'all-die', envdPort: a.port });
  assert.equal(await get('all-die'), 'a');
  const victims = p.proxy.pids!();
  for (const pid of victims) process.kill(pid, 'SIGKILL');
  await waitFor('both workers gone', () => p.proxy.pids!().every((pid) => !victims.includes(pid)));
  // No worker listens now (the replacements are still loading): the primary holds the socket, so
  // this connection waits in the backlog instead of being refused.
  assert.equal(await get('all-die'), 'a');
  await waitFor('both replacements', async () => (await p.proxy.workerStats!()).length === 2);
  assert.ok(p.proxy.pids!().every((pid) => !victims.includes(pid)));
});
