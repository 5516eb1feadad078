/**
 * E2B's lifecycle events API over HTTP against a real master (EVENT_ROUTES,
 * packages/contracts/src/events.ts): what a sandbox's life records, in order, paged and filtered;
 * the 400s of a bad query; and a team's events kept from every other team.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { SANDBOX_EVENT_TYPES, type SandboxEventType, type WireSandboxEvent } from '@svc/contracts/events';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { startMasterOverFakeNode, type MasterOverFakeNode } from '../testing/master-over-fake-node.ts';
import { assertBadRequest, clientOf, newSandbox, newTeam, send } from './events-test-support.ts';

const T = (s: string) => `sandbox.lifecycle.${s}` as SandboxEventType;

let h: MasterOverFakeNode;
let teamA: string;
let teamB: string;
/** Team A's sandbox that lived a whole life: created, updated, paused, resumed, snapshotted, killed. */
let lived: string;
let snapshotId: string;

before(async () => {
  h = await startMasterOverFakeNode();
  teamA = await newTeam(h);
  teamB = await newTeam(h);
  const api = clientOf(h, teamA);
  lived = await newSandbox(h, teamA);
  await api.setTimeout(lived, 900);
  await api.pauseSandbox(lived);
  await api.resumeSandbox(lived);
  snapshotId = (await api.createSnapshot(lived)).snapshotId;
  await api.killSandbox(lived);
});
after(async () => { await h?.close(); });

async function eventsOf(team: string | undefined, path: string): Promise<WireSandboxEvent[]> {
  const r = await send(h, 'GET', path, { team });
  assert.equal(r.status, 200, `${path}: ${r.text}`);
  assert.ok(Array.isArray(r.body), path);
  return r.body as WireSandboxEvent[];
}

test('a sandbox\'s life is its events, oldest first with orderAsc, in E2B\'s shape', async () => {
  const events = await eventsOf(teamA, `/events/sandboxes/${lived}?orderAsc=true`);
  assert.deepEqual(events.map((e) => e.type), ['created', 'updated', 'paused', 'resumed', 'snapshotted', 'killed'].map(T));
  for (const e of events) {
    assert.equal(e.version, 'v1');
    assert.equal(e.sandboxId, lived);
    assert.equal(e.sandboxTeamId, teamA);
    assert.equal(e.sandboxTemplateId, 'tpl-base');
    assert.equal(typeof e.id, 'string');
    assert.equal(typeof e.sandboxExecutionId, 'string');
    assert.equal(typeof e.sandboxBuildId, 'string');
    assert.equal(new Date(e.timestamp).toISOString(), e.timestamp, `${e.type}: an ISO timestamp`);
  }
  assert.equal(new Set(events.map((e) => e.id)).size, events.length, 'every event has its own id');
  const times = events.map((e) => e.timestamp);
  assert.deepEqual([...times].sort(), times, 'oldest first');

  const [created, updated, paused, resumed, snapshotted, killed] = events as [WireSandboxEvent, WireSandboxEvent, WireSandboxEvent, WireSandboxEvent, WireSandboxEvent, WireSandboxEvent];
  assert.equal(new Date(updated.eventData!.set_timeout!).toISOString(), updated.eventData!.set_timeout, 'updated carries the new deadline');
  assert.ok(Date.parse(updated.eventData!.set_timeout!) - Date.parse(updated.timestamp) > 800_000, 'the deadline of timeout 900 s');
  assert.equal(snapshotted.eventData?.snapshot_id, snapshotId);
  for (const ended of [paused, killed]) {
    const run = ended.eventData?.execution;
    assert.ok(run, `${ended.type} carries the run it ended`);
    assert.deepEqual([run.vcpu_count, run.memory_mb], [1, 256]);
    assert.ok(run.execution_time >= 0);
  }
  assert.equal(paused.eventData!.execution!.started_at, created.timestamp, 'the first run started at the create');
  assert.equal(killed.eventData!.execution!.started_at, resumed.timestamp, 'the second run started at the resume');
  // A create and a resume each start a run; the events after them carry its id.
  assert.deepEqual([updated, paused].map((e) => e.sandboxExecutionId), [created.sandboxExecutionId, created.sandboxExecutionId]);
  assert.deepEqual([snapshotted, killed].map((e) => e.sandboxExecutionId), [resumed.sandboxExecutionId, resumed.sandboxExecutionId]);
  assert.notEqual(resumed.sandboxExecutionId, created.sandboxExecutionId);

  const newestFirst = await eventsOf(teamA, `/events/sandboxes/${lived}`);
  assert.deepEqual(newestFirst, [...events].reverse(), 'the default order is newest first');
  assert.deepEqual(await eventsOf(teamA, `/events/sandboxes/${lived}?orderAsc=false`), newestFirst);
});

