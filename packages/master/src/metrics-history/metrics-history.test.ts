/**
 * The metrics history against a real master over the fake node (SQLite): the samples a node
 * reports and which are kept, a sandbox's series, the newest sample of a team's sandboxes, a
 * team's intervals as the master's own sampler writes them, and the retention prune.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger, SvcError } from '@svc/common';
import { MetricsHistoryClient, SAMPLE_INTERVAL_MS, type SandboxMetricSample, type TeamMetric } from '@svc/contracts/metrics-history';
import { TEAM_HEADER } from '@svc/contracts/teams';
import { startMasterOverFakeNode, type MasterOverFakeNode } from '../testing/master-over-fake-node.ts';
import { clientOf, eventually, newSandbox, newTeam, send } from '../events/events-test-support.ts';
import { MetricsHistory } from './history.ts';
import { MetricsHistoryRepo } from './repo.ts';

let h: MasterOverFakeNode;
/** The team of the sample tests, and another team. */
let mine: string;
let theirs: string;
/** A team whose two sandboxes were created at the start (the sampler's intervals), and one that never ran anything. */
let busy: string;
let idle: string;
let busySandboxes: string[];

before(async () => {
  h = await startMasterOverFakeNode();
  [mine, theirs, busy, idle] = [await newTeam(h), await newTeam(h), await newTeam(h), await newTeam(h)];
  busySandboxes = [await newSandbox(h, busy), await newSandbox(h, busy)];
});
after(async () => { await h?.close(); });

const history = (team?: string) => new MetricsHistoryClient(h.master.url, team ? { headers: { [TEAM_HEADER]: team } } : {});

function sample(sandboxId: string, timestampUnix: number, extra: Partial<SandboxMetricSample> = {}): SandboxMetricSample {
  return { sandboxId, timestampUnix, cpuCount: 2, cpuUsedPct: 12.5, memUsed: 100, memTotal: 512, memCache: 7, diskUsed: 300, diskTotal: 1024, ...extra };
}

/** The sample as the master answers it: without the sandbox id. */
function answered(s: SandboxMetricSample) {
  const { sandboxId: _, ...rest } = s;
  return rest;
}

async function stored(sandboxId: string) {
  return h.master.db.kysely.selectFrom('t_svc_sandbox_metric').selectAll().where('sandbox_id', '=', sandboxId).orderBy('at', 'asc').execute();
}

async function startSecOf(sandboxId: string): Promise<number> {
  const row = await h.master.db.kysely.selectFrom('t_svc_sandbox').select('started_at').where('sandbox_id', '=', sandboxId).executeTakeFirstOrThrow();
  return Math.floor(Number(row.started_at) / 1000);
}

async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (err) {
    assert.ok(err instanceof SvcError, `a SvcError: ${String(err)}`);
    return err.status;
  }
}

test('a node\'s samples of its own sandboxes are kept; another node\'s, unknown and ended sandboxes\' are dropped; a repeat is kept once', async () => {
  const sbx = await newSandbox(h, mine);
  const t0 = await startSecOf(sbx);
  await history().report('n1', [sample(sbx, t0), sample(sbx, t0 + 1)]);
  assert.deepEqual((await stored(sbx)).map((r) => Number(r.at)), [t0 * 1000, (t0 + 1) * 1000], 'both samples are kept, at whole seconds');
  assert.equal((await stored(sbx))[0]!.team_id, mine, 'a sample is kept with its sandbox\'s team');

  await history().report('n2', [sample(sbx, t0 + 2)]);
  assert.equal((await stored(sbx)).length, 2, 'n2 does not speak for a sandbox on n1');
  await history().report('n1', [sample('i-no-such-sandbox-000', t0)]);
  assert.deepEqual(await stored('i-no-such-sandbox-000'), [], 'a sample of an unknown sandbox is dropped');
  await history().report('n1', []);

  await history().report('n1', [sample(sbx, t0 + 1, { cpuUsedPct: 99 })]);
  await history().report('n1', [sample(sbx, t0 + 3), sample(sbx, t0 + 3, { cpuUsedPct: 98 })]);
  const rows = await stored(sbx);
  assert.deepEqual(rows.map((r) => Number(r.at)), [t0, t0 + 1, t0 + 3].map((s) => s * 1000), 'a sample sent twice is kept once');
  assert.deepEqual(rows.map((r) => Number(r.cpu_used_pct)), [12.5, 12.5, 12.5], 'the first one sent stays');

  const ended = await newSandbox(h, mine);
  await clientOf(h, mine).killSandbox(ended);
  await history().report('n1', [sample(ended, t0 + 5)]);
  assert.deepEqual(await stored(ended), [], 'a terminated sandbox\'s sample is dropped');

  const bad = await send(h, 'POST', '/internal/v1/nodes/n1/sandbox-metrics', { body: { samples: [{ sandboxId: sbx, timestampUnix: -1 }] } });
  assert.equal(bad.status, 400, `a sample without its fields is a 400: ${bad.text}`);
});

