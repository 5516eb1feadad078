import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryCoordination, type Coordination, type SvcConfig } from '@svc/common';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { FakeMaster } from '@svc/proxy/testing/fake-master';
import { LifecycleClient, PROXY_INDEX_KEY, PROXY_KV_PREFIX, SANDBOX_EVENTS_TOPIC } from '@svc/contracts/lifecycle';
import { startLifecycle, type RunningLifecycle } from './lifecycle.ts';
import { actionFor } from './sweeper.ts';
import { captureLogs, sleep, waitFor } from './testing.ts';

type LcCfg = Pick<SvcConfig, 'lifecycle'> & { cluster_token?: string };
const cfgWith = (o: Partial<SvcConfig['lifecycle']> = {}): LcCfg => ({
  lifecycle: { replicas: 2, listen: '127.0.0.1:0', sweep_interval_ms: 100, warmup_sec: 0, lease_ttl_ms: 600, ...o },
});

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function setup(cfg: LcCfg, replicas = 2, coordination: Coordination = new MemoryCoordination()) {
  const master = new FakeMaster({ clusterToken: cfg.cluster_token });
  await master.start();
  const logs = captureLogs();
  const running: RunningLifecycle[] = [];
  for (let i = 0; i < replicas; i++) {
    running.push(await startLifecycle(cfg, {
      logger: logs.logger, master: new MasterInternalClient(master.url, { clusterToken: cfg.cluster_token }), coordination, replicaIndex: i,
    }));
  }
  cleanups.push(async () => {
    await Promise.all(running.map((r) => r.close()));
    await master.close();
    await coordination.close();
  });
  return { master, logs, running, coordination };
}

test('actionFor: pause running sandboxes with onTimeout=pause; kill running or paused ones with onTimeout=kill', () => {
  const d = (state: 'running' | 'paused' | 'pausing', onTimeout: 'pause' | 'kill') => ({ sandboxId: 's', state, onTimeout, endAt: '' });
  assert.equal(actionFor(d('running', 'pause')), 'pause');
  assert.equal(actionFor(d('paused', 'pause')), null);
  assert.equal(actionFor(d('running', 'kill')), 'kill');
  assert.equal(actionFor(d('paused', 'kill')), 'kill');
  assert.equal(actionFor(d('pausing', 'kill')), null);
});

test('one leader; it pauses or kills due sandboxes per onTimeout, once each, with the log lines', async () => {
  const { master, logs, running } = await setup(cfgWith());
  master.add({ sandboxId: 'p1', onTimeout: 'pause', due: true });
  master.add({ sandboxId: 'k1', onTimeout: 'kill', due: true });
  master.add({ sandboxId: 'k2', onTimeout: 'kill', state: 'paused', due: true });
  master.add({ sandboxId: 'fresh', onTimeout: 'pause', due: false });
  await waitFor(() => ['p1', 'k1', 'k2'].every((id) => logs.records().some((r) => r.sandboxId === id && /^(auto-paused|timeout-killed) sandbox$/.test(r.msg))));
  await sleep(300);
  assert.equal(running.filter((r) => r.isLeader()).length, 1);
  assert.deepEqual(master.calls.pause, [{ sandboxId: 'p1', reason: 'timeout' }]);
  assert.deepEqual(master.calls.kill.map((c) => c.sandboxId).sort(), ['k1', 'k2']);
  assert.ok(master.calls.kill.every((c) => c.reason === 'timeout'));
  assert.equal(master.get('fresh').state, 'running');
  assert.equal(master.get('k1').terminateReason, 'timeout');
  assert.ok(logs.has('auto-paused sandbox', { sandboxId: 'p1' }));
  assert.ok(logs.has('timeout-killed sandbox', { sandboxId: 'k1' }));
  assert.ok(logs.has('timeout-killed sandbox', { sandboxId: 'k2' }));
});

