/**
 * The lifecycle manager on Redis coordination, against a real redis-server started here:
 * replicas in separate processes, a leader killed (SIGKILL) in the middle of a sweep.
 */
import { after, afterEach, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SvcError, type SvcConfig } from '@svc/common';
import { RedisCoordination } from '@svc/common/redis-coordination';
import { startRedisServer, type TestRedis } from '@svc/common/redis-coordination-test-server';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { FakeMaster } from '@svc/proxy/testing/fake-master';
import { LifecycleClient, SANDBOX_EVENTS_TOPIC } from '@svc/contracts/lifecycle';
import { LEADER_LEASE } from './leader-election.ts';
import { startLifecycle, type RunningLifecycle } from './lifecycle.ts';
import { captureLogs, sleep, waitFor } from './testing.ts';

const LEASE_TTL_MS = 1_000;
const here = fileURLToPath(new URL('.', import.meta.url));
const repoRoot = resolve(here, '../../..');

let redis: TestRedis;
let dbN = 0;
const cleanups: Array<() => Promise<void>> = [];

before(async () => { redis = await startRedisServer(); });
after(async () => { await redis.stop(); });
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/** Each test uses its own Redis database, so leases and kv never leak between tests. */
function coordination(db: number) {
  const c = new RedisCoordination({ host: redis.host, port: redis.port, db });
  cleanups.push(() => c.close());
  return c;
}

const lcCfg = (): Pick<SvcConfig, 'lifecycle'> => ({
  lifecycle: { replicas: 2, listen: '127.0.0.1:0', sweep_interval_ms: 100, warmup_sec: 0, lease_ttl_ms: LEASE_TTL_MS },
});

async function inProcessReplica(master: FakeMaster, db: number, replicaIndex: number) {
  const logs = captureLogs();
  const lc = await startLifecycle(lcCfg(), {
    logger: logs.logger, master: new MasterInternalClient(master.url), coordination: coordination(db), replicaIndex,
  });
  cleanups.push(() => lc.close());
  return { lc, logs };
}

test('two replicas on Redis (separate connections): one leader, sweeps once, resumes coalesced, events consumed', async () => {
  const master = new FakeMaster();
  await master.start();
  cleanups.push(() => master.close());
  const db = ++dbN;
  const a = await inProcessReplica(master, db, 0);
  const b = await inProcessReplica(master, db, 1);
  await waitFor(() => a.lc.isLeader() || b.lc.isLeader());
  await sleep(300);
  assert.equal([a, b].filter((r) => r.lc.isLeader()).length, 1);

  master.add({ sandboxId: 'rp', onTimeout: 'pause', due: true });
  master.add({ sandboxId: 'rk', onTimeout: 'kill', due: true });
  await waitFor(() => master.get('rp').state === 'paused' && master.get('rk').state === 'terminated');
  assert.equal(master.calls.pause.length, 1);
  assert.equal(master.calls.kill.length, 1);

  master.add({ sandboxId: 'rr', state: 'paused', autoResume: true });
  master.resumeDelayMs = 200;
  const clients = [a, b].map((r) => new LifecycleClient(r.lc.url));
  const routes = await Promise.all(Array.from({ length: 6 }, (_, i) => clients[i % 2].resume('rr')));
  assert.ok(routes.every((r) => r.state === 'running'));
  assert.equal(master.calls.resume.length, 1, 'one resume across both replicas');

  const publisher = coordination(db);
  await sleep(100);
  await publisher.publish(SANDBOX_EVENTS_TOPIC, { kind: 'sandbox.created', sandboxId: 'ev1', at: new Date().toISOString() });
  await waitFor(() => a.logs.has('create event applied', { sandboxId: 'ev1' }) && b.logs.has('create event applied', { sandboxId: 'ev1' }));
});

test('leader killed mid-sweep: the other replica takes over after the lease TTL and finishes the job', async () => {
  const master = new FakeMaster();
  await master.start();
  cleanups.push(() => master.close());
  const db = ++dbN;

  // The pause of `held` hangs until the test decides; the leader is killed while it hangs.
  let abandon: (err: Error) => void = () => {};
  let heldCalls = 0;
  master.beforePause = (id) => {
    if (id !== 'held' || heldCalls++ > 0) return Promise.resolve();
    return new Promise((_, reject) => { abandon = reject; });
  };
  master.add({ sandboxId: 'held', onTimeout: 'pause', due: true });
  master.add({ sandboxId: 'k-after', onTimeout: 'kill', due: false });

  const leader = startReplicaProcess(master.url, db);
  cleanups.push(() => leader.stop());
  await waitFor(() => master.calls.pause.some((c) => c.sandboxId === 'held'), 20_000, 'the child leader pausing `held`');

  const standby = await inProcessReplica(master, db, 1);
  await sleep(300);
  assert.equal(standby.lc.isLeader(), false, 'the lease is still the child\'s');

  const killedAt = Date.now();
  leader.child.kill('SIGKILL');
  await leader.exited;
  // The master gives up the pause its caller abandoned; `held` is due again.
  abandon(new SvcError(409, 'caller went away'));
  await waitFor(() => master.get('held').state === 'running');
  master.set('held', { due: true });
  master.set('k-after', { due: true });

  await waitFor(() => standby.lc.isLeader(), 5_000, 'takeover');
  const takeover = Date.now() - killedAt;
  assert.ok(takeover >= LEASE_TTL_MS * 0.5, `took over after ${takeover} ms, not before the lease could expire`);
  // The master's state flips before the sweeper hears back and logs, so wait for the log lines.
  await waitFor(() => standby.logs.has('auto-paused sandbox', { sandboxId: 'held' }) && standby.logs.has('timeout-killed sandbox', { sandboxId: 'k-after' }),
    5_000, 'the new leader finishing the job');
  assert.equal(master.get('held').state, 'paused');
  assert.equal(master.get('k-after').state, 'terminated');
  assert.equal(master.calls.pause.filter((c) => c.sandboxId === 'held').length, 2, 'paused once more after the failover, not more');
  const holder = await coordination(db).leaseHolder(LEADER_LEASE);
  assert.equal(holder, standby.lc.replicaId);
});

function startReplicaProcess(masterUrl: string, db: number) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-lc-'));
  const configFile = join(dir, 'config.yaml');
  writeFileSync(configFile, [
    `data_dir: ${dir}`,
    'master:',
    `  addr: ${masterUrl}`,
    'lifecycle:',
    '  replicas: 1',
    "  listen: '127.0.0.1:0'",
    '  sweep_interval_ms: 100',
    '  warmup_sec: 0',
    `  lease_ttl_ms: ${LEASE_TTL_MS}`,
    'redis:',
    `  host: ${redis.host}`,
    `  port: ${redis.port}`,
    `  db: ${db}`,
    '',
  ].join('\n'));
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', join(here, 'main.ts'), '--replica', '0'], {
    cwd: repoRoot,
    env: { ...process.env, SVC_CONFIG: configFile, SVC_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => { stderr += d; });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    child,
    exited,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