test('a sandbox\'s series: the kept samples in the range, oldest first, from its start when no start is named', async () => {
  const sbx = await newSandbox(h, mine);
  const s = await startSecOf(sbx);
  const [older, old, first, future] = [sample(sbx, s - 5, { cpuUsedPct: 1 }), sample(sbx, s - 1, { cpuUsedPct: 2 }), sample(sbx, s, { cpuUsedPct: 3 }), sample(sbx, s + 3600, { cpuUsedPct: 4 })];
  await history().report('n1', [future, first, older, old]);
  const api = clientOf(h, mine);
  assert.deepEqual(await api.metrics(sbx, { start: s - 5, end: s }), [older, old, first].map(answered), 'oldest first, both ends in');
  assert.deepEqual(await api.metrics(sbx, { start: s - 1, end: s - 1 }), [answered(old)], 'one second');
  assert.deepEqual(await api.metrics(sbx), [answered(first)], 'no start: from the sandbox\'s start; no end: until now');
  assert.deepEqual(await api.metrics(sbx, { end: s + 3600 }), [first, future].map(answered), 'an end in the future');
  assert.deepEqual(await api.metrics(sbx, { start: s + 10, end: s + 20 }), [], 'none kept in the range, and now is not in it');
  assert.equal(await status(api.metrics(sbx, { start: s + 1, end: s })), 400, 'start after end is a 400');
  assert.deepEqual(await clientOf(h, undefined).metrics(sbx, { start: s - 5, end: s }), [older, old, first].map(answered), 'the operator reads it too');
  assert.equal(await status(clientOf(h, theirs).metrics(sbx)), 404, 'another team\'s sandbox is a 404');
});

test('a running sandbox with no kept sample answers its node\'s live one; a paused sandbox only its kept ones', async () => {
  const api = clientOf(h, mine);
  const fresh = await newSandbox(h, mine);
  const live = await api.metrics(fresh);
  assert.equal(live.length, 1, `one live sample: ${JSON.stringify(live)}`);
  assert.equal(live[0]!.cpuUsedPct, 1.5, 'the fake node\'s live sample');

  const paused = await newSandbox(h, mine);
  const s = await startSecOf(paused);
  const kept = [sample(paused, s - 1, { cpuUsedPct: 42 }), sample(paused, s, { cpuUsedPct: 43 })];
  await history().report('n1', kept);
  await api.pauseSandbox(paused);
  assert.deepEqual(await api.metrics(paused, { start: s - 1 }), kept.map(answered), 'the kept samples, no live one');
  assert.deepEqual(await api.metrics(paused, { start: s - 1, end: Math.ceil(Date.now() / 1000) + 5 }), kept.map(answered), 'now in the range adds no live one');

  const pausedBare = await newSandbox(h, mine);
  await api.pauseSandbox(pausedBare);
  assert.deepEqual(await api.metrics(pausedBare), [], 'a paused sandbox with none kept answers none');
});

test('the newest sample of each of the team\'s sandboxes asked for; ids repeated or comma-joined; others\' left out', async () => {
  const [a, b, none] = [await newSandbox(h, mine), await newSandbox(h, mine), await newSandbox(h, mine)];
  const x = await newSandbox(h, theirs);
  const s = await startSecOf(a);
  await history().report('n1', [sample(a, s - 2), sample(a, s, { memUsed: 111 }), sample(a, s - 1), sample(b, s - 3, { memUsed: 222 }), sample(x, s)]);
  const newest = { [a]: answered(sample(a, s, { memUsed: 111 })), [b]: answered(sample(b, s - 3, { memUsed: 222 })) };

  assert.deepEqual(await history(mine).latest([a, b]), { sandboxes: newest }, 'repeated ids');
  assert.deepEqual(await history(mine).latest([`${a},${b}`]), { sandboxes: newest }, 'comma-joined ids');
  assert.deepEqual(await history(mine).latest([` ${a} ,${b},,${a}`]), { sandboxes: newest }, 'spaces, empty and repeated entries');
  assert.deepEqual(await history(mine).latest([a, x]), { sandboxes: { [a]: newest[a] } }, 'another team\'s sandbox is left out');
  assert.deepEqual(await history(theirs).latest([x, a]), { sandboxes: { [x]: answered(sample(x, s)) } }, 'and the other team sees its own only');
  assert.deepEqual(await history(mine).latest([a, none, 'i-no-such-sandbox-001']), { sandboxes: { [a]: newest[a] } }, 'one without a sample is left out');

  assert.equal(await status(history(mine).latest([])), 400, 'an empty list is a 400');
  assert.equal(await status(history(mine).latest([','])), 400, 'a list of no ids is a 400');
  const many = Array.from({ length: 101 }, (_, i) => `i-sandbox-${String(i).padStart(3, '0')}`);
  assert.equal(await status(history(mine).latest(many)), 400, '101 ids are a 400');
  assert.equal(await status(history(mine).latest([many.join(',')])), 400, '101 ids comma-joined are a 400');
  const raw = await send(h, 'GET', `/v1/metrics/sandboxes?${many.map((id) => `sandboxIds=${id}`).join('&')}`, { team: mine });
  assert.equal(raw.status, 400, `101 repeated ids are a 400: ${raw.text}`);
  assert.deepEqual(await history(mine).latest([...many.slice(0, 99), a]), { sandboxes: { [a]: newest[a] } }, '100 ids are taken');
  assert.equal((await send(h, 'GET', '/v1/metrics/sandboxes', { team: mine })).status, 400, 'no sandboxIds is a 400');
});

