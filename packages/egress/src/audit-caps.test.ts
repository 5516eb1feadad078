/**
 * A sandbox's long path, Host, SNI or method is cut in its audit records (audit-caps.ts), with
 * the mark and a short hash of the whole value; a secret across the cut is redacted before it.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { REDACTED } from '@svc/contracts/egress';
import type { EgressRequestRecord, EgressSecurityEvent } from '@svc/contracts/egress-audit';
import { AUDIT_FIELD_CAPS } from './audit-caps.ts';
import { serializeAuditRecord } from './audit-log.ts';

const request = (path: string, host = 'api.example.test'): EgressRequestRecord => ({
  ts: '2026-12-01T10:00:00.000+01:00', sandbox_ip: '10.11.0.2', dst_ip: '', dst_port: 443, scheme: 'https', host, method: 'GET', path,
  status: 403, bytes_in: 0, bytes_out: 0, latency_ms: 0, tls_version: 'TLSv1.3', cipher: 'TLS_AES_256_GCM_SHA384', upstream_status: '', upstream_addr: '',
});
const short16 = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 16);

test('an 8 KB path and Host are cut to their caps, marked truncated, with the short hash of the whole value', () => {
  const path = `/${'a'.repeat(8 * 1024)}`;
  const host = `${'h'.repeat(4000)}.example.test`;
  const line = serializeAuditRecord(request(path, host), []);
  assert.ok(line.length < 1_600, `${line.length} bytes`);
  const r = JSON.parse(line) as Record<string, unknown>;
  assert.equal(r.path, path.slice(0, AUDIT_FIELD_CAPS.path));
  assert.equal(r.host, host.slice(0, AUDIT_FIELD_CAPS.host));
  assert.equal(r.truncated, true);
  assert.equal(r.path_sha256, short16(path));
  assert.equal(r.host_sha256, short16(host));
  assert.equal(r.status, 403, 'the other fields as they were');

  const event: EgressSecurityEvent = { type: 'security_event', ts: 't', sandbox_ip: '10.11.0.2', rule: '', reason: 'default_deny', host: 'x.test', method: 'G'.repeat(5000), path, detail: 'd'.repeat(9000) };
  const e = JSON.parse(serializeAuditRecord(event, [])) as Record<string, unknown>;
  assert.equal((e.path as string).length, AUDIT_FIELD_CAPS.path);
  assert.equal((e.method as string).length, AUDIT_FIELD_CAPS.method);
  assert.equal((e.detail as string).length, AUDIT_FIELD_CAPS.detail);
  assert.equal(e.host, 'x.test');
  assert.equal(e.truncated, true);
});

test('a record within the caps is the same text as before, with no mark', () => {
  const line = serializeAuditRecord(request('/v1/items?q=1'), []);
  assert.equal(line, JSON.stringify(request('/v1/items?q=1')));
  assert.ok(!line.includes('truncated'));
});

test('a secret across the cut is redacted before the cut: none of it stays in the line', () => {
  const secret = 'sk-live-0123456789abcdefghij';
  const path = `/${'p'.repeat(AUDIT_FIELD_CAPS.path - 10)}${secret}${'q'.repeat(600)}`;
  const line = serializeAuditRecord(request(path), [secret]);
  assert.ok(!line.includes(secret.slice(0, 9)), line.slice(0, 700));
  assert.ok(line.includes(REDACTED.slice(0, 9)));
});
