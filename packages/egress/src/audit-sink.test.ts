import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { silentLogger } from '@svc/common';
import { REDACTED } from '@svc/contracts/egress';
import type { EgressSecurityEvent } from '@svc/contracts/egress-audit';
import { AUDIT_FLUSH_MS, AuditLog, auditTimestamp, serializeAuditRecord } from './audit-log.ts';
import { ForwardingAuditSink, isAuditLinesEvent, liveSecretsOf, type AuditLinesEvent } from './audit-sink.ts';
import { PlaceholderResolver } from './placeholders.ts';
import { PolicyStore } from './policy-store.ts';

const event = (host: string): EgressSecurityEvent => ({ type: 'security_event', ts: auditTimestamp(), sandbox_ip: '10.0.0.2', rule: '', reason: 'default_deny', host });

test('a worker\'s sink sends the records of AUDIT_FLUSH_MS as one event, redacted with its live secrets', async () => {
  const sent: AuditLinesEvent[] = [];
  const sink = new ForwardingAuditSink(() => ['s3cret-key'], (e) => sent.push(e));
  for (let i = 0; i < 50; i++) sink.write(event(`h${i}.test`));
  sink.write(event('s3cret-key.test'));
  assert.equal(sent.length, 0, 'nothing is sent per record');
  await tick();
  assert.equal(sent.length, 0, 'nor per turn of the event loop');
  await new Promise((r) => setTimeout(r, AUDIT_FLUSH_MS + 5));
  assert.equal(sent.length, 1);
  assert.equal(sent[0]!.lines.length, 51);
  assert.ok(isAuditLinesEvent(sent[0]));
  assert.equal(JSON.parse(sent[0]!.lines[50]!).host, `${REDACTED}.test`);
  assert.equal(JSON.parse(sent[0]!.lines[7]!).host, 'h7.test');

  sink.write(event('pending.test'));
  sink.close();
  assert.equal(sent.length, 2, 'close sends what is pending at once');
  sink.write(event('late.test'));
  assert.equal(sent.length, 3, 'after close, a record goes at once');
  await tick();
  assert.equal(sent.length, 3);
});

test('events that are not whole lines are refused', () => {
  assert.equal(isAuditLinesEvent({ kind: 'audit', lines: ['{}\n{}'] }), false);
  assert.equal(isAuditLinesEvent({ kind: 'audit', lines: [1] }), false);
  assert.equal(isAuditLinesEvent({ kind: 'other', lines: [] }), false);
  assert.equal(isAuditLinesEvent(undefined), false);
});

test('lines from workers go through the log\'s rotation: every line once, in order, across the files', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'egress-audit-lines-'));
  try {
    const path = join(dir, 'access.jsonl');
    const log = await AuditLog.open(path, { logger: silentLogger(), secretsFor: () => [], maxBytes: 4096, keep: 100 });
    const line = (i: number) => JSON.stringify({ n: i, pad: 'x'.repeat(100) });
    for (let batch = 0; batch < 20; batch++) {
      log.writeLines(Array.from({ length: 10 }, (_, j) => line(batch * 10 + j)));
      if (batch % 3 === 0) await tick();
    }
    await log.close();
    const files = (await readdir(dir)).filter((f) => f.startsWith('access.jsonl'));
    assert.ok(files.length > 3, 'it rotated');
    // Oldest first: the highest suffix, down to the live file.
    const order = files.sort((a, b) => Number(b.split('.')[2] ?? 0) - Number(a.split('.')[2] ?? 0));
    const all = (await Promise.all(order.map((f) => readFile(join(dir, f), 'utf8')))).join('').split('\n').filter(Boolean);
    assert.deepEqual(all.map((l) => (JSON.parse(l) as { n: number }).n), Array.from({ length: 200 }, (_, i) => i));
    // A batch that fits goes in one write; one that would pass the limit is split at the rotation.
    for (const f of files) assert.ok((await stat(join(dir, f))).size <= 4096, `${f} is within maxBytes`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('the live secrets are one list until a policy or a resolved placeholder changes them, then a new one that redacts the new secret', async () => {
  const store = new PolicyStore();
  store.put({ sandboxId: 'a', address: '10.0.0.2', teamId: 'team-1', rules: [{ name: 'r', match: {}, action: { allow: true, inject: [{ header: 'X-Key', secret: 'policy-secret' }] } }] });
  const placeholders = new PlaceholderResolver({
    secrets: { resolve: async (_team, names) => ({ values: Object.fromEntries(names.map((n) => [n, `vault-${n}`])), missing: [] }) },
    tokens: { mint: async () => { throw new Error('no tokens here'); } },
  });
  const live = liveSecretsOf(store, placeholders);
  const first = live('10.0.0.2');
  assert.equal(live('10.0.0.2'), first, 'unchanged: the same list, so its compiled redactor is reused');
  assert.deepEqual([...first], ['policy-secret']);

  await placeholders.fill(store.get('a')!, [{ name: 'Authorization', value: 'Bearer ${e2b.secrets.API_KEY}' }]);
  const second = live('10.0.0.2');
  assert.notEqual(second, first);
  assert.deepEqual([...second].sort(), ['policy-secret', 'vault-API_KEY']);
  assert.equal(serializeAuditRecord(event('vault-API_KEY.test'), second).includes('vault-API_KEY'), false);

  store.put({ sandboxId: 'b', address: '10.0.0.3', teamId: 'team-2', rules: [{ name: 'r', match: {}, action: { allow: true, inject: [{ header: 'X-Key', secret: 'another-secret' }] } }] });
  assert.deepEqual([...live('10.0.0.3')], ['another-secret'], 'a sandbox\'s records are redacted with its own secrets');
  assert.deepEqual([...live('10.0.0.2')].sort(), ['policy-secret', 'vault-API_KEY']);
  assert.deepEqual([...live(undefined)].sort(), ['another-secret', 'policy-secret', 'vault-API_KEY'], 'a record of no sandbox: every secret held');
  assert.deepEqual([...live('10.0.0.99')].sort(), ['another-secret', 'policy-secret', 'vault-API_KEY'], 'nor of one whose policy is gone');
});

test('one team\'s inject value never takes anything out of another sandbox\'s records', () => {
  const store = new PolicyStore();
  // Team 2 injects the address of team 1's sandbox, to hide who sent what.
  store.put({ sandboxId: 'victim', address: '10.0.0.2', teamId: 'team-1', rules: [] });
  store.put({ sandboxId: 'hider', address: '10.0.0.3', teamId: 'team-2', rules: [{ name: 'r', match: {}, action: { allow: true, inject: [{ header: 'X-A', secret: '10.0.0.2' }] } }] });
  const live = liveSecretsOf(store, undefined);
  const theirs = event('api.example.com');
  const line = serializeAuditRecord({ ...theirs, sandbox_ip: '10.0.0.2' }, live('10.0.0.2'));
  assert.equal(JSON.parse(line).sandbox_ip, '10.0.0.2');
  assert.equal(JSON.parse(serializeAuditRecord({ ...theirs, sandbox_ip: '10.0.0.3', host: 'x.10.0.0.2.test' }, live('10.0.0.3'))).host, 'x.[redacted].test', 'its own records are redacted with it');
});