test('a team\'s intervals from the master\'s sampler: concurrent sandboxes and the start rate of the creates', async () => {
  let intervals: TeamMetric[] = [];
  const starts = (ms: TeamMetric[]) => Math.round(ms.reduce((n, m) => n + m.sandboxStartRate * (SAMPLE_INTERVAL_MS / 1000), 0));
  // The sampler runs every 5 s and writes the interval that ended last; the creates' one comes within 10 s.
  await eventually('the interval of the creates is sampled', async () => {
    intervals = await history(busy).team(busy);
    return starts(intervals) >= 2;
  }, 12_000);
  assert.equal(starts(intervals), 2, `the two creates, once each: ${JSON.stringify(intervals)}`);
  for (const m of intervals) {
    assert.equal(m.timestampUnix % (SAMPLE_INTERVAL_MS / 1000), 0, `an interval ends on the 5 s grid: ${m.timestampUnix}`);
    assert.ok(m.concurrentSandboxes >= 0 && m.concurrentSandboxes <= busySandboxes.length, `at most the team's sandboxes: ${JSON.stringify(m)}`);
  }
  const times = intervals.map((m) => m.timestampUnix);
  assert.deepEqual(times, [...times].sort((x, y) => x - y), 'oldest first');
  assert.equal(new Set(times).size, times.length, 'one row an interval');
  const last = intervals.at(-1)!;
  assert.equal(last.concurrentSandboxes, 2, `the running count after both creates: ${JSON.stringify(intervals)}`);
  const withStarts = intervals.filter((m) => m.sandboxStartRate > 0);
  assert.ok(withStarts.length >= 1, 'an interval with the creates\' start rate');

  const maxConcurrent = await history(busy).teamMax(busy, 'concurrent_sandboxes');
  assert.deepEqual(maxConcurrent, { timestampUnix: intervals.find((m) => m.concurrentSandboxes === 2)!.timestampUnix, value: 2 }, 'the earliest interval with the most');
  const maxRate = await history(busy).teamMax(busy, 'sandbox_start_rate');
  assert.equal(maxRate.value, Math.max(...intervals.map((m) => m.sandboxStartRate)), 'the largest start rate');
  assert.ok(maxRate.value > 0, `a start rate above 0: ${JSON.stringify(maxRate)}`);

  const first = intervals[0]!.timestampUnix;
  assert.deepEqual(await history(busy).team(busy, { start: first, end: first }), [intervals[0]], 'a range of one interval');
  assert.deepEqual(await history(busy).team(busy, { start: 1, end: 2 }), [], 'a range before anything ran');
  assert.deepEqual(await history(busy).teamMax(busy, 'concurrent_sandboxes', { start: 1, end: 2 }), { timestampUnix: 2, value: 0 }, 'no interval: 0 at the end');
  assert.deepEqual(await history(idle).team(idle), [], 'a team that never ran anything has no intervals');
  assert.equal((await history(idle).teamMax(idle, 'sandbox_start_rate')).value, 0);

  assert.equal(await status(history(busy).team(busy, { start: first + 5, end: first })), 400, 'start after end is a 400');
  assert.equal(await status(history(busy).teamMax(busy, 'concurrent_sandboxes', { start: first + 5, end: first })), 400, 'and for the max');
  const unknownMetric = await send(h, 'GET', `/v1/teams/${busy}/metrics/max?metric=cpu`, { team: busy });
  assert.equal(unknownMetric.status, 400, `an unknown metric is a 400: ${unknownMetric.text}`);
  assert.equal((await send(h, 'GET', `/v1/teams/${busy}/metrics/max`, { team: busy })).status, 400, 'no metric is a 400');

  assert.equal(await status(history(idle).team(busy)), 404, 'another team\'s intervals are a 404');
  assert.equal(await status(history(idle).teamMax(busy, 'concurrent_sandboxes')), 404, 'and its max');
  assert.equal(await status(history().team('no-such-team')), 404, 'an unknown team is a 404');
  assert.equal(await status(history().teamMax('no-such-team', 'sandbox_start_rate')), 404, 'and its max');
  assert.equal(await status(history(busy).team('no-such-team')), 404, 'for a team too');
  const byOperator = await history().team(busy, { start: first, end: last.timestampUnix });
  assert.deepEqual(byOperator, intervals, 'the operator reads any team');
  assert.deepEqual(await history().teamMax(busy, 'concurrent_sandboxes'), maxConcurrent);
});

