/**
 * The SDK's sandbox calls against the real API gateway and master (with the master's fake
 * node agent), to keep the wire shapes honest beyond the fake API.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  AuthenticationError, ConflictError, GoneError, InvalidArgumentError, NEVER_TIMEOUT, NotFoundError, Sandbox, SandboxError,
  SandboxNotFoundError, type SnapshotInfo,
} from './index.ts';
import { startGatewayOverFakeNode, type GatewayOverFakeNode } from './testing/gateway-over-fake-node.ts';
import { ErrorCodes } from '@svc/common';

const KEY = 'sdk-test-key';
let conn: { apiUrl: string; apiKey: string };
let gw: GatewayOverFakeNode;
let m: GatewayOverFakeNode['m'];
let close: () => Promise<void>;

before(async () => {
  gw = await startGatewayOverFakeNode({ apiKey: KEY });
  m = gw.m;
  conn = { apiUrl: gw.url, apiKey: KEY };
  close = () => gw.close();
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

test("getLogs: the sandbox's own log through the gateway, narrowed by the options; unknown sandboxes and bad options refused", async () => {
  const sbx = await Sandbox.create('base', conn);
  const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
  m.node.logs.set(sbx.sandboxId, [
    { timestamp: at(0), level: 'info', message: 'sandbox booting', fields: { logger: 'node-agent' } },
    { timestamp: at(1), level: 'error', message: 'envd: memory guard killed pid 7', fields: { logger: 'envd' } },
  ]);
  const all = await sbx.getLogs();
  assert.deepEqual(all.map((e) => [e.timestamp.toISOString(), e.level, e.message, e.fields.logger]), [
    [at(0), 'info', 'sandbox booting', 'node-agent'], [at(1), 'error', 'envd: memory guard killed pid 7', 'envd'],
  ]);
  assert.deepEqual((await sbx.getLogs({ level: 'error' })).map((e) => e.message), ['envd: memory guard killed pid 7']);
  assert.deepEqual((await sbx.getLogs({ direction: 'backward', limit: 1 })).map((e) => e.message), ['envd: memory guard killed pid 7']);
  assert.deepEqual((await Sandbox.getLogs(sbx.sandboxId, { ...conn, cursor: new Date(at(1)), search: 'booting' })), []);
  await assert.rejects(sbx.getLogs({ limit: 0 }), InvalidArgumentError);
  await sbx.kill();
  await assert.rejects(Sandbox.getLogs(sbx.sandboxId, conn), SandboxNotFoundError);
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
  await assert.rejects(Sandbox.create('nope', conn), (e: unknown) => e instanceof NotFoundError && e.status === 404 && e.code === ErrorCodes.templateNotFound);
  await assert.rejects(Sandbox.create({ ...conn, apiKey: 'wrong' }), (e: unknown) => e instanceof AuthenticationError && e.status === 401);
  await assert.rejects(Sandbox.connect('sbx-missing', conn), SandboxNotFoundError);
  await assert.rejects(Sandbox.setTimeout('sbx-missing', 1000, conn), SandboxNotFoundError);
});

/** Every snapshot the paginator gives, page by page. */
async function allSnapshots(pager: { hasNext: boolean; nextItems(): Promise<SnapshotInfo[]> }): Promise<SnapshotInfo[]> {
  const out: SnapshotInfo[] = [];
  while (pager.hasNext) out.push(...(await pager.nextItems()));
  return out;
}

test('snapshots: create (named and not), list with paging and filters, create from one, delete', async () => {
  const sbx = await Sandbox.create('base', { ...conn, metadata: { suite: 'snapshots' } });
  const named = await sbx.createSnapshot({ name: 'sdk-snap' });
  assert.deepEqual(named, { snapshotId: 'sdk-snap', names: ['sdk-snap'] });
  const unnamed = await Sandbox.createSnapshot(sbx.sandboxId, conn);
  assert.match(unnamed.snapshotId, /^snap-/);
  assert.deepEqual(unnamed.names, []);
  assert.equal((await sbx.getInfo()).state, 'running', 'the sandbox runs on after the capture');

  const pager = Sandbox.listSnapshots({ ...conn, sandboxId: sbx.sandboxId, limit: 1 });
  const first = await pager.nextItems();
  assert.equal(first.length, 1);
  assert.equal(pager.hasNext, true);
  assert.ok(pager.nextToken);
  const listed = [...first, ...(await allSnapshots(pager))];
  assert.deepEqual(listed.map((x) => x.snapshotId).sort(), [named.snapshotId, unnamed.snapshotId].sort());
  assert.deepEqual((await allSnapshots(sbx.listSnapshots())).map((x) => x.snapshotId).sort(), listed.map((x) => x.snapshotId).sort());
  assert.deepEqual(await allSnapshots(Sandbox.listSnapshots({ ...conn, name: 'sdk-snap' })), [named]);
  assert.deepEqual(await allSnapshots(Sandbox.listSnapshots({ ...conn, sandboxId: 'sbx-none' })), []);

  const child = await Sandbox.create(named.snapshotId, conn);
  assert.equal((await child.getInfo()).state, 'running');
  await child.kill();

  assert.equal(await Sandbox.deleteSnapshot(named.snapshotId, conn), true);
  assert.equal(await Sandbox.deleteSnapshot(named.snapshotId, conn), false);
  assert.equal(await Sandbox.deleteSnapshot(unnamed.snapshotId, conn), true);
  await assert.rejects(Sandbox.create(named.snapshotId, conn), NotFoundError);
  assert.deepEqual(await allSnapshots(sbx.listSnapshots()), []);
  await sbx.kill();
});