test('a page is 10 events unless limit says; offset pages through them; types filters, repeated or once', async () => {
  const team = await newTeam(h);
  const api = clientOf(h, team);
  const id = await newSandbox(h, team);
  for (let i = 1; i <= 12; i++) await api.setTimeout(id, 600 + i);
  await api.killSandbox(id);
  const all = await eventsOf(team, `/events/sandboxes/${id}?orderAsc=true&limit=100`);
  assert.deepEqual(all.map((e) => e.type), [T('created'), ...Array<string>(12).fill(T('updated')), T('killed')]);

  const firstPage = await eventsOf(team, `/events/sandboxes/${id}`);
  assert.equal(firstPage.length, 10, 'the default limit');
  assert.deepEqual(firstPage, [...all].reverse().slice(0, 10));
  assert.equal((await eventsOf(team, `/events/sandboxes/${id}?limit=1`)).length, 1);
  assert.equal((await eventsOf(team, '/events/sandboxes')).length, 10, 'the team\'s list has the same default');

  const paged: WireSandboxEvent[] = [];
  for (let offset = 0; offset < 20; offset += 4) {
    const page = await eventsOf(team, `/events/sandboxes/${id}?orderAsc=true&limit=4&offset=${offset}`);
    assert.equal(page.length, Math.max(0, Math.min(4, all.length - offset)), `offset ${offset}`);
    paged.push(...page);
  }
  assert.deepEqual(paged, all, 'the pages, one after another, are the whole list');
  assert.deepEqual(await eventsOf(team, `/events/sandboxes/${id}?offset=1&limit=2`), [...all].reverse().slice(1, 3), 'offset pages newest first too');

  const repeated = await eventsOf(teamA, `/events/sandboxes/${lived}?types=${T('paused')}&types=${T('killed')}&orderAsc=true`);
  assert.deepEqual(repeated.map((e) => e.type), [T('paused'), T('killed')]);
  const once = await eventsOf(teamA, `/events/sandboxes/${lived}?types=${T('snapshotted')}`);
  assert.deepEqual(once.map((e) => e.type), [T('snapshotted')]);
  const updates = await eventsOf(team, `/events/sandboxes/${id}?types=${T('updated')}&limit=3&offset=10`);
  assert.deepEqual(updates, all.filter((e) => e.type === T('updated')).reverse().slice(10), 'types, limit and offset together');
  assert.deepEqual(await eventsOf(team, `/events/sandboxes/${id}?types=${T('paused')}`), [], 'a type the sandbox never had');

  const teamList = await eventsOf(teamA, `/events/sandboxes?types=${T('killed')}&types=${T('created')}&limit=100&orderAsc=true`);
  assert.ok(teamList.every((e) => e.type === T('killed') || e.type === T('created')));
  assert.deepEqual(teamList.filter((e) => e.sandboxId === lived).map((e) => e.type), [T('created'), T('killed')]);
});