test('warm-up: no pause before warmup_sec has passed since start', async () => {
  const { master, logs } = await setup(cfgWith({ warmup_sec: 1 }), 1);
  master.add({ sandboxId: 'early', onTimeout: 'pause', due: true });
  await sleep(700);
  assert.equal(master.get('early').state, 'running');
  assert.equal(master.calls.pause.length, 0);
  await waitFor(() => logs.has('auto-paused sandbox', { sandboxId: 'early' }), 2_000);
  assert.equal(master.get('early').state, 'paused');
});

test('a graceful leader exit hands the sweep over at once; the new leader warms up first', async () => {
  const { master, running } = await setup(cfgWith({ warmup_sec: 1 }));
  await waitFor(() => running.some((r) => r.isLeader()));
  const leader = running.find((r) => r.isLeader())!;
  const other = running.find((r) => r !== leader)!;
  await sleep(1_000); // both past their start-up warm-up
  await leader.close();
  await waitFor(() => other.isLeader(), 2_000);
  const tookOver = Date.now();
  master.add({ sandboxId: 'after', onTimeout: 'pause', due: true });
  await waitFor(() => master.get('after').state === 'paused', 3_000);
  assert.ok(Date.now() - tookOver >= 900, 'the new leader waited out its warm-up');
});

test('create events are applied: counted on the health route, and logged with the sandbox id', async () => {
  const { logs, coordination, running } = await setup(cfgWith(), 1);
  const health = async () => (await fetch(`${running[0].url}/health`)).json() as Promise<{ createEventsApplied: number }>;
  assert.equal((await health()).createEventsApplied, 0);
  await coordination.publish(SANDBOX_EVENTS_TOPIC, { kind: 'sandbox.created', sandboxId: 'new1', at: new Date().toISOString() });
  await coordination.publish(SANDBOX_EVENTS_TOPIC, { kind: 'sandbox.created', at: new Date().toISOString() });
  await waitFor(async () => (await health()).createEventsApplied === 1, 5_000, 'the create event to be applied');
  assert.ok(logs.has('create event applied', { sandboxId: 'new1' }));
  await sleep(100);
  assert.equal((await health()).createEventsApplied, 1, 'an event without a sandbox id is not applied');
});

test('resume: concurrent calls on both replicas resume the sandbox once and all get the running route', async () => {
  const { master, logs, running } = await setup(cfgWith());
  master.add({ sandboxId: 'zz', state: 'paused', autoResume: true });
  master.resumeDelayMs = 250;
  const clients = running.map((r) => new LifecycleClient(r.url));
  const results = await Promise.all(Array.from({ length: 10 }, (_, i) => clients[i % 2].resume('zz')));
  for (const r of results) assert.equal(r.state, 'running');
  assert.deepEqual(master.calls.resume, [{ sandboxId: 'zz', reason: 'auto' }]);
  assert.ok(logs.has('auto-resumed sandbox', { sandboxId: 'zz' }));
  // A running sandbox answers at once without a resume.
  assert.equal((await clients[0].resume('zz')).state, 'running');
  assert.equal(master.calls.resume.length, 1);
});

test('resume errors: the master\'s 409 passes through, other failures are 503 with Retry-After at once', async () => {
  const { master, running } = await setup(cfgWith(), 1);
  const client = new LifecycleClient(running[0].url);
  master.add({ sandboxId: 'quota', state: 'paused' });
  master.resumeFailure = { status: 409, message: 'resume rejected by paused_resource_release_ratio policy: need 512MB > quota 256MB' };
  await assert.rejects(client.resume('quota'), (e: { status: number; message: string }) => e.status === 409 && /release_ratio/.test(e.message));
  master.resumeFailure = { status: 500, message: 'boom' };
  const t0 = Date.now();
  await assert.rejects(client.resume('quota'), (e: { status: number; headers: Record<string, string> }) => e.status === 503 && e.headers['Retry-After'] === '1');
  assert.ok(Date.now() - t0 < 1_000);
  master.resumeFailure = undefined;
  master.add({ sandboxId: 'gone', state: 'terminated' });
  await assert.rejects(client.resume('gone'), (e: { status: number }) => e.status === 410);
  await assert.rejects(client.resume('never-was'), (e: { status: number }) => e.status === 404);
  await master.close();
  const t1 = Date.now();
  await assert.rejects(client.resume('quota'), (e: { status: number; headers: Record<string, string> }) => e.status === 503 && !!e.headers['Retry-After']);
  assert.ok(Date.now() - t1 < 1_000, 'master down: answered at once');
});

