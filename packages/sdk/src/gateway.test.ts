/**
 * The SDK's sandbox calls against the real API gateway and master (with the master's fake
 * node agent), to keep the wire shapes honest beyond the fake API.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { silentLogger } from '@svc/common';
import { startApiGateway } from '@svc/api';
import { startMasterOverFakeNode } from '@svc/master/testing/master-over-fake-node';
import {
  AuthenticationError, GoneError, InvalidArgumentError, NEVER_TIMEOUT, NotFoundError, Sandbox, SandboxNotFoundError,
} from './index.ts';

const KEY = 'sdk-test-key';
let conn: { apiUrl: string; apiKey: string };
let close: () => Promise<void>;

before(async () => {
  const m = await startMasterOverFakeNode((cfg) => { cfg.api.api_key = KEY; cfg.sandbox_domain = 'localhost:3002'; });
  const gw = await startApiGateway(m.cfg, { logger: silentLogger(), masterUrl: m.master.url });
  conn = { apiUrl: gw.url, apiKey: KEY };
  close = async () => {
    await gw.close();
    await m.close();
  };
});
after(() => close?.());

test('create, inspect, time out, pause, connect, resume and kill through the gateway', async () => {
  const sbx = await Sandbox.create('base', { ...conn, timeoutMs: 60_000, metadata: { suite: 'sdk' }, lifecycle: { onTimeout: 'pause' } });
  assert.equal(sbx.sandboxDomain, 'localhost:3002');
  assert.equal(sbx.getHost(8080), `8080-${sbx.sandboxId}.localhost:3002`);
  const info = await sbx.getInfo();
  assert.equal(info.templateId, 'tpl-base');
  assert.equal(info.name, 'base');
  assert.equal(info.state, 'running');
  assert.deepEqual(info.metadata, { suite: 'sdk' });
  assert.deepEqual(info.lifecycle, { onTimeout: 'pause', autoResume: false });
  assert.ok(info.endAt instanceof Date);

  await sbx.setTimeout(NEVER_TIMEOUT);
  assert.equal((await sbx.getInfo()).endAt, undefined);

  assert.equal(await sbx.pause(), true);
  assert.equal(await sbx.pause(), false);
  assert.equal((await sbx.getInfo()).state, 'paused');
  await assert.rejects(Sandbox.connect(sbx.sandboxId, { ...conn, timeoutMs: 0 }), InvalidArgumentError);
  const again = await Sandbox.connect(sbx.sandboxId, { ...conn, timeoutMs: 120_000 });
  assert.equal(again.sandboxId, sbx.sandboxId);
  assert.equal((await sbx.getInfo()).state, 'running');

  await sbx.pause();
  await sbx.resume();
  assert.equal((await sbx.getInfo()).state, 'running');

  assert.equal(await sbx.kill(), true);
  assert.equal(await Sandbox.kill(sbx.sandboxId, conn), false);
  // a killed sandbox answers 410 for a while, then 404
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId, conn), (e: unknown) => e instanceof GoneError || e instanceof NotFoundError);
});

test('list pages and filters by metadata and state', async () => {
  const made: Sandbox[] = [];
  for (let i = 0; i < 5; i++) made.push(await Sandbox.create({ ...conn, metadata: { batch: 'list', odd: String(i % 2), tricky: 'a&b=100%' } }));
  await made[0].pause();
  const pager = Sandbox.list({ ...conn, limit: 2, query: { metadata: { batch: 'list', tricky: 'a&b=100%' } } });
  const ids: string[] = [];
  while (pager.hasNext) ids.push(...(await pager.nextItems()).map((s) => s.sandboxId));
  assert.deepEqual(ids.sort(), made.map((s) => s.sandboxId).sort());
  const odd = await Sandbox.list({ ...conn, query: { metadata: { batch: 'list', odd: '1' } } }).nextItems();
  assert.equal(odd.length, 2);
  const paused = await Sandbox.list({ ...conn, query: { state: ['paused'], metadata: { batch: 'list' } } }).nextItems();
  assert.deepEqual(paused.map((s) => s.sandboxId), [made[0].sandboxId]);
  for (const s of made) await s.kill();
});

test('errors carry the status and the server code', async () => {
  await assert.rejects(Sandbox.create('nope', conn), (e: unknown) => e instanceof NotFoundError && e.status === 404 && e.code === 130404);
  await assert.rejects(Sandbox.create({ ...conn, apiKey: 'wrong' }), (e: unknown) => e instanceof AuthenticationError && e.status === 401);
  await assert.rejects(Sandbox.connect('sbx-missing', conn), SandboxNotFoundError);
  await assert.rejects(Sandbox.setTimeout('sbx-missing', 1000, conn), SandboxNotFoundError);
});
