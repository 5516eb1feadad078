/**
 * Each sandbox's audit records at a bounded rate (audit-rate-limit.ts): a flood from one sandbox
 * is dropped past its burst and counted in an audit_dropped record; the others' records and
 * records of no sandbox pass.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { silentLogger } from '@svc/common';
import type { EgressAuditDroppedRecord, EgressSecurityEvent } from '@svc/contracts/egress-audit';
import type { AuditRecord } from './audit-log.ts';
import { AuditRateLimit } from './audit-rate-limit.ts';

const event = (ip: string): EgressSecurityEvent => ({ type: 'security_event', ts: 't', sandbox_ip: ip, sandbox_id: `sbx-${ip}`, rule: '', reason: 'default_deny', host: 'x.test' });

test('past its burst a sandbox\'s records are dropped and counted; the count is written; others pass; the bucket refills', () => {
  let now = 0;
  const written: AuditRecord[] = [];
  const limit = new AuditRateLimit({ write: (r) => written.push(r) }, silentLogger(), { perSecond: 10, burst: 20, summaryMs: 60_000, now: () => now });
  try {
    for (let i = 0; i < 1_000; i++) limit.write(event('10.0.0.9'));
    limit.write(event('10.0.0.2'));
    limit.write({ type: 'audit_gap', ts: 't', reason: 'worker_exited', pid: 1, exit: 'SIGKILL', detail: '' });
    assert.equal(written.filter((r) => 'sandbox_ip' in r && r.sandbox_ip === '10.0.0.9').length, 20, 'the burst');
    assert.equal(written.filter((r) => 'sandbox_ip' in r && r.sandbox_ip === '10.0.0.2').length, 1, 'another sandbox is not held back');
    assert.equal(written.filter((r) => 'type' in r && r.type === 'audit_gap').length, 1);

    limit.summarize();
    const summary = written.at(-1) as EgressAuditDroppedRecord;
    assert.deepEqual({ ...summary, ts: '', detail: '' }, { type: 'audit_dropped', ts: '', sandbox_ip: '10.0.0.9', sandbox_id: 'sbx-10.0.0.9', dropped: 980, detail: '' });
    assert.match(summary.detail, /^980 audit records of this sandbox were not written: over 10 records\/s \(burst 20\)/);

    now += 1_000;
    const before = written.length;
    for (let i = 0; i < 50; i++) limit.write(event('10.0.0.9'));
    assert.equal(written.length - before, 10, 'a second later: its rate');
    limit.close();
    assert.equal((written.at(-1) as EgressAuditDroppedRecord).dropped, 40, 'close writes what is still counted');
  } finally {
    limit.close();
  }
});