test('a resume that waits on another replica gives up with 503 within its bound', async () => {
  const master = new FakeMaster();
  await master.start();
  const coordination = new MemoryCoordination();
  const lc = await startLifecycle(cfgWith(), {
    logger: captureLogs().logger, master: new MasterInternalClient(master.url), coordination, replicaIndex: 0,
    tuning: { resumeTimeoutMs: 400 },
  });
  cleanups.push(async () => { await lc.close(); await master.close(); });
  master.add({ sandboxId: 'wedged', state: 'resuming' });
  const t0 = Date.now();
  await assert.rejects(new LifecycleClient(lc.url).resume('wedged'), (e: { status: number; headers: Record<string, string> }) => e.status === 503 && !!e.headers['Retry-After']);
  assert.ok(Date.now() - t0 < 1_500);
});

test('proxy heartbeats land in the kv index with a TTL; bad announcements are 400', async () => {
  const { running, coordination } = await setup(cfgWith());
  const [a, b] = running.map((r) => new LifecycleClient(r.url));
  await a.announceProxy({ proxyId: 'px-1', adminUrl: 'http://127.0.0.1:18082' });
  await b.announceProxy({ proxyId: 'px-2', adminUrl: 'http://127.0.0.1:18083' });
  await a.announceProxy({ proxyId: 'px-1', adminUrl: 'http://127.0.0.1:18082' });
  assert.deepEqual(JSON.parse((await coordination.kvGet(PROXY_INDEX_KEY))!), ['px-1', 'px-2']);
  assert.equal(await coordination.kvGet(PROXY_KV_PREFIX + 'px-2'), 'http://127.0.0.1:18083');
  await assert.rejects(a.announceProxy({ proxyId: 'bad id!', adminUrl: 'http://x' }), (e: { status: number }) => e.status === 400);
  await assert.rejects(a.announceProxy({ proxyId: 'px-3', adminUrl: 'not a url' }), (e: { status: number }) => e.status === 400);
});

test('cluster_token: resume and heartbeats take it (401 without, before the body is read), the probes do not; the sweep reaches the master with it', async () => {
  const token = 'the-lifecycle-cluster-token';
  const { master, logs, running } = await setup({ ...cfgWith(), cluster_token: token }, 1);
  master.add({ sandboxId: 'asleep', state: 'paused', autoResume: true });
  master.add({ sandboxId: 'due', onTimeout: 'pause', due: true });
  const url = running[0]!.url;
  for (const wrong of [undefined, `${token}x`, token.toUpperCase()]) {
    const stranger = new LifecycleClient(url, { clusterToken: wrong });
    await assert.rejects(stranger.resume('asleep'), (e: { status: number }) => e.status === 401);
    await assert.rejects(stranger.announceProxy({ proxyId: 'p', adminUrl: 'http://203.0.113.9:1' }), (e: { status: number }) => e.status === 401);
  }
  const bad = await fetch(`${url}/internal/resume`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' });
  assert.equal(bad.status, 401, 'the token is checked before the body');
  assert.equal(master.get('asleep').state, 'paused', 'nothing resumed for a stranger');
  for (const probe of ['/health', '/metrics']) assert.equal((await fetch(url + probe)).status, 200, probe);
  assert.equal((await new LifecycleClient(url, { clusterToken: token }).resume('asleep')).state, 'running');
  await waitFor(() => logs.records().some((r) => r.sandboxId === 'due' && r.msg === 'auto-paused sandbox'));
});
