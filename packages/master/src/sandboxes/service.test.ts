/** The master's sandbox lifecycle: create, pause, connect and resume, kill, and the lock between them. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes } from '@svc/common';
import { availableTestDatabases } from '../db/test-databases.ts';
import { flush, input, setup, status, waitUntil } from './service-test-support.ts';

for (const tdb of availableTestDatabases()) {
  test(`sandbox state machine on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    const h = await setup(made.config);
    const { svc, node } = h;
    try {
      await t.test('none → running: create with a valid template; idle clock per the timeout table', async () => {
        const before = Date.now();
        const s = await svc.create(input({ timeout: 30, metadata: { app: 'a' } }));
        assert.equal(s.state, 'running');
        assert.equal(s.timeout, 30);
        const endAt = Date.parse(s.endAt!);
        assert.ok(endAt >= before + 30_000 && endAt <= Date.now() + 30_000);
        const never = await svc.create(input());
        assert.equal(never.endAt, undefined, 'no server default: never times out, endAt omitted');
        const immediate = await svc.create(input({ timeout: 0 }));
        assert.ok((await svc.due()).some((d) => d.sandboxId === immediate.sandboxId), '0: reclaimed on the first sweep');
        await flush();
        assert.ok(h.events.some((e) => e.kind === 'sandbox.created' && e.sandboxId === s.sandboxId));
      });

      await t.test('create: a mount of a volume that does not exist fails the create', async () => {
        const e = await status(svc.create(input({ volumeMounts: [{ name: 'data', path: '/data', readOnly: false }] })));
        assert.equal(e.status, 404);
        assert.match(e.message, /volume data not found/);
      });

      await t.test('create: unknown template is 404 with the template-not-found code (130404)', async () => {
        const e = await status(svc.create(input({ template: 'nope' })));
        assert.equal(e.status, 404);
        assert.equal(e.code, ErrorCodes.templateNotFound);
      });

      await t.test('create: a node failure is a clear 500 and nothing is left on the node or in the database', async () => {
        const rowsBefore = (await svc.list({ limit: 1000 })).sandboxes.length;
        const onNodeBefore = node.sandboxes.size;
        const callsBefore = node.calls.length;
        node.behaviour.failCreate = true;
        const e = await status(svc.create(input()));
        node.behaviour.failCreate = false;
        assert.equal(e.status, 500);
        assert.match(e.message, /sandbox create failed/);
        // The node may have got further than its answer: the master removes whatever it made there.
        const attempted = node.calls.slice(callsBefore).find((c) => c.startsWith('create '))!.slice('create '.length);
        await waitUntil(() => node.calls.includes(`delete ${attempted}`));
        assert.equal(node.sandboxes.size, onNodeBefore, 'nothing left on the node');
        assert.equal((await svc.list({ limit: 1000 })).sandboxes.length, rowsBefore, 'no row for the failed create');
        assert.equal((await status(svc.get(attempted))).status, 404);
      });

      await t.test('create: past create_timeout_insec is a 504', async () => {
        node.behaviour.createDelayMs = 3500;
        const e = await status(svc.create(input()));
        node.behaviour.createDelayMs = 0;
        assert.equal(e.status, 504);
        assert.match(e.message, /create_timeout_insec/);
      });

      await t.test('running → paused by pause(); a finite deadline is unchanged; pause again is 409', async () => {
        const s = await svc.create(input({ timeout: 60 }));
        const p = await svc.pause(s.sandboxId);
        assert.equal(p.state, 'paused');
        assert.equal(p.pauseKind, 'freeze');
        assert.equal(p.endAt, s.endAt);
        const e = await status(svc.pause(s.sandboxId));
        assert.equal(e.status, 409);
        assert.ok(h.purged.some((ids) => ids.includes(s.sandboxId)), 'the pause purged the proxies\' cached route');
      });

      await t.test('paused → running by connect(): 201 semantics (resumed) and the sandbox.resumed event', async () => {
        const s = await svc.create(input({ timeout: 60 }));
        await svc.pause(s.sandboxId);
        const r = await svc.connect(s.sandboxId, undefined);
        assert.equal(r.resumed, true);
        assert.equal(r.sandbox.state, 'running');
        await flush();
        assert.ok(h.events.some((e) => e.kind === 'sandbox.resumed' && e.sandboxId === s.sandboxId));
        const again = await svc.connect(s.sandboxId, 120);
        assert.equal(again.resumed, false, 'running: 200 semantics');
        assert.ok(Date.parse(again.sandbox.endAt!) >= Date.now() + 119_000, 'N>0 ensures at least N seconds remain');
      });

      await t.test('connect/resume invalid timeouts are 400', async () => {
        const s = await svc.create(input());
        assert.equal((await status(svc.connect(s.sandboxId, 0))).status, 400);
        assert.equal((await status(svc.connect(s.sandboxId, -2))).status, 400);
        await svc.pause(s.sandboxId);
        assert.equal((await status(svc.resume(s.sandboxId, -2))).status, 400);
        const r = await svc.resume(s.sandboxId, 0);
        assert.equal(r.state, 'running');
        assert.equal((await status(svc.resume(s.sandboxId, undefined))).status, 409, 'resume of a running sandbox');
      });

      await t.test('running → terminated by kill(); then 410 on reads and 404 on a second kill', async () => {
        const s = await svc.create(input());
        await svc.kill(s.sandboxId);
        assert.ok(!node.sandboxes.has(s.sandboxId));
        assert.equal((await status(svc.get(s.sandboxId))).status, 410);
        assert.equal((await status(svc.connect(s.sandboxId, undefined))).status, 410);
        assert.equal((await status(svc.kill(s.sandboxId))).status, 404);
        assert.equal((await status(svc.kill('iunknown'))).status, 404);
        const list = await svc.list({});
        assert.ok(!list.sandboxes.some((x) => x.sandboxId === s.sandboxId), 'the sandbox leaves the list');
      });

      await t.test('paused → terminated by kill(): no resume, no sandbox.resumed, pause state removed', async () => {
        const s = await svc.create(input());
        await svc.pause(s.sandboxId);
        const before = node.calls.length;
        h.events.length = 0;
        await svc.kill(s.sandboxId);
        await flush();
        assert.deepEqual(node.calls.slice(before), [`delete ${s.sandboxId}`]);
        assert.ok(!h.events.some((e) => e.kind === 'sandbox.resumed'));
        assert.ok(h.events.some((e) => e.kind === 'sandbox.killed'));
      });

      await t.test('connect while a pause is under way waits for it, then resumes (the API already shows it paused)', async () => {
        const s = await svc.create(input());
        node.behaviour.pauseDelayMs = 400;
        const pausing = svc.pause(s.sandboxId);
        await new Promise((r) => setTimeout(r, 100));
        const connected = await svc.connect(s.sandboxId, undefined);
        node.behaviour.pauseDelayMs = 0;
        await pausing;
        assert.equal(connected.resumed, true);
        assert.equal(connected.sandbox.state, 'running');
        assert.deepEqual(node.calls.filter((c) => c.endsWith(s.sandboxId)).slice(-2), [`pause ${s.sandboxId}`, `resume ${s.sandboxId}`]);
        await svc.kill(s.sandboxId);
      });

      await t.test('connect that finds the sandbox paused while the pause still holds its lock waits for the lock', async () => {
        const s = await svc.create(input());
        await svc.pause(s.sandboxId);
        await h.coordination.tryLock(`sbx:${s.sandboxId}`, 'a-pause-finishing', 5_000);
        setTimeout(() => { void h.coordination.unlock(`sbx:${s.sandboxId}`, 'a-pause-finishing'); }, 300);
        const connected = await svc.connect(s.sandboxId, undefined);
        assert.equal(connected.resumed, true);
        assert.equal(connected.sandbox.state, 'running');
        await svc.kill(s.sandboxId);
      });

      await t.test('DELETE while pausing or locked: 503 with Retry-After: 2', async () => {
        const s = await svc.create(input());
        node.behaviour.pauseDelayMs = 400;
        const pausing = svc.pause(s.sandboxId);
        await new Promise((r) => setTimeout(r, 100));
        const e = await status(svc.kill(s.sandboxId));
        assert.equal(e.status, 503);
        assert.equal(e.headers['Retry-After'], '2');
        await pausing;
        node.behaviour.pauseDelayMs = 0;
        await h.coordination.tryLock(`sbx:${s.sandboxId}`, 'someone-else', 5_000);
        const locked = await status(svc.kill(s.sandboxId));
        assert.equal(locked.status, 503);
        assert.equal(locked.headers['Retry-After'], '2');
        await h.coordination.unlock(`sbx:${s.sandboxId}`, 'someone-else');
        await svc.kill(s.sandboxId);
      });

      await t.test('DELETE that the node does not finish in time: 408', async () => {
        const s = await svc.create(input());
        node.behaviour.deleteDelayMs = 1000;
        const e = await status(svc.kill(s.sandboxId));
        node.behaviour.deleteDelayMs = 0;
        assert.equal(e.status, 408);
        await new Promise((r) => setTimeout(r, 800));
      });

      await t.test('resume while another operation holds the lock past the wait: 409', async () => {
        const s = await svc.create(input());
        await svc.pause(s.sandboxId);
        await h.coordination.tryLock(`sbx:${s.sandboxId}`, 'other', 30_000);
        assert.equal((await status(svc.connect(s.sandboxId, undefined))).status, 409);
        await h.coordination.unlock(`sbx:${s.sandboxId}`, 'other');
      });

      await t.test('resume refused by the release-ratio policy: 409 code 130409 with the node text', async () => {
        const s = await svc.create(input());
        await svc.pause(s.sandboxId);
        node.behaviour.refuseResume = 'resume rejected by paused_resource_release_ratio policy: need 256MB > quota 100MB';
        const e = await status(svc.connect(s.sandboxId, undefined));
        node.behaviour.refuseResume = undefined;
        assert.equal(e.status, 409);
        assert.equal(e.code, 130409);
        assert.equal(e.message, 'resume rejected by paused_resource_release_ratio policy: need 256MB > quota 100MB');
        assert.equal((await svc.get(s.sandboxId)).state, 'paused', 'stays paused');
      });

    } finally {
      await h.close();
      await made.drop();
    }
  });
}
