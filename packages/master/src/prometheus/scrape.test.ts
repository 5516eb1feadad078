import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TEAM_HEADER } from '@svc/contracts/teams';
import { input } from '../sandboxes/service-test-support.ts';
import { startMasterOverFakeNode, type MasterOverFakeNode } from '../testing/master-over-fake-node.ts';

/** GET /metrics on the master's port: its status, and the value of each `name{labels}` line. */
async function scrape(h: MasterOverFakeNode, headers: Record<string, string> = {}) {
  const res = await fetch(`${h.master.url}/metrics`, { headers });
  const body = await res.text();
  const values = new Map<string, number>();
  for (const line of body.split('\n')) {
    const m = /^([a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (m) values.set(m[1]!, Number(m[2]));
  }
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', body, value: (series: string) => values.get(series) ?? 0 };
}

test('the master\'s /metrics: sandboxes and nodes read at the scrape, creates, pauses and resumes counted; a team\'s call is a 404', async () => {
  const h = await startMasterOverFakeNode();
  try {
    const before = await scrape(h);
    assert.equal(before.status, 200);
    assert.match(before.contentType, /^text\/plain; version=0\.0\.4/);
    assert.match(before.body, /# TYPE svc_sandboxes gauge\n/);
    assert.match(before.body, /# TYPE svc_build_jobs gauge\n/);
    assert.match(before.body, /# TYPE process_cpu_user_seconds_total counter\n/, 'prom-client\'s process metrics');

    const a = await h.master.sandboxes.create(input());
    const b = await h.master.sandboxes.create(input());
    await h.master.sandboxes.pause(b.sandboxId);
    await assert.rejects(h.master.sandboxes.create(input({ template: 'no-such' })), /not found/);
    const after = await scrape(h);
    const running = 'svc_sandboxes{state="running",template="tpl-base",runtime="gvisor"}';
    assert.equal(after.value(running), 1, `${a.sandboxId} runs`);
    assert.equal(after.value('svc_sandboxes{state="paused",template="tpl-base",runtime="gvisor"}'), 1);
    assert.equal(after.value('svc_sandbox_creates_total{outcome="ok"}') - before.value('svc_sandbox_creates_total{outcome="ok"}'), 2);
    assert.equal(after.value('svc_sandbox_creates_total{outcome="refused"}') - before.value('svc_sandbox_creates_total{outcome="refused"}'), 1, 'an unknown template is the request\'s failure');
    assert.equal(after.value('svc_sandbox_creates_total{outcome="error"}'), before.value('svc_sandbox_creates_total{outcome="error"}'));
    const created = 'svc_sandbox_create_duration_seconds_count{pool="cold",runtime="gvisor"}';
    assert.equal(after.value(created) - before.value(created), 2, 'the fake node hands out no warm sandbox');
    assert.equal(after.value('svc_sandbox_pause_duration_seconds_count') - before.value('svc_sandbox_pause_duration_seconds_count'), 1);
    assert.ok(after.value('svc_sandbox_pause_duration_seconds_sum') > before.value('svc_sandbox_pause_duration_seconds_sum'));
    assert.equal(after.value('svc_node_memory_bytes{node="n1",kind="capacity"}'), 16384 * 1024 * 1024);

    await h.master.sandboxes.connect(b.sandboxId, undefined);
    await h.master.sandboxes.kill(a.sandboxId);
    const later = await scrape(h);
    assert.equal(later.value('svc_sandbox_resume_duration_seconds_count') - before.value('svc_sandbox_resume_duration_seconds_count'), 1);
    assert.equal(later.value(running), 1, 'a killed sandbox is no longer counted, the resumed one is');
    assert.equal(later.value('svc_sandboxes{state="paused",template="tpl-base",runtime="gvisor"}'), 0);

    const team = await scrape(h, { [TEAM_HEADER]: '00000000-0000-4000-8000-000000000001' });
    assert.equal(team.status, 404, 'the operator\'s route, as the others');
  } finally {
    await h.close();
  }
});

test('the master\'s /metrics: a table that cannot be read leaves its metric out and the scrape is answered', async () => {
  const h = await startMasterOverFakeNode();
  await h.master.db.close();
  try {
    const r = await scrape(h);
    assert.equal(r.status, 200);
    assert.match(r.body, /# TYPE process_cpu_user_seconds_total counter\n/);
    assert.doesNotMatch(r.body, /^svc_sandboxes\{/m);
  } finally {
    await h.close().catch((err: Error) => {
      // The database was closed above on purpose; closing it again is the only failure expected.
      assert.match(err.message, /closed|not open|destroyed/i);
    });
  }
});
