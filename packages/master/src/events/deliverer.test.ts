/**
 * Webhook delivery (deliverer.ts) over a real SQLite database and real HTTP endpoints on
 * 127.0.0.1: E2B's headers and signature, retries, timeouts, a dead endpoint beside a healthy one,
 * several masters on one queue, a master's restart, and the target check at delivery time.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { WireSandboxEvent } from '@svc/contracts/events';
import { WebhookRepo } from './webhook-repo.ts';
import { CREATED, e2bSignature, KILLED, SECRET, subject, TEAM, UPDATED, waitFor, withHarness } from './deliverer-harness.ts';

test('a delivery carries E2B\'s headers and a signature E2B\'s check accepts; only subscribed types; a disabled webhook gets nothing', () => withHarness(async (h) => {
  const ep = await h.endpoint();
  const off = await h.endpoint();
  const hook = await h.hook(ep.url, [CREATED, KILLED]);
  await h.hook(off.url, [CREATED, KILLED], false);
  const later = await h.hook(off.url, [CREATED, KILLED]);
  await h.service.update(TEAM, later.id, { enabled: false });
  h.deliverer('master-a');
  const s = subject();
  await h.recorder.record(s, CREATED, {}, { buildId: 'build-1' });
  const [hit] = await waitFor('the created delivery', () => ep.hits.length === 1 && ep.hits);
  assert.equal(hit.headers['e2b-webhook-id'], hook.id);
  assert.match(String(hit.headers['e2b-delivery-id']), /^[0-9a-f-]{36}$/);
  assert.equal(hit.headers['e2b-signature-version'], 'v1');
  assert.equal(hit.headers['content-type'], 'application/json');
  assert.equal(hit.headers['e2b-signature'], e2bSignature(SECRET, hit.body), 'the signature verifies as E2B\'s docs check it');
  assert.notEqual(hit.headers['e2b-signature'], e2bSignature('another secret', hit.body));
  const body = JSON.parse(hit.body) as WireSandboxEvent;
  assert.equal(body.version, 'v1');
  assert.equal(body.type, CREATED);
  assert.equal(body.sandboxId, s.sandbox_id);
  assert.equal(body.sandboxTeamId, TEAM);
  assert.equal(body.sandboxTemplateId, 'base');
  assert.equal(body.sandboxBuildId, 'build-1');
  assert.match(body.sandboxExecutionId, /^[0-9a-f-]{36}$/);
  assert.deepEqual(body.eventData, { sandbox_metadata: { app: 'web' } });
  assert.ok(!Number.isNaN(Date.parse(body.timestamp)), `timestamp ${body.timestamp}`);

  await h.recorder.record(s, UPDATED, { set_timeout: new Date().toISOString() });
  await h.recorder.record(s, KILLED, { reason: 'api' });
  await waitFor('the killed delivery', () => ep.hits.length >= 2);
  await sleep(200);
  assert.deepEqual(ep.hits.map((x) => (JSON.parse(x.body) as WireSandboxEvent).type), [CREATED, KILLED], 'updated is not subscribed');
  assert.equal(new Set(ep.hits.map((x) => x.headers['e2b-delivery-id'])).size, 2, 'a delivery id per delivery');
  assert.equal(off.hits.length, 0, 'a disabled webhook gets nothing');
  const last = await h.last(hook.id);
  assert.equal(last?.outcome, 'delivered');
  assert.equal(last?.status, 200);
  assert.equal(last?.eventId, (JSON.parse(ep.hits[1]!.body) as WireSandboxEvent).id);
}));

test('500, 500, 200: three attempts of one delivery id, retryDelayMs apart, then delivered', () => withHarness(async (h) => {
  const ep = await h.endpoint((n) => (n < 2 ? 500 : 200));
  const hook = await h.hook(ep.url);
  h.deliverer('master-a');
  await h.recorder.record(subject(), CREATED);
  await waitFor('delivered', async () => (await h.last(hook.id))?.outcome === 'delivered');
  assert.equal(ep.hits.length, 3);
  assert.equal(new Set(ep.hits.map((x) => x.headers['e2b-delivery-id'])).size, 1, 'the same e2b-delivery-id each attempt');
  assert.equal(new Set(ep.hits.map((x) => x.body)).size, 1, 'the same body each attempt');
  for (let i = 1; i < 3; i++) assert.ok(ep.hits[i]!.at - ep.hits[i - 1]!.at >= 90, `attempt ${i + 1} waited for the retry delay`);
  const [row] = await h.deliveries(hook.id);
  assert.equal(row?.status, 'delivered');
  assert.equal(row?.attempts, 3);
}));

test('always 500: exactly 1 + 3 attempts, then failed', () => withHarness(async (h) => {
  const ep = await h.endpoint(() => 500);
  const hook = await h.hook(ep.url);
  h.deliverer('master-a');
  await h.recorder.record(subject(), CREATED);
  const last = await waitFor('failed', async () => { const l = await h.last(hook.id); return l?.outcome === 'failed' && l; });
  assert.equal(last.status, 500);
  assert.equal(last.error, 'answered 500');
  await sleep(300);
  assert.equal(ep.hits.length, 4, 'no attempt after the last retry');
  const [row] = await h.deliveries(hook.id);
  assert.equal(row?.status, 'failed');
  assert.equal(row?.attempts, 4);
}));

test('an endpoint that never answers is a failed attempt after timeoutMs', () => withHarness(async (h) => {
  const ep = await h.endpoint((n) => (n === 0 ? 'hang' : 200));
  const hook = await h.hook(ep.url);
  h.deliverer('master-a');
  await h.recorder.record(subject(), CREATED);
  const retrying = await waitFor('the timed-out attempt', async () => { const l = await h.last(hook.id); return l?.outcome === 'retrying' && l; });
  assert.match(retrying.error ?? '', /no answer within 500 ms/);
  assert.equal(retrying.status, undefined);
  await waitFor('delivered on the retry', async () => (await h.last(hook.id))?.outcome === 'delivered');
  assert.equal(ep.hits.length, 2);
  const gap = ep.hits[1]!.at - ep.hits[0]!.at;
  assert.ok(gap >= 500 + 90 && gap < 1500, `the retry came after the timeout and the delay (${gap} ms)`);
}));

test('a dead endpoint (a closed port, a hanging one) does not delay another webhook\'s delivery', () => withHarness(async (h) => {
  const hanging = await h.endpoint(() => 'hang');
  const closed = await h.hook(`http://127.0.0.1:${await h.closedPort()}/hook`);
  const hung = await h.hook(hanging.url);
  const ep = await h.endpoint();
  await h.hook(ep.url);
  h.deliverer('master-a');
  for (let i = 1; i <= 3; i++) {
    const at = Date.now();
    await h.recorder.record(subject(), CREATED);
    await waitFor(`healthy delivery ${i}`, () => ep.hits.length === i, 1000);
    assert.ok(ep.hits[i - 1]!.at - at < 200, `delivery ${i} took ${ep.hits[i - 1]!.at - at} ms`);
    await sleep(120);
  }
  assert.equal((await h.last(closed.id))?.outcome, 'retrying');
  assert.match((await h.last(closed.id))?.error ?? '', /^connection refused$/);
  assert.ok(hanging.hits.length >= 3, 'the hanging endpoint holds its attempts meanwhile');
  assert.equal((await h.deliveries(hung.id)).filter((d) => d.status === 'pending').length, 3);
}));

test('a dead endpoint\'s backlog, however long, does not hold back another webhook\'s delivery', () => withHarness(async (h) => {
  // The queue is read webhook by webhook, each up to its share: a hanging webhook with more due
  // rows than a whole read would hold (120 with the defaults) still leaves the others' rows readable.
  const hanging = await h.endpoint(() => 'hang');
  await h.hook(hanging.url, [UPDATED]);
  const ep = await h.endpoint();
  await h.hook(ep.url, [KILLED]);
  const s = subject();
  for (let i = 0; i < 200; i++) await h.recorder.record(s, UPDATED);
  h.deliverer('master-a');
  await waitFor('the hanging endpoint holds its share', () => hanging.hits.length >= 4, 1000);
  const at = Date.now();
  await h.recorder.record(s, KILLED);
  await waitFor('the healthy webhook\'s delivery', () => ep.hits.length === 1, 1500).catch((err: Error) => {
    throw new Error(`${err.message}: it is stuck behind the dead webhook's backlog (${Date.now() - at} ms)`);
  });
}));

test('two masters on one database deliver each of 20 events exactly once', () => withHarness(async (h) => {
  const ep = await h.endpoint();
  const hook = await h.hook(ep.url);
  const other = await h.secondDb();
  h.deliverer('master-a');
  h.deliverer('master-b', { db: other });
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    await h.recorder.record(subject(), CREATED);
  }
  for (const r of await h.deliveries(hook.id)) ids.push(r.event_id);
  assert.equal(ids.length, 20);
  await waitFor('20 deliveries', () => ep.hits.length >= 20);
  await sleep(300);
  assert.equal(ep.hits.length, 20, 'no event sent twice');
  const sent = ep.hits.map((x) => (JSON.parse(x.body) as WireSandboxEvent).id).sort();
  assert.deepEqual(sent, ids.sort());
  assert.deepEqual(new Set((await h.deliveries(hook.id)).map((d) => d.status)), new Set(['delivered']));
}));

test('a restart: a delivery waiting for its retry when master A stops is sent by master B', () => withHarness(async (h) => {
  const ep = await h.endpoint((n) => (n === 0 ? 500 : 200));
  const hook = await h.hook(ep.url);
  const a = h.deliverer('master-a', { retryDelayMs: 300 });
  await h.recorder.record(subject(), CREATED);
  await waitFor('the first attempt recorded', async () => (await h.deliveries(hook.id))[0]?.attempts === 1);
  await a.stop();
  await sleep(400);
  assert.equal(ep.hits.length, 1, 'nothing is sent while no master runs');
  const [waiting] = await h.deliveries(hook.id);
  assert.equal(waiting?.status, 'pending');
  assert.equal(waiting?.lease_holder, null, 'master A holds no lease on it');
  h.deliverer('master-b', { db: await h.secondDb() });
  await waitFor('delivered by master B', async () => (await h.last(hook.id))?.outcome === 'delivered', 1000);
  assert.equal(ep.hits.length, 2);
  assert.equal(ep.hits[1]!.headers['e2b-delivery-id'], ep.hits[0]!.headers['e2b-delivery-id']);
}));

test('stop() waits for a queue read under way, which then sends nothing', () => withHarness(async (h) => {
  // A read started just before (start() or kick()) must not claim and send after stop() has
  // resolved, from a master that is shutting down and whose database may be closed by then.
  const ep = await h.endpoint();
  const hook = await h.hook(ep.url);
  await h.recorder.record(subject(), CREATED);
  const d = h.deliverer('master-a', { start: false });
  d.start();
  await d.stop();
  await sleep(300);
  const [row] = await h.deliveries(hook.id);
  assert.equal(ep.hits.length, 0, 'a stopped deliverer sends nothing');
  assert.equal(row?.status, 'pending');
}));

test('a row read before another master\'s failed attempt is stale: its claim fails (lease, attempts and due time compared)', () => withHarness(async (h) => {
  // settle() resets lease_until to 0, so a claim on the lease alone would let master B, holding a
  // row it read as due before master A's attempt, send at once (the retry delay skipped) and undo
  // A's count: the claim compares the attempts and the due time too.
  const ep = await h.endpoint(() => 500);
  const hook = await h.hook(ep.url);
  await h.recorder.record(subject(), CREATED);
  const [stale] = await h.repo.due(hook.id, Date.now(), 10);
  assert.ok(stale, 'the delivery is due');
  const a = h.deliverer('master-a', { retryDelayMs: 10_000 });
  await waitFor('master A\'s attempt recorded', async () => (await h.deliveries(hook.id))[0]?.attempts === 1);
  await a.stop();
  const [now] = await h.deliveries(hook.id);
  assert.ok(now!.next_at > Date.now() + 5_000, 'the retry is not due for seconds');
  const taken = await new WebhookRepo((await h.secondDb()).kysely).claim(stale, 'master-b', Date.now() + 30_000);
  assert.equal(taken, false, 'master B took a delivery that is not due, with a stale attempt count');
}));

test('an attempt that outlived its lease records nothing: the master that took the delivery since is the one recorded', () => withHarness(async (h) => {
  const ep = await h.endpoint();
  const hook = await h.hook(ep.url);
  await h.recorder.record(subject(), CREATED);
  const [due] = await h.repo.due(hook.id, Date.now(), 10);
  assert.ok(due);
  const leaseA = Date.now() + 1;
  assert.ok(await h.repo.claim(due, 'master-a', leaseA));
  // A's lease ran out; B read the row again and took it.
  const [again] = await h.deliveries(hook.id);
  const leaseB = Date.now() + 60_000;
  assert.ok(await h.repo.claim(again!, 'master-b', leaseB));
  const outcome = { status: 'failed' as const, attempts: 7, nextAt: 0, error: 'stale', now: Date.now() };
  assert.equal(await h.repo.settle(due.delivery_id, { holder: 'master-a', leaseUntil: leaseA }, outcome), false);
  const [row] = await h.deliveries(hook.id);
  assert.deepEqual([row!.status, row!.attempts, row!.lease_holder], ['pending', 0, 'master-b'], 'A\'s stale outcome changed nothing');
  assert.equal(await h.repo.settle(due.delivery_id, { holder: 'master-b', leaseUntil: leaseB }, { ...outcome, status: 'delivered', attempts: 1, error: null }), true);
}));

test('a URL whose name resolves into the pool at delivery time is not sent to', () => withHarness(async (h) => {
  const ep = await h.endpoint();
  h.names.set('hooks.example', ['127.0.0.1']);
  const hook = await h.hook(`http://hooks.example:${ep.port}/hook`);
  h.deliverer('master-a');
  await h.recorder.record(subject(), CREATED);
  // The name resolves through the check only: the connection goes to the address it gave.
  await waitFor('the first delivery', () => ep.hits.length === 1);
  assert.equal(ep.hits[0]!.headers.host, `hooks.example:${ep.port}`);
  h.names.set('hooks.example', ['93.184.216.34', '10.200.0.9']);
  await h.recorder.record(subject(), CREATED);
  const last = await waitFor('the refused delivery failed', async () => { const l = await h.last(hook.id); return l?.outcome === 'failed' && l; });
  assert.match(last.error ?? '', /10\.200\.0\.9 \(hooks\.example\) is in the sandbox address pool/);
  assert.equal(last.status, undefined);
  assert.equal(ep.hits.length, 1, 'nothing sent to the rebound name');
  const refused = (await h.deliveries(hook.id)).find((d) => d.status === 'failed');
  assert.equal(refused?.attempts, 4);
  assert.match(refused?.last_error ?? '', /sandbox address pool/);
}));
