/**
 * The `svc` commands whose answers come from the master, run as a child process against the real
 * gateway and master over the master's fake node agent: snapshots, fork, logs, the pause kinds,
 * teams and keys. The fixture is test-support/cli-fixture.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startGatewayOverFakeNode, type GatewayOverFakeNode } from '@svc/sdk/testing/gateway-over-fake-node';
import { json, startCliFixture, stopCliFixture, svc } from './test-support/cli-fixture.ts';

before(startCliFixture);
after(stopCliFixture);

describe('svc sandbox snapshot|fork|logs, svc snapshot, pause kinds (real gateway over the fake node)', () => {
  let gw: GatewayOverFakeNode;
  before(async () => { gw = await startGatewayOverFakeNode({ apiKey: 'key-2' }); });
  after(() => gw?.close());
  const runGw = (args: string[]) => svc(args, { SVC_API_URL: gw.url, SVC_API_KEY: 'key-2' });
  const created = async () => json(await runGw(['sandbox', 'create', '--json'])).sandboxId as string;

  test('snapshot prints the id; snapshot list (table, JSON, filters); create from one; delete', async () => {
    const id = await created();
    const named = await runGw(['sandbox', 'snapshot', id, '--name', 'cli-snap']);
    assert.equal(named.code, 0, named.stderr);
    assert.equal(named.stdout, 'cli-snap\n');
    const unnamed = json(await runGw(['sandbox', 'snapshot', id, '--json']));
    assert.match(unnamed.snapshotId, /^snap-/);
    assert.deepEqual(unnamed.names, []);

    const listed = json(await runGw(['snapshot', 'list', '--sandbox', id, '--json']));
    assert.deepEqual(listed.map((x: { snapshotId: string }) => x.snapshotId).sort(), ['cli-snap', unnamed.snapshotId].sort());
    assert.deepEqual(json(await runGw(['snapshot', 'list', '--name', 'cli-snap', '--json'])), [{ snapshotId: 'cli-snap', names: ['cli-snap'] }]);
    const table = await runGw(['snapshot', 'ls']);
    assert.match(table.stdout, /^SNAPSHOT\s+NAMES$/m);
    assert.match(table.stdout, /^cli-snap\s+cli-snap$/m);
    assert.match(table.stdout, new RegExp(`^${unnamed.snapshotId}\\s+-$`, 'm'));

    const child = json(await runGw(['sandbox', 'create', '--template', 'cli-snap', '--json']));
    assert.equal(child.state, 'running');

    assert.deepEqual(json(await runGw(['snapshot', 'delete', 'cli-snap', '--json'])), { snapshotId: 'cli-snap', deleted: true });
    const again = await runGw(['snapshot', 'delete', 'cli-snap']);
    assert.equal(again.code, 1);
    assert.equal(again.stderr, 'svc: snapshot cli-snap not found\n');
    const template = await runGw(['snapshot', 'rm', 'base']);
    assert.equal(template.code, 1);
    assert.equal(template.stderr, 'svc: snapshot base not found\n');
    assert.match((await runGw(['snapshot', 'delete', unnamed.snapshotId])).stdout, /^deleted snap-/);
    assert.equal((await runGw(['snapshot', 'list', '--sandbox', id])).stdout.trim(), 'no snapshots');
  });

  test('snapshot: an unknown sandbox, a bad name, an empty name', async () => {
    const unknown = await runGw(['sandbox', 'snapshot', 'sbx-missing']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^svc: .*not found.* \(HTTP 404\)\n$/);
    const id = await created();
    const bad = await runGw(['sandbox', 'snapshot', id, '--name', 'bad name!']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^svc: .*name.*\(HTTP 400\)\n$/);
    const empty = await runGw(['sandbox', 'snapshot', id, '--name', '']);
    assert.equal(empty.code, 2);
    assert.equal(empty.stderr, 'svc: --name must not be empty\n');
  });

  test('fork prints one id per fork; failures go to stderr and exit 1; bad counts and unknown sandboxes', async () => {
    const id = await created();
    const two = await runGw(['sandbox', 'fork', id, '--count', '2', '--timeout', '120']);
    assert.equal(two.code, 0, two.stderr);
    const ids = two.stdout.trim().split('\n');
    assert.equal(ids.length, 2);
    assert.equal(new Set([...ids, id]).size, 3);
    for (const f of ids) {
      const info = json(await runGw(['sandbox', 'info', f, '--json']));
      assert.equal(info.state, 'running');
      assert.equal(info.timeout, 120);
    }
    const one = json(await runGw(['sandbox', 'fork', id, '--json']));
    assert.equal(one.length, 1);
    assert.ok(one[0].sandboxId && !ids.includes(one[0].sandboxId));

    for (const count of ['0', '11']) {
      const r = await runGw(['sandbox', 'fork', id, '--count', count]);
      assert.equal(r.code, 1, `--count ${count}`);
      assert.match(r.stderr, /^svc: .*count.*\(HTTP 400\)\n$/, `--count ${count}`);
    }
    const word = await runGw(['sandbox', 'fork', id, '--count', 'two']);
    assert.equal(word.code, 2);
    assert.match(word.stderr, /^svc: --count must be a whole number/);
    const unknown = await runGw(['sandbox', 'fork', 'sbx-missing']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /\(HTTP 404\)\n$/);

    gw.m.node.behaviour.failCreate = true;
    try {
      const failed = await runGw(['sandbox', 'fork', id, '--count', '2']);
      assert.equal(failed.code, 1);
      assert.equal(failed.stdout, '');
      const lines = failed.stderr.trim().split('\n');
      assert.equal(lines.length, 2, failed.stderr);
      assert.match(lines[0], /^svc: fork 1 of 2 did not start: .*\(HTTP 5\d\d/);
      assert.match(lines[1], /^svc: fork 2 of 2 did not start: /);
      const asJson = await runGw(['sandbox', 'fork', id, '--json']);
      assert.equal(asJson.code, 1);
      const entries = JSON.parse(asJson.stdout);
      assert.equal(entries.length, 1);
      assert.ok(entries[0].error.message);
      assert.ok(entries[0].error.status >= 500);
      assert.equal(asJson.stderr, 'svc: 1 of 1 forks did not start\n');
    } finally {
      gw.m.node.behaviour.failCreate = false;
    }
  });

  test('logs: one line an entry, oldest first; --json, --level, --newest-first, --limit; unknown sandboxes and bad flags', async () => {
    const id = await created();
    const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
    gw.m.node.logs.set(id, [
      { timestamp: at(0), level: 'info', message: 'sandbox booting', fields: { logger: 'node-agent' } },
      { timestamp: at(1), level: 'error', message: 'envd: memory guard killed pid 7', fields: { logger: 'envd', pid: '7' } },
    ]);
    const human = await runGw(['sandbox', 'logs', id]);
    assert.equal(human.code, 0, human.stderr);
    assert.equal(human.stdout, `${at(0)} INFO  [node-agent] sandbox booting\n${at(1)} ERROR [envd] envd: memory guard killed pid 7 pid=7\n`);
    const entries = json(await runGw(['sandbox', 'logs', id, '--json']));
    assert.deepEqual(entries.map((e: { timestamp: string; level: string }) => [e.timestamp, e.level]), [[at(0), 'info'], [at(1), 'error']]);
    assert.deepEqual(json(await runGw(['sandbox', 'logs', id, '--level', 'error', '--json'])).map((e: { message: string }) => e.message), ['envd: memory guard killed pid 7']);
    assert.deepEqual(json(await runGw(['sandbox', 'logs', id, '--newest-first', '--limit', '1', '--json'])).map((e: { message: string }) => e.message), ['envd: memory guard killed pid 7']);
    assert.equal((await runGw(['sandbox', 'logs', id, '--search', 'nothing like it'])).stdout, 'no log entries\n');
    const unknown = await runGw(['sandbox', 'logs', 'sbx-missing']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /\(HTTP 404\)\n$/);
    const zero = await runGw(['sandbox', 'logs', id, '--limit', '0']);
    assert.equal(zero.code, 1);
    assert.match(zero.stderr, /^svc: .*limit.*\(HTTP 400\)\n$/);
    assert.equal((await runGw(['sandbox', 'logs', id, '--level', 'loud'])).code, 2);
  });

  test('pause --no-memory, connect --reboot, create --on-timeout pause --no-pause-memory', async () => {
    const id = await created();
    assert.deepEqual(json(await runGw(['sandbox', 'pause', id, '--no-memory', '--json'])), { sandboxId: id, paused: true, alreadyPaused: false, keepMemory: false });
    assert.equal(json(await runGw(['sandbox', 'info', id, '--json'])).pauseKind, 'filesystem');
    assert.match((await runGw(['sandbox', 'info', id])).stdout, /^state:\s+paused \(filesystem\)$/m);
    assert.equal(json(await runGw(['sandbox', 'connect', id, '--json'])).state, 'running');
    assert.equal(gw.m.node.calls.at(-1), `resume ${id} with identity`, 'booted again from its files');

    assert.match((await runGw(['sandbox', 'pause', id])).stdout, new RegExp(`^paused ${id}\n$`));
    const rebooted = await runGw(['sandbox', 'connect', id, '--reboot']);
    assert.equal(rebooted.code, 0, rebooted.stderr);
    assert.match(rebooted.stdout, /^state:\s+running$/m);
    assert.equal(gw.m.node.calls.at(-1), `resume ${id} with identity`, '--reboot drops the kept memory');

    const s = json(await runGw(['sandbox', 'create', '--on-timeout', 'pause', '--no-pause-memory', '--timeout', '1', '--json']));
    assert.deepEqual(s.lifecycle, { onTimeout: 'pause', autoResume: false });
    await new Promise((r) => setTimeout(r, 1100));
    await gw.m.master.sandboxes.pause(s.sandboxId, 'timeout');
    assert.equal(json(await runGw(['sandbox', 'info', s.sandboxId, '--json'])).pauseKind, 'filesystem', "the timeout's pause frees the memory");

    for (const args of [
      ['sandbox', 'create', '--no-pause-memory'],
      ['sandbox', 'create', '--on-timeout', 'kill', '--no-pause-memory'],
      ['sandbox', 'create', '--on-timeout', 'pause', '--no-pause-memory', '--auto-resume'],
    ]) {
      const r = await runGw(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /^svc: --no-pause-memory /, args.join(' '));
    }
  });
});

describe('svc team, svc key (real gateway over the fake node)', () => {
  let gw: GatewayOverFakeNode;
  before(async () => { gw = await startGatewayOverFakeNode({ apiKey: 'e2b_00000000000000000000000000000000000000ad' }); });
  after(() => gw?.close());
  const as = (key: string) => (args: string[]) => svc(args, { SVC_API_URL: gw.url, SVC_API_KEY: key });
  const admin = (args: string[]) => as(gw.apiKey)(args);

  test('team create prints teamId, apiKey, apiKeyId; the key works and sees only its team; limits; key create, list, revoke', async () => {
    const made = json(await admin(['team', 'create', 'cli-team', '--max-sandboxes', '1', '--json']));
    assert.deepEqual(Object.keys(made).sort(), ['apiKey', 'apiKeyId', 'teamId']);
    assert.match(made.apiKey, /^e2b_[0-9a-f]{40}$/);
    const team = as(made.apiKey);
    assert.equal((await team(['sandbox', 'create', '--json'])).code, 0);
    const over = await team(['sandbox', 'create']);
    assert.equal(over.code, 1);
    assert.match(over.stderr, /maxSandboxes/);
    assert.deepEqual(json(await admin(['sandbox', 'list', '--json'])), [], 'the admin key speaks for the default team: it does not see the team\'s sandbox');
    const limits = json(await admin(['team', 'limits', made.teamId, '--max-sandboxes', '0', '--max-memory-mb', '4096', '--max-volumes', '2', '--json']));
    assert.equal(limits.limits.maxMemoryMB, 4096);
    assert.equal(limits.limits.maxVolumes, 2, 'stored, and read back with the team');
    assert.equal((await admin(['team', 'limits', made.teamId])).code, 1, 'no limit named');
    assert.equal((await admin(['team', 'create', 'bad name'])).code, 1);
    assert.equal((await team(['team', 'create', 'sneaky'])).code, 1, 'a team key makes no teams');
    const table = await admin(['team', 'list']);
    assert.match(table.stdout, /^ID\s+NAME\s+DEFAULT\s+LIMITS$/m);
    assert.match(table.stdout, /cli-team\s+-\s+maxMemoryMB=4096/);

    const key = json(await admin(['key', 'create', '--team', made.teamId, '--name', 'ci', '--json']));
    assert.equal(key.teamId, made.teamId);
    const listed = json(await team(['key', 'list', '--json']));
    assert.deepEqual(listed.map((k: { keyId: string }) => k.keyId).sort(), [made.apiKeyId, key.apiKeyId].sort());
    assert.ok(!JSON.stringify(listed).includes(key.apiKey), 'listing never shows a key');
    assert.equal((await team(['key', 'revoke', key.apiKeyId])).code, 0);
    assert.equal((await team(['key', 'revoke', key.apiKeyId])).code, 1, 'a revoked key is gone');
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal((await as(key.apiKey)(['sandbox', 'list'])).code, 1, 'the revoked key opens nothing');
  });
});
