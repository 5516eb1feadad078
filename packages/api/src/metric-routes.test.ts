/**
 * E2B's metric routes through a real gateway over a real master (the fake node): the newest
 * sample of several sandboxes, a sandbox's series, and a team's intervals and their max, in
 * E2B's shapes; a team key reads its own team only, the admin key any team, no key nothing.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '@svc/common';
import { startMasterOverFakeNode, type MasterOverFakeNode } from '@svc/master/testing/master-over-fake-node';
import { PublicSchemas } from '@svc/contracts';
import { MaxTeamMetric, TeamMetric } from '@svc/contracts/metric-route-schemas';
import { MetricsHistoryClient, SAMPLE_INTERVAL_MS, type SandboxMetricSample } from '@svc/contracts/metrics-history';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { startApiGateway, type ApiGateway } from './index.ts';

const ADMIN = 'e2b_00000000000000000000000000000000000000ad';

let m: MasterOverFakeNode;
let gw: ApiGateway;
let a: { teamId: string; apiKey: string };
let b: { teamId: string; apiKey: string };
let a1: string;
let a2: string;
let b1: string;
/** A's intervals, written half an hour ago, away from the sampler's own rows. */
let t0: number;

async function call(key: string | undefined, path: string, method = 'GET', body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(gw.url + path, {
    method,
    headers: { ...(key ? { 'x-api-key': key } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown;
  try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = text; }
  return { status: res.status, body: parsed };
}

async function ok(key: string | undefined, path: string): Promise<any> {
  const r = await call(key, path);
  assert.equal(r.status, 200, `${path}: ${JSON.stringify(r.body)}`);
  return r.body;
}

before(async () => {
  m = await startMasterOverFakeNode((c) => { c.api.api_key = ADMIN; });
  gw = await startApiGateway(m.cfg, { logger: silentLogger(), masterUrl: m.master.url });
  const team = async (name: string) => {
    const r = await call(ADMIN, '/svc/teams', 'POST', { name });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body as { teamId: string; apiKey: string };
  };
  [a, b] = [await team('metrics-a'), await team('metrics-b')];
  const sandbox = async (key: string) => {
    const r = await call(key, '/sandboxes', 'POST', { templateID: 'base' });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.sandboxID as string;
  };
  [a1, a2, b1] = [await sandbox(a.apiKey), await sandbox(a.apiKey), await sandbox(b.apiKey)];
  t0 = Math.floor((Date.now() - 1800_000) / SAMPLE_INTERVAL_MS) * SAMPLE_INTERVAL_MS;
  await m.master.db.kysely.insertInto('t_svc_team_metric').values([
    { team_id: a.teamId, at: t0, concurrent: 1, starts: 1, interval_ms: SAMPLE_INTERVAL_MS },
    { team_id: a.teamId, at: t0 + SAMPLE_INTERVAL_MS, concurrent: 3, starts: 2, interval_ms: SAMPLE_INTERVAL_MS },
    { team_id: a.teamId, at: t0 + 2 * SAMPLE_INTERVAL_MS, concurrent: 3, starts: 0, interval_ms: SAMPLE_INTERVAL_MS },
  ]).execute();
});
after(async () => {
  await gw?.close();
  await m?.close();
});

/** Every required field there, and no field the schema does not name. */
function assertShape(value: Record<string, unknown>, schema: { required: readonly string[]; properties: object }, what: string): void {
  for (const k of schema.required) assert.ok(k in value, `${what}: has ${k}`);
  for (const k of Object.keys(value)) assert.ok(k in schema.properties, `${what}: ${k} is in E2B's shape`);
  if ('timestamp' in value) assert.equal(value.timestamp, new Date(Number(value.timestampUnix) * 1000).toISOString(), `${what}: an ISO timestamp of timestampUnix`);
}

function sample(sandboxId: string, timestampUnix: number, extra: Partial<SandboxMetricSample> = {}): SandboxMetricSample {
  return { sandboxId, timestampUnix, cpuCount: 2, cpuUsedPct: 33.5, memUsed: 1000, memTotal: 4096, memCache: 10, diskUsed: 2000, diskTotal: 8192, ...extra };
}

test('GET /sandboxes/metrics: the newest sample of each of the team\'s sandboxes, in E2B\'s SandboxesWithMetrics', async () => {
  const s = Math.floor(Date.now() / 1000) - 10;
  await new MetricsHistoryClient(m.master.url).report('n1', [
    sample(a1, s - 1), sample(a1, s, { memUsed: 1111 }), sample(a2, s - 2, { cpuUsedPct: 2.25 }), sample(b1, s),
  ]);
  const body = await ok(a.apiKey, `/sandboxes/metrics?sandbox_ids=${a1},${a2}`);
  assert.deepEqual(Object.keys(body), ['sandboxes']);
  assert.deepEqual(Object.keys(body.sandboxes).sort(), [a1, a2].sort());
  for (const [id, metric] of Object.entries(body.sandboxes)) assertShape(metric as Record<string, unknown>, PublicSchemas.SandboxMetric, id);
  assert.deepEqual(body.sandboxes[a1], {
    timestamp: new Date(s * 1000).toISOString(), timestampUnix: s, cpuCount: 2, cpuUsedPct: 33.5, memUsed: 1111, memTotal: 4096, memCache: 10, diskUsed: 2000, diskTotal: 8192,
  });
  assert.equal(body.sandboxes[a2].timestampUnix, s - 2);
  assert.equal(body.sandboxes[a2].cpuUsedPct, 2.25);

  assert.deepEqual(await ok(a.apiKey, `/sandboxes/metrics?sandbox_ids=${a1}&sandbox_ids=${a2}`), body, 'repeated sandbox_ids');
  assert.deepEqual(Object.keys((await ok(a.apiKey, `/sandboxes/metrics?sandbox_ids=${a1}`)).sandboxes), [a1], 'one id');
  assert.deepEqual(Object.keys((await ok(a.apiKey, `/sandboxes/metrics?sandbox_ids=${a1},${b1}`)).sandboxes), [a1], 'another team\'s sandbox is left out');
  assert.deepEqual(Object.keys((await ok(b.apiKey, `/sandboxes/metrics?sandbox_ids=${a1},${b1}`)).sandboxes), [b1], 'and B sees its own');
  assert.deepEqual(await ok(a.apiKey, '/sandboxes/metrics?sandbox_ids=i-no-such-sandbox'), { sandboxes: {} }, 'an id without a sample');

  assert.equal((await call(a.apiKey, '/sandboxes/metrics')).status, 400, 'no sandbox_ids is a 400');
  assert.equal((await call(a.apiKey, '/sandboxes/metrics?sandbox_ids=')).status, 400, 'an empty sandbox_ids is a 400');
  const many = Array.from({ length: 101 }, (_, i) => `i-sandbox-${i}`);
  assert.equal((await call(a.apiKey, `/sandboxes/metrics?sandbox_ids=${many.join(',')}`)).status, 400, '101 ids are a 400');
  assert.equal((await call(undefined, `/sandboxes/metrics?sandbox_ids=${a1}`)).status, 401, 'no key is a 401');
});

test('GET /sandboxes/{sandboxID}/metrics: the kept samples in the range, in E2B\'s SandboxMetric', async () => {
  const s = Math.floor(Date.now() / 1000) - 100;
  await new MetricsHistoryClient(m.master.url).report('n1', [sample(a2, s + 1), sample(a2, s)]);
  const series = await ok(a.apiKey, `/sandboxes/${a2}/metrics?start=${s}&end=${s + 1}`) as Array<Record<string, unknown>>;
  assert.deepEqual(series.map((x) => x.timestampUnix), [s, s + 1], 'oldest first');
  for (const x of series) assertShape(x, PublicSchemas.SandboxMetric, 'a sample');
  assert.equal((await call(b.apiKey, `/sandboxes/${a2}/metrics?start=${s}&end=${s + 1}`)).status, 404, 'another team\'s sandbox is a 404');
  assert.equal((await call(a.apiKey, `/sandboxes/${a2}/metrics?start=${s + 1}&end=${s}`)).status, 400, 'start after end is a 400');
});

test('GET /teams/{teamID}/metrics and /metrics/max: E2B\'s TeamMetric and MaxTeamMetric, with the deprecated timestamp', async () => {
  const [start, end] = [t0 / 1000, t0 / 1000 + 10];
  const series = await ok(a.apiKey, `/teams/${a.teamId}/metrics?start=${start}&end=${end}`) as Array<Record<string, unknown>>;
  for (const x of series) assertShape(x, TeamMetric, 'a team metric');
  assert.deepEqual(series, [
    { timestamp: new Date(t0).toISOString(), timestampUnix: start, concurrentSandboxes: 1, sandboxStartRate: 0.2 },
    { timestamp: new Date(t0 + 5000).toISOString(), timestampUnix: start + 5, concurrentSandboxes: 3, sandboxStartRate: 0.4 },
    { timestamp: new Date(t0 + 10_000).toISOString(), timestampUnix: start + 10, concurrentSandboxes: 3, sandboxStartRate: 0 },
  ]);
  const maxConcurrent = await ok(a.apiKey, `/teams/${a.teamId}/metrics/max?metric=concurrent_sandboxes&start=${start}&end=${end}`);
  assertShape(maxConcurrent, MaxTeamMetric, 'the max');
  assert.deepEqual(maxConcurrent, { timestamp: new Date(t0 + 5000).toISOString(), timestampUnix: start + 5, value: 3 }, 'the earliest interval with the most');
  assert.deepEqual(await ok(a.apiKey, `/teams/${a.teamId}/metrics/max?metric=sandbox_start_rate&start=${start}&end=${end}`),
    { timestamp: new Date(t0 + 5000).toISOString(), timestampUnix: start + 5, value: 0.4 });
  assert.deepEqual(await ok(a.apiKey, `/teams/${a.teamId}/metrics/max?metric=sandbox_start_rate&start=1&end=2`),
    { timestamp: new Date(2000).toISOString(), timestampUnix: 2, value: 0 }, 'nothing ran in the range');
  const lastHour = await ok(a.apiKey, `/teams/${a.teamId}/metrics`) as Array<Record<string, unknown>>;
  assert.ok(lastHour.length >= 3, `the default range is the last hour: ${lastHour.length} intervals`);
  for (const x of lastHour) assertShape(x, TeamMetric, 'a team metric of the last hour');

  assert.equal((await call(a.apiKey, `/teams/${a.teamId}/metrics/max?metric=cpu`)).status, 400, 'an unknown metric is a 400');
  assert.equal((await call(a.apiKey, `/teams/${a.teamId}/metrics/max`)).status, 400, 'no metric is a 400');
  assert.equal((await call(a.apiKey, `/teams/${a.teamId}/metrics?start=${end}&end=${start}`)).status, 400, 'start after end is a 400');
  assert.equal((await call(a.apiKey, `/teams/${a.teamId}/metrics?start=soon`)).status, 400, 'a start that is no number is a 400');
});

test('team metrics: a team key reads its own team only; no key is a 401', async () => {
  for (const path of [`/teams/${a.teamId}/metrics`, `/teams/${a.teamId}/metrics/max?metric=concurrent_sandboxes`]) {
    assert.equal((await call(b.apiKey, path)).status, 404, `B asking A's ${path}`);
    assert.equal((await call(b.apiKey, path.replace(a.teamId, 'no-such-team'))).status, 404, `an unknown team: ${path}`);
    assert.equal((await call(undefined, path)).status, 401, `no key: ${path}`);
    assert.equal((await call('e2b_ffffffffffffffffffffffffffffffffffffffff', path)).status, 401, `a wrong key: ${path}`);
  }
  assert.deepEqual(await ok(b.apiKey, `/teams/${b.teamId}/metrics?start=1&end=2`), [], 'B reads its own');
  assert.deepEqual(await ok(ADMIN, `/teams/${DEFAULT_TEAM_ID}/metrics?start=1&end=2`), [], 'the admin key reads the default team');
  assert.equal((await call(ADMIN, '/teams/no-such-team/metrics')).status, 404, 'an unknown team is a 404 for the admin key too');
});

test('the admin key reads any team\'s metrics, as the operator', async () => {
  const [start, end] = [t0 / 1000, t0 / 1000 + 10];
  const byAdmin = await call(ADMIN, `/teams/${a.teamId}/metrics?start=${start}&end=${end}`);
  assert.equal(byAdmin.status, 200, `the admin key asking team A's metrics: ${JSON.stringify(byAdmin.body)}`);
  assert.deepEqual(byAdmin.body, await ok(a.apiKey, `/teams/${a.teamId}/metrics?start=${start}&end=${end}`), 'the same as A reads');
  const max = await call(ADMIN, `/teams/${a.teamId}/metrics/max?metric=concurrent_sandboxes&start=${start}&end=${end}`);
  assert.equal(max.status, 200, `and their max: ${JSON.stringify(max.body)}`);
});
