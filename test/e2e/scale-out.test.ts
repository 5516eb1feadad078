/**
 * `svc up` in its scale-out configuration: the master's tables on PostgreSQL and the leases,
 * locks, events and shared store on Redis (the servers scripts/test-services.sh starts).
 * A sandbox idles into pause through the Redis-elected lifecycle leader and a request wakes it.
 */
import { rmSync } from 'node:fs';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { Sandbox } from 'e2b';
import { randomId } from '@svc/common';
import { startPlatform, useE2bEnv, diagnoseFailures, type RunningPlatform } from './harness.ts';

const pgUrl = process.env.SVC_TEST_PG_URL;
const redisHost = process.env.SVC_TEST_REDIS_HOST;
const skip = !pgUrl || !redisHost ? 'needs SVC_TEST_PG_URL and SVC_TEST_REDIS_HOST (scripts/test-services.sh)' : undefined;

let p: RunningPlatform;
diagnoseFailures(() => p);
const dbName = `svc_e2e_${randomId(8)}`;
const DATA_DIR = '/tmp/svc-e2e-scale-out';

before(async () => {
  if (skip) return;
  const admin = new pg.Client({ connectionString: pgUrl });
  await admin.connect();
  await admin.query(`create database ${dbName}`);
  await admin.end();
  const url = new URL(pgUrl!);
  url.pathname = `/${dbName}`;
  // A fresh database each run: artifacts an earlier run's database knew would never be swept (about 1 GB a run).
  rmSync(DATA_DIR, { recursive: true, force: true });
  p = await startPlatform({
    dataDir: DATA_DIR,
    env: {
      SVC_EXTERNAL_POSTGRES_URL: url.toString(),
      SVC_EXTERNAL_REDIS_HOST: redisHost!,
      SVC_EXTERNAL_REDIS_PORT: process.env.SVC_TEST_REDIS_PORT ?? '6379',
    },
  });
  useE2bEnv(p);
});

after(async () => {
  if (skip) return;
  await p?.stop();
  const admin = new pg.Client({ connectionString: pgUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
});

test('on PostgreSQL and Redis: create, auto-pause on idle, auto-resume on a request, kill', { skip }, async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 3_000, lifecycle: { onTimeout: 'pause', autoResume: true } });
  try {
    await sbx.files.write('/home/user/www/index.html', 'scaled out');
    await sbx.commands.run('nohup python3 -m http.server 8000 --directory /home/user/www >/dev/null 2>&1 &');
    const page = () => fetch(`${p.sandboxUrl}/`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8000' } });
    for (let i = 0; i < 50 && (await page().then((r) => r.status, () => { /* not up yet: poll again */ return 0; })) !== 200; i++) await new Promise((r) => setTimeout(r, 200));
    let state = '';
    for (let i = 0; i < 60 && state !== 'paused'; i++) {
      await new Promise((r) => setTimeout(r, 500));
      state = (await sbx.getInfo()).state;
    }
    assert.equal(state, 'paused', 'the Redis-elected leader paused the idle sandbox');
    const r = await page();
    assert.equal(r.status, 200);
    assert.equal(await r.text(), 'scaled out');
    assert.equal((await sbx.getInfo()).state, 'running');
  } finally {
    await sbx.kill();
  }
});
