/** `svc events` against the fake API (its events part: @svc/sdk/testing/fake-events), as a child process. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { startFakeApi, type FakeApi } from '@svc/sdk/testing/fake-api';
import { bundleSvc, runSvc, startSvc, type Run } from '../test-support/svc-child.ts';

let api: FakeApi;
let home: string;
let bundle: string;

before(async () => {
  api = await startFakeApi({ apiKey: 'key-ev' });
  home = mkdtempSync(join(tmpdir(), 'svc-events-home-'));
  bundle = await bundleSvc(home);
});
after(async () => {
  await api.close();
  rmSync(home, { recursive: true, force: true });
});
beforeEach(() => { api.events.events.length = 0; });

const env = () => ({ SVC_API_URL: api.url, SVC_API_KEY: 'key-ev', SVC_POLL_INTERVAL_MS: '20' });
const run = (args: string[]) => runSvc(bundle, home, args, env());
const json = (r: Run) => {
  assert.equal(r.code, 0, `exit ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
};
const eventRequests = () => api.requests.filter((r) => r.url.startsWith('/events/')).length;

const T0 = Date.UTC(2026, 0, 2, 3, 4, 5);
function recordLife() {
  return [
    api.events.record('sandbox.lifecycle.created', 'sbx-1', { at: new Date(T0), data: { sandbox_metadata: { env: 'prod' } } }),
    api.events.record('sandbox.lifecycle.updated', 'sbx-1', { at: new Date(T0 + 1000), data: { set_timeout: '2026-01-02T04:00:00.000Z', reason: 'api' } }),
    api.events.record('sandbox.lifecycle.killed', 'sbx-1', {
      at: new Date(T0 + 2000), data: { reason: 'timeout', execution: { started_at: new Date(T0).toISOString(), vcpu_count: 2, memory_mb: 512, execution_time: 125_000 } },
    }),
    api.events.record('sandbox.lifecycle.snapshotted', 'sbx-2', { at: new Date(T0 + 3000), data: { snapshot_id: 'snap-9' } }),
  ];
}

describe('svc events', () => {
  test('a table, newest first: time, type, sandbox, execution, what the data says', async () => {
    recordLife();
    const r = await run(['events']);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trimEnd().split('\n');
    assert.match(lines[0]!, /^TIME\s+TYPE\s+SANDBOX\s+EXECUTION\s+DATA$/);
    assert.equal(lines.length, 5);
    assert.match(lines[1]!, /^2026-01-02T03:04:08Z\s+snapshotted\s+sbx-2\s+exec-sbx-2\s+snapshot=snap-9$/);
    assert.match(lines[2]!, /^2026-01-02T03:04:07Z\s+killed\s+sbx-1\s+exec-sbx-1\s+reason=timeout ran=2m05s vcpus=2 memory=512MiB$/);
    assert.match(lines[3]!, /^2026-01-02T03:04:06Z\s+updated\s+sbx-1\s+exec-sbx-1\s+reason=api ends=2026-01-02T04:00:00.000Z$/);
    assert.match(lines[4]!, /^2026-01-02T03:04:05Z\s+created\s+sbx-1\s+exec-sbx-1\s+metadata=env=prod$/);
    assert.equal((await run(['events', 'sbx-none-yet'])).stderr, 'svc: sandbox sbx-none-yet not found (HTTP 404)\n');
    api.events.events.length = 0;
    assert.equal((await run(['events'])).stdout, 'no events\n');
  });

  test('--json, a sandbox, --type (short, full, repeated, comma list), --limit, --asc', async () => {
    const [created, updated, killed, snapshotted] = recordLife();
    assert.deepEqual(json(await run(['events', '--json'])), [snapshotted, killed, updated, created], 'the events as the API answers them');
    assert.deepEqual(json(await run(['events', 'sbx-1', '--asc', '--json'])), [created, updated, killed]);
    assert.equal(api.requests.at(-1)!.url, '/events/sandboxes/sbx-1?orderAsc=true');
    const typed = json(await run(['--json', 'events', '--type', 'killed', '--type', 'sandbox.lifecycle.created,snapshotted', '--limit', '2']));
    assert.equal(api.requests.at(-1)!.url, '/events/sandboxes?limit=2&types=sandbox.lifecycle.killed&types=sandbox.lifecycle.created&types=sandbox.lifecycle.snapshotted');
    assert.deepEqual(typed, [snapshotted, killed]);
  });

  test('bad input: exit 2 and one line, before any request', async () => {
    const sent = eventRequests();
    const cases: [string[], RegExp][] = [
      [['events', '--type', 'exploded'], /^svc: --type: unknown event type "exploded"; one of created, updated, paused, resumed, killed, snapshotted\n$/],
      [['events', '--type', 'killed,'], /unknown event type ""/],
      [['events', '--limit', '0'], /^svc: --limit must be from 1 to 100 \(got 0\)\n$/],
      [['events', '--limit', '101'], /--limit must be from 1 to 100/],
      [['events', '--limit', 'ten'], /--limit must be a whole number/],
      [['events', '--follow', '--limit', '101'], /--limit must be from 0 to 100/],
      [['events', '--type'], /argument missing/],
      [['events', 'a', 'b'], /too many arguments/],
    ];
    const runs = await Promise.all(cases.map(([args]) => run(args)));
    for (const [i, [args, message]] of cases.entries()) {
      const r = runs[i]!;
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message, args.join(' '));
      assert.equal(r.stdout, '');
    }
    assert.equal(eventRequests(), sent);
  });

  test('--follow: the latest events oldest first, then each new one once, until Ctrl-C (exit 0)', async () => {
    const [, , killed, snapshotted] = recordLife();
    const svc = startSvc(bundle, home, ['events', '--follow', '--limit', '2'], env());
    await svc.until((out) => out.includes('snap-9'));
    const lines = () => svc.stdout().trimEnd().split('\n');
    assert.match(lines()[0]!, /^TIME\s+TYPE\s+SANDBOX\s+EXECUTION\s+DATA$/);
    assert.deepEqual(lines().slice(1).map((l) => l.split(/\s+/)[2]), [killed!.sandboxId, snapshotted!.sandboxId]);
    assert.deepEqual(lines().slice(1).map((l) => l.split(/\s+/)[1]), ['killed', 'snapshotted'], 'the latest two, oldest first');

    api.events.record('sandbox.lifecycle.paused', 'sbx-3', { data: { reason: 'api' } });
    api.events.record('sandbox.lifecycle.resumed', 'sbx-3');
    await svc.until((out) => out.includes('resumed'));
    const polls = eventRequests();
    while (eventRequests() < polls + 3) await new Promise((r) => setTimeout(r, 10));
    svc.child.kill('SIGINT');
    const end = await svc.exited;
    assert.equal(end.code, 0, end.stderr);
    assert.equal(end.stderr, '');
    const types = end.stdout.trimEnd().split('\n').slice(1).map((l) => l.split(/\s+/)[1]);
    assert.deepEqual(types, ['killed', 'snapshotted', 'paused', 'resumed'], 'each once');
    assert.match(end.stdout, /paused\s+sbx-3\s+exec-sbx-3\s+reason=api\n/);
  });

  test('--follow --json: one event a line; a sandbox and types; --limit 0 prints none of the past', async () => {
    recordLife();
    api.events.record('sandbox.lifecycle.killed', 'sbx-3', { at: new Date(T0) });
    const sent = eventRequests();
    const svc = startSvc(bundle, home, ['events', 'sbx-3', '--follow', '--json', '--limit', '0', '--type', 'killed'], env());
    // The second poll is one after the start: what comes now is new.
    while (eventRequests() < sent + 2) await new Promise((r) => setTimeout(r, 10));
    api.events.record('sandbox.lifecycle.created', 'sbx-3');
    const killed = api.events.record('sandbox.lifecycle.killed', 'sbx-3');
    api.events.record('sandbox.lifecycle.killed', 'sbx-other');
    await svc.until((out) => out.includes('\n'));
    svc.child.kill('SIGTERM');
    const end = await svc.exited;
    assert.equal(end.code, 0, end.stderr);
    assert.deepEqual(end.stdout.trimEnd().split('\n').map((l) => JSON.parse(l)), [killed]);
    assert.ok(api.requests.slice(sent).every((r) => r.url.startsWith('/events/sandboxes/sbx-3?') && r.url.endsWith('&types=sandbox.lifecycle.killed')));
  });

  test('--follow of a sandbox the team does not have: exit 1 with the API\'s message', async () => {
    const r = await run(['events', 'sbx-missing', '--follow']);
    assert.equal(r.code, 1);
    assert.equal(r.stderr, 'svc: sandbox sbx-missing not found (HTTP 404)\n');
  });
});