test('the team\'s list holds every sandbox of the team, and only the team\'s', async () => {
  const team = await newTeam(h);
  const [one, two] = [await newSandbox(h, team), await newSandbox(h, team)];
  await clientOf(h, team).killSandbox(one);
  const events = await eventsOf(team, '/events/sandboxes?orderAsc=true');
  assert.deepEqual(events.map((e) => [e.sandboxId, e.type]), [[one, T('created')], [two, T('created')], [one, T('killed')]]);
  assert.ok(events.every((e) => e.sandboxTeamId === team));
});

test('a bad query is a 400 with { code, message } naming the parameter', async () => {
  const cases: Array<[string, RegExp]> = [
    ['limit=0', /limit.*>= 1/],
    ['limit=101', /limit.*<= 100/],
    ['limit=abc', /limit.*integer/],
    ['limit=1.5', /limit.*integer/],
    ['offset=-1', /offset.*>= 0/],
    ['offset=x', /offset.*integer/],
    ['offset=1000001', /offset.*<= 1000000/],
    ['offset=100000000000000000000', /offset/],
    ['orderAsc=maybe', /orderAsc.*boolean/],
    [`types=${T('nope')}`, /types.*must be one of/],
    [`types=${T('paused')}&types=created`, /types.*must be one of/],
    ['color=blue', /color.*not a known field/],
  ];
  for (const path of [`/events/sandboxes/${lived}`, '/events/sandboxes']) {
    for (const [query, message] of cases) {
      assertBadRequest(await send(h, 'GET', `${path}?${query}`, { team: teamA }), message, `${path}?${query}`);
    }
  }
  // Each enum value is known, and the limits themselves are taken.
  for (const type of SANDBOX_EVENT_TYPES) assert.equal((await send(h, 'GET', `/events/sandboxes?types=${type}`, { team: teamA })).status, 200, type);
  assert.equal((await send(h, 'GET', '/events/sandboxes?limit=100&offset=0', { team: teamA })).status, 200);
  assert.equal((await send(h, 'GET', '/events/sandboxes?limit=1', { team: teamA })).status, 200);
});

test('another team\'s sandbox is a 404, and its events are in no other team\'s list', async () => {
  const r = await send(h, 'GET', `/events/sandboxes/${lived}`, { team: teamB });
  assert.equal(r.status, 404, r.text);
  assert.ok(!r.text.includes(teamA), 'the 404 names no other team');
  assert.equal((await send(h, 'GET', `/events/sandboxes/${lived}?types=${T('killed')}`, { team: teamB })).status, 404);
  assert.equal((await send(h, 'GET', '/events/sandboxes/no-such-sandbox', { team: teamA })).status, 404, 'a sandbox that never was');

  const mine = await newSandbox(h, teamB);
  const listed = await eventsOf(teamB, '/events/sandboxes?limit=100');
  assert.deepEqual(listed.map((e) => [e.sandboxId, e.type]), [[mine, T('created')]], 'B sees its own sandbox and nothing of A\'s');
  assert.ok(!JSON.stringify(listed).includes(teamA));
  assert.equal((await send(h, 'GET', `/events/sandboxes/${mine}`, { team: teamA })).status, 404, 'nor A B\'s');
});

test('no team header is the default team: its sandboxes\' events, none of another team\'s', async () => {
  const id = await newSandbox(h, undefined);
  const events = await eventsOf(undefined, `/events/sandboxes/${id}`);
  assert.deepEqual(events.map((e) => [e.type, e.sandboxTeamId]), [[T('created'), DEFAULT_TEAM_ID]]);
  const listed = await eventsOf(undefined, '/events/sandboxes?limit=100');
  assert.ok(listed.length > 0 && listed.every((e) => e.sandboxTeamId === DEFAULT_TEAM_ID));
  assert.equal((await send(h, 'GET', `/events/sandboxes/${lived}`)).status, 404, 'team A\'s sandbox is not the default team\'s');
  assert.equal((await send(h, 'GET', `/events/sandboxes/${id}`, { team: teamA })).status, 404);
});