test('snapshots: bad input maps to the SDK\'s errors', async () => {
  await assert.rejects(Sandbox.createSnapshot('sbx-missing', conn), SandboxNotFoundError);
  const sbx = await Sandbox.create('base', conn);
  await assert.rejects(sbx.createSnapshot({ name: 'bad name!' }), (e: unknown) => e instanceof InvalidArgumentError && e.status === 400);
  await assert.rejects(sbx.createSnapshot({ name: 'base' }), InvalidArgumentError, 'a template\'s name');
  await sbx.pause();
  await assert.rejects(sbx.createSnapshot(), (e: unknown) => e instanceof ConflictError && e.status === 409);
  await sbx.kill();
  await assert.rejects(sbx.createSnapshot(), SandboxNotFoundError, 'a killed sandbox');
});

test('fork: count sandboxes from one capture, each a connected instance; bad counts and unknown sandboxes refused', async () => {
  const origin = await Sandbox.create('base', { ...conn, metadata: { suite: 'fork' } });
  const forks = await origin.fork({ count: 2, timeoutMs: 120_000 });
  assert.equal(forks.length, 2);
  const ids = forks.map((f) => {
    assert.ok(f instanceof Sandbox, String(f));
    return f.sandboxId;
  });
  assert.equal(new Set([...ids, origin.sandboxId]).size, 3);
  for (const f of forks as Sandbox[]) {
    const info = await f.getInfo();
    assert.equal(info.state, 'running');
    assert.equal(info.timeout, 120);
    assert.deepEqual(info.metadata, { suite: 'fork' });
    assert.equal(f.sandboxDomain, 'localhost:3002');
  }
  const one = await Sandbox.fork(origin.sandboxId, conn);
  assert.equal(one.length, 1);
  assert.ok(one[0] instanceof Sandbox);
  assert.equal((await origin.getInfo()).state, 'running', 'the origin runs on');

  const before = m.node.sandboxes.size;
  await assert.rejects(origin.fork({ count: 0 }), (e: unknown) => e instanceof InvalidArgumentError && e.status === 400);
  await assert.rejects(origin.fork({ count: 11 }), InvalidArgumentError);
  await assert.rejects(Sandbox.fork('sbx-missing', conn), SandboxNotFoundError);
  assert.equal(m.node.sandboxes.size, before, 'nothing started');

  m.node.behaviour.failCreate = true;
  try {
    const failed = await origin.fork({ count: 2 });
    assert.equal(failed.length, 2);
    for (const f of failed) {
      assert.ok(f instanceof SandboxError && !(f instanceof Sandbox), String(f));
      assert.ok((f as SandboxError).status && (f as SandboxError).status! >= 500, `a node failure is a server error: ${String(f)}`);
    }
  } finally {
    m.node.behaviour.failCreate = false;
  }
  await origin.pause();
  await assert.rejects(origin.fork(), ConflictError, 'a paused sandbox is not forked');
  for (const s of [origin, ...forks, ...one] as Sandbox[]) await s.kill();
});

test('filesystem pause: keepMemory false, connect with onResume reboot, and the timeout\'s pause kind', async () => {
  const sbx = await Sandbox.create('base', conn);
  assert.equal(await sbx.pause({ keepMemory: false }), true);
  assert.equal((await sbx.getInfo()).pauseKind, 'filesystem');
  assert.equal(await Sandbox.pause(sbx.sandboxId, { ...conn, keepMemory: false }), false, 'already paused');
  await sbx.connect();
  assert.equal((await sbx.getInfo()).state, 'running');
  assert.equal(m.node.calls.at(-1), `resume ${sbx.sandboxId} with identity`, 'booted again from its files');

  await Sandbox.pause(sbx.sandboxId, { ...conn, keepMemory: true });
  assert.equal((await sbx.getInfo()).pauseKind, 'freeze');
  await assert.rejects(Sandbox.connect(sbx.sandboxId, { ...conn, onResume: 'warm' as never }), InvalidArgumentError);
  const again = await Sandbox.connect(sbx.sandboxId, { ...conn, onResume: 'reboot' });
  assert.equal(again.sandboxId, sbx.sandboxId);
  assert.equal(m.node.calls.at(-1), `resume ${sbx.sandboxId} with identity`, "onResume 'reboot' drops the kept memory");
  await sbx.kill();

  // The idle timeout's pause: what the lifecycle manager does when the deadline passes.
  const timeoutPause = async (onTimeout: 'pause' | { action: 'pause'; keepMemory?: boolean }) => {
    const s = await Sandbox.create('base', { ...conn, timeoutMs: 1000, lifecycle: { onTimeout } });
    await new Promise((r) => setTimeout(r, 1100));
    await m.master.sandboxes.pause(s.sandboxId, 'timeout');
    const kind = (await s.getInfo()).pauseKind;
    await s.kill();
    return kind;
  };
  assert.equal(await timeoutPause({ action: 'pause', keepMemory: false }), 'filesystem');
  assert.equal(await timeoutPause({ action: 'pause' }), 'freeze');
  assert.equal(await timeoutPause('pause'), 'freeze');
  await assert.rejects(
    Sandbox.create('base', { ...conn, lifecycle: { onTimeout: { action: 'pause', keepMemory: false }, autoResume: true } }),
    (e: unknown) => e instanceof InvalidArgumentError && /autoResume/.test(e.message) && e.status === undefined,
    'refused before any request',
  );
});