test('prune removes old samples of terminated sandboxes only, and old team intervals', async () => {
  const db = h.master.db.kysely;
  const pruned = await newTeam(h);
  const [live, ended] = [await newSandbox(h, mine), await newSandbox(h, mine)];
  const now = Date.now();
  const old = Math.floor((now - 3 * 3600_000) / 1000) * 1000;
  const recent = Math.floor((now - 60_000) / 1000) * 1000;
  const row = (sandbox_id: string, at: number) => ({
    sandbox_id, team_id: mine, at, cpu_count: 1, cpu_used_pct: 1, mem_used: 1, mem_total: 2, mem_cache: 0, disk_used: 1, disk_total: 2,
  });
  await db.insertInto('t_svc_sandbox_metric').values([row(live, old), row(live, recent), row(ended, old), row(ended, recent), row('i-purged-sandbox-000', old)]).execute();
  await db.insertInto('t_svc_team_metric').values([
    { team_id: pruned, at: old, concurrent: 1, starts: 1, interval_ms: SAMPLE_INTERVAL_MS },
    { team_id: pruned, at: recent, concurrent: 1, starts: 0, interval_ms: SAMPLE_INTERVAL_MS },
  ]).execute();
  await clientOf(h, mine).killSandbox(ended);

  const direct = new MetricsHistory({ repo: new MetricsHistoryRepo(db, h.master.db.driver), db, counts: { running: async () => ({}), startsBetween: async () => ({}) }, logger: silentLogger() });
  const gone = await direct.prune(now - 3600_000);
  assert.equal(gone, 3, 'the ended sandbox\'s old sample, the purged sandbox\'s, and the old interval');
  assert.deepEqual((await stored(live)).map((r) => Number(r.at)), [old, recent], 'a live sandbox keeps its whole series');
  assert.deepEqual((await stored(ended)).map((r) => Number(r.at)), [recent], 'an ended sandbox keeps its recent samples');
  assert.deepEqual(await stored('i-purged-sandbox-000'), [], 'a sandbox no longer recorded loses its old samples');
  const teamRows = await db.selectFrom('t_svc_team_metric').select('at').where('team_id', '=', pruned).execute();
  assert.deepEqual(teamRows.map((r) => Number(r.at)), [recent], 'the old interval goes');
  assert.equal(await direct.prune(now - 3600_000), 0, 'a second prune finds nothing');
});

test('a sampler run a little over 5 s after the one before writes the interval it would have skipped: every create is counted', async () => {
  // index.ts runs sampleTeams with Periodic.every(SAMPLE_INTERVAL_MS), which sets each next run 5 s
  // after the last one ended: every run starts a few ms later on the 5 s grid, until one crosses a
  // boundary and the interval before it must be written too.
  const db = h.master.db.kysely;
  const team = await newTeam(h);
  const base = 1_000_000_000_000; // on the 5 s grid, far from the rows the master's own sampler writes
  const createdAt = base + 2_000;
  const direct = new MetricsHistory({
    repo: new MetricsHistoryRepo(db, h.master.db.driver), db, logger: silentLogger(),
    counts: { running: async () => ({ [team]: 1 }), startsBetween: async (from, to) => (createdAt > from && createdAt <= to ? { [team]: 1 } : {}) },
  });
  await direct.sampleTeams(base + 4_990); // writes the interval ending at base
  await direct.sampleTeams(base + 4_990 + SAMPLE_INTERVAL_MS + 20); // a run that took 20 ms: writes the one ending at base + 10 s
  const rows = await db.selectFrom('t_svc_team_metric').selectAll().where('team_id', '=', team).orderBy('at', 'asc').execute();
  const starts = rows.reduce((n, r) => n + Number(r.starts), 0);
  assert.equal(starts, 1, `the create at base + 2 s is counted in some interval: ${JSON.stringify(rows.map((r) => [Number(r.at) - base, r.starts]))}`);
});
