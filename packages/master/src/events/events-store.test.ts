/**
 * The lifecycle events' store (recorder.ts, event-repo.ts) on every database engine: what a
 * sandbox's events carry (runs, execution, metadata), the lists' order, paging, type filter and
 * team scoping, the deliveries queued with an event, and the pruning past retention.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomId, silentLogger } from '@svc/common';
import type { SandboxEventData, SandboxEventType, WireSandboxEvent } from '@svc/contracts/events';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import { EventRepo, type EventQuery } from './event-repo.ts';
import { EventRecorder, toWireEvent, type EventSubject } from './recorder.ts';
import { WebhookRepo } from './webhook-repo.ts';

const T = (s: string) => `sandbox.lifecycle.${s}` as SandboxEventType;
const CREATED = T('created');
const UPDATED = T('updated');
const PAUSED = T('paused');
const RESUMED = T('resumed');
const SNAPSHOTTED = T('snapshotted');
const KILLED = T('killed');
const RUN_ORDER = [CREATED, UPDATED, PAUSED, RESUMED, SNAPSHOTTED, KILLED];

function subject(teamId: string, o: Partial<EventSubject> = {}): EventSubject {
  return {
    sandbox_id: `sbx-${randomId(10)}`, team_id: teamId, template_id: 'tmpl-base', cpu_count: 2, memory_mb: 1024,
    metadata: '{"app":"web","owner":"ops"}', started_at: Date.now(), ...o,
  };
}

const page = (o: Partial<EventQuery> = {}): EventQuery => ({ offset: 0, limit: 100, asc: false, ...o });
const ms = (iso: string) => Date.parse(iso);

for (const engine of availableTestDatabases()) {
  test(`lifecycle events store on ${engine.driver}`, { skip: engine.skip }, async (t) => {
    const tdb = await engine.create!();
    const db = await openDatabase(tdb.config);
    try {
      await migrate(db.kysely, db.driver, migrations);
      const events = new EventRepo(db.kysely);
      const webhooks = new WebhookRepo(db.kysely);
      let queued = 0;
      const recorder = new EventRecorder({ events, webhooks, logger: silentLogger(), onQueued: () => queued++ });
      const teamA = `team-a-${randomId(6)}`;
      const teamB = `team-b-${randomId(6)}`;
      const wire = async (teamId: string, q: Partial<EventQuery> = {}) => (await events.list(teamId, page(q))).map(toWireEvent);
      /** Records the events in order, a few milliseconds apart (each run has a measurable length). */
      const run = async (s: EventSubject, steps: Array<[SandboxEventType, SandboxEventData?, { buildId?: string }?]>) => {
        for (const [type, data, opts] of steps) {
          await recorder.record(s, type, data, opts);
          await sleep(5);
        }
      };

      const sbx = subject(teamA);
      const deadline = new Date(Date.now() + 600_000).toISOString();
      await run(sbx, [
        [CREATED, {}, { buildId: 'build-1' }],
        [UPDATED, { set_timeout: deadline }],
        [PAUSED, { reason: 'api' }],
        [RESUMED],
        [SNAPSHOTTED, { snapshot_id: 'snap-1' }],
        [KILLED, { reason: 'api' }],
      ]);

      await t.test('one sandbox\'s events: newest first by default, oldest first with asc', async () => {
        const desc = await wire(teamA, { sandboxId: sbx.sandbox_id });
        assert.deepEqual(desc.map((e) => e.type), [...RUN_ORDER].reverse());
        const asc = await wire(teamA, { sandboxId: sbx.sandbox_id, asc: true });
        assert.deepEqual(asc.map((e) => e.type), RUN_ORDER);
        assert.deepEqual(asc.map((e) => e.id), [...desc].reverse().map((e) => e.id));
        for (let i = 1; i < asc.length; i++) assert.ok(ms(asc[i]!.timestamp) >= ms(asc[i - 1]!.timestamp), `event ${i} is not older than event ${i - 1}`);
        for (const e of asc) {
          assert.equal(e.version, 'v1');
          assert.equal(e.sandboxId, sbx.sandbox_id);
          assert.equal(e.sandboxTeamId, teamA);
          assert.equal(e.sandboxTemplateId, 'tmpl-base');
          assert.equal(e.sandboxBuildId, 'build-1', `${e.type}: the build of the create, carried along`);
          assert.match(e.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a uuid v7');
          assert.equal(new Date(ms(e.timestamp)).toISOString(), e.timestamp, 'RFC 3339');
        }
      });

      await t.test('runs: one execution id from created to paused, a new one from resumed', async () => {
        const [created, updated, paused, resumed, snapshotted, killed] = await wire(teamA, { sandboxId: sbx.sandbox_id, asc: true }) as WireSandboxEvent[];
        assert.match(created!.sandboxExecutionId, /^[0-9a-f-]{36}$/);
        assert.equal(updated!.sandboxExecutionId, created!.sandboxExecutionId);
        assert.equal(paused!.sandboxExecutionId, created!.sandboxExecutionId);
        assert.notEqual(resumed!.sandboxExecutionId, created!.sandboxExecutionId);
        assert.equal(snapshotted!.sandboxExecutionId, resumed!.sandboxExecutionId);
        assert.equal(killed!.sandboxExecutionId, resumed!.sandboxExecutionId);
      });

      await t.test('eventData: the data given, execution on paused and killed, sandbox_metadata', async () => {
        const byType = new Map((await wire(teamA, { sandboxId: sbx.sandbox_id })).map((e) => [e.type, e]));
        const meta = { app: 'web', owner: 'ops' };
        assert.deepEqual(byType.get(CREATED)!.eventData, { sandbox_metadata: meta });
        assert.deepEqual(byType.get(UPDATED)!.eventData, { set_timeout: deadline, sandbox_metadata: meta });
        assert.deepEqual(byType.get(RESUMED)!.eventData, { sandbox_metadata: meta });
        assert.deepEqual(byType.get(SNAPSHOTTED)!.eventData, { snapshot_id: 'snap-1', sandbox_metadata: meta });
        for (const [end, start] of [[PAUSED, CREATED], [KILLED, RESUMED]] as const) {
          const e = byType.get(end)!;
          const x = e.eventData?.execution;
          assert.ok(x, `${end} carries its run's execution`);
          assert.equal(x.started_at, byType.get(start)!.timestamp, `${end}: its run started at the ${start}`);
          assert.equal(x.vcpu_count, 2);
          assert.equal(x.memory_mb, 1024);
          assert.ok(Number.isInteger(x.execution_time) && x.execution_time >= 0, `${end}: execution_time ${x.execution_time}`);
          assert.equal(x.execution_time, ms(e.timestamp) - ms(x.started_at), `${end}: the run's length`);
          assert.equal(e.eventData?.reason, 'api');
          assert.deepEqual(e.eventData?.sandbox_metadata, meta);
        }
        assert.ok(byType.get(PAUSED)!.eventData!.execution!.execution_time >= 10, 'two events passed in the run');
      });

      await t.test('a kill after a pause carries no execution; empty metadata none; no buildId is the template', async () => {
        const s = subject(teamA, { metadata: '{}', cpu_count: 4, memory_mb: 2048 });
        await run(s, [[CREATED], [PAUSED], [KILLED]]);
        const [created, paused, killed] = await wire(teamA, { sandboxId: s.sandbox_id, asc: true });
        assert.equal(created!.eventData, null, 'nothing more than the type says');
        assert.deepEqual(Object.keys(paused!.eventData ?? {}), ['execution']);
        assert.equal(paused!.eventData!.execution!.vcpu_count, 4);
        assert.equal(paused!.eventData!.execution!.memory_mb, 2048);
        assert.equal(killed!.eventData, null, 'the run ended at the pause');
        assert.equal(killed!.sandboxExecutionId, created!.sandboxExecutionId);
        assert.equal(created!.sandboxBuildId, 'tmpl-base');
      });

      await t.test('a sandbox with no events before (created before events were recorded): its run started at started_at', async () => {
        const startedAt = Date.now() - 60_000;
        const s = subject(teamA, { started_at: startedAt, metadata: '' });
        await recorder.record(s, KILLED);
        const [killed] = await wire(teamA, { sandboxId: s.sandbox_id });
        assert.equal(killed!.eventData?.execution?.started_at, new Date(startedAt).toISOString());
        assert.ok(killed!.eventData!.execution!.execution_time >= 60_000, 'the run began at started_at, a minute ago');
        assert.equal(killed!.sandboxExecutionId, s.sandbox_id);
      });

      await t.test('offset and limit page through the events', async () => {
        const id = sbx.sandbox_id;
        const pages = [];
        for (let offset = 0; offset < 8; offset += 2) pages.push((await wire(teamA, { sandboxId: id, offset, limit: 2 })).map((e) => e.type));
        assert.deepEqual(pages, [[KILLED, SNAPSHOTTED], [RESUMED, PAUSED], [UPDATED, CREATED], []]);
        assert.deepEqual((await wire(teamA, { sandboxId: id, offset: 1, limit: 3, asc: true })).map((e) => e.type), [UPDATED, PAUSED, RESUMED]);
        assert.equal((await wire(teamA, { sandboxId: id, limit: 1 })).length, 1);
        assert.deepEqual(await wire(teamA, { sandboxId: id, offset: 6, limit: 10 }), []);
      });

      await t.test('types filters; an empty list is no filter', async () => {
        const id = sbx.sandbox_id;
        assert.deepEqual((await wire(teamA, { sandboxId: id, types: [PAUSED, KILLED] })).map((e) => e.type), [KILLED, PAUSED]);
        assert.deepEqual((await wire(teamA, { sandboxId: id, types: [UPDATED], asc: true })).map((e) => e.type), [UPDATED]);
        assert.equal((await wire(teamA, { sandboxId: id, types: [] })).length, 6);
        const allKills = await wire(teamA, { types: [KILLED] });
        assert.deepEqual(allKills.map((e) => e.type), [KILLED, KILLED, KILLED], 'the team\'s three kills');
      });

      await t.test('team scoping: another team\'s events are not listed, nor its sandbox known', async () => {
        const other = subject(teamB);
        await run(other, [[CREATED], [KILLED]]);
        const a = await wire(teamA);
        assert.equal(a.length, 10, 'team A\'s ten events');
        assert.deepEqual(new Set(a.map((e) => e.sandboxTeamId)), new Set([teamA]));
        assert.ok(!a.some((e) => e.sandboxId === other.sandbox_id), 'team B\'s sandbox is not in team A\'s list');
        assert.deepEqual((await wire(teamB)).map((e) => [e.sandboxId, e.type]), [[other.sandbox_id, KILLED], [other.sandbox_id, CREATED]]);
        assert.deepEqual(await wire(teamB, { sandboxId: sbx.sandbox_id }), [], 'team A\'s sandbox through team B');
        assert.equal(await events.teamHasSandbox(teamA, sbx.sandbox_id), true);
        assert.equal(await events.teamHasSandbox(teamB, sbx.sandbox_id), false);
        assert.equal(await events.teamHasSandbox(teamB, other.sandbox_id), true);
        assert.equal(await events.teamHasSandbox(teamA, 'sbx-none'), false);
      });

      await t.test('an event queues one delivery per enabled webhook subscribed to its type, with the event as body', async () => {
        const team = `team-hooks-${randomId(6)}`;
        const now = Date.now();
        const hook = (id: string, types: SandboxEventType[], enabled = 1) => webhooks.insert({
          webhook_id: id, team_id: team, name: id, url: 'http://192.0.2.1/hook', enabled, events: JSON.stringify(types),
          sealed_secret: 'v1:sealed', last_delivery: null, created_at: now, updated_at: now,
        });
        const ids = { both: `wh-${randomId(8)}`, killOnly: `wh-${randomId(8)}`, off: `wh-${randomId(8)}` };
        await hook(ids.both, [CREATED, KILLED]);
        await hook(ids.killOnly, [KILLED]);
        await hook(ids.off, [CREATED, KILLED], 0);
        const s = subject(team);
        const before = queued;
        await recorder.record(s, CREATED);
        await recorder.record(s, UPDATED);
        assert.equal(queued, before + 1, 'kicked once: the update queued nothing');
        const rows = await db.kysely.selectFrom('t_svc_webhook_delivery').selectAll().where('webhook_id', 'in', Object.values(ids)).execute();
        assert.deepEqual(rows.map((r) => r.webhook_id), [ids.both]);
        const [created] = await wire(team, { sandboxId: s.sandbox_id, types: [CREATED] });
        assert.equal(rows[0]!.event_id, created!.id);
        assert.deepEqual(JSON.parse(rows[0]!.body), created, 'the body is the event as listed');
        assert.equal(rows[0]!.status, 'pending');
        assert.equal(Number(rows[0]!.attempts), 0);
      });

      await t.test('a team\'s waiting deliveries are capped: past the cap an event is recorded, its deliveries are not, and each webhook says why', async () => {
        const team = `team-full-${randomId(6)}`;
        const now = Date.now();
        const capped = new EventRecorder({ events, webhooks, logger: silentLogger(), maxWaiting: 3 });
        const ids = [`wh-${randomId(8)}`, `wh-${randomId(8)}`];
        for (const id of ids) {
          await webhooks.insert({
            webhook_id: id, team_id: team, name: id, url: 'http://192.0.2.1/hook', enabled: 1, events: JSON.stringify([UPDATED]),
            sealed_secret: 'v1:sealed', last_delivery: null, created_at: now, updated_at: now,
          });
        }
        const s = subject(team);
        for (let i = 0; i < 4; i++) await capped.record(s, UPDATED);
        const waiting = await db.kysely.selectFrom('t_svc_webhook_delivery').selectAll().where('webhook_id', 'in', ids).execute();
        assert.equal(waiting.length, 2, 'the first event queued one delivery per webhook; the next would pass the cap of 3');
        assert.equal((await wire(team, { sandboxId: s.sandbox_id })).length, 4, 'every event is recorded and listed');
        const last = JSON.parse((await webhooks.byId(ids[0]!))!.last_delivery!) as { outcome: string; error: string };
        assert.equal(last.outcome, 'failed');
        assert.match(last.error, /^not queued: the team has 2 deliveries waiting, and at most 3 may wait/);
        // Another team's deliveries are not held back by this one's.
        const other = `team-other-${randomId(6)}`;
        const otherHook = `wh-${randomId(8)}`;
        await webhooks.insert({
          webhook_id: otherHook, team_id: other, name: 'o', url: 'http://192.0.2.1/hook', enabled: 1, events: JSON.stringify([UPDATED]),
          sealed_secret: 'v1:sealed', last_delivery: null, created_at: now, updated_at: now,
        });
        await capped.record(subject(other), UPDATED);
        assert.equal(await webhooks.waitingOf([otherHook]), 1);
      });

      await t.test('prune(before) removes the older events only', async () => {
        const count = async () => Number((await db.kysely.selectFrom('t_svc_event').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
        const old = await count();
        await sleep(10);
        const cut = Date.now();
        await sleep(5);
        const late = subject(teamA);
        await run(late, [[CREATED], [KILLED]]);
        assert.equal(await events.prune(cut), old, 'every event before the cut');
        assert.equal(await count(), 2);
        assert.deepEqual((await wire(teamA)).map((e) => [e.sandboxId, e.type]), [[late.sandbox_id, KILLED], [late.sandbox_id, CREATED]]);
        assert.equal(await events.teamHasSandbox(teamA, sbx.sandbox_id), false);
        assert.equal(await events.prune(cut), 0);
      });
    } finally {
      await db.close();
      await tdb.drop();
    }
  });
}
