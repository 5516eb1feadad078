import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { silentLogger } from '@svc/common';
import { REDACTED, type EgressRequestRecord } from '@svc/contracts/egress';
import { AuditLog, auditTimestamp, redactSecrets } from './audit-log.ts';

const request = (i: number, extra: Partial<EgressRequestRecord> = {}): EgressRequestRecord => ({
  ts: auditTimestamp(), sandbox_ip: '10.0.0.2', dst_ip: '10.9.9.9', dst_port: 443, scheme: 'https', host: 'api.example.test',
  method: 'GET', path: `/item/${i}`, status: 200, bytes_in: 0, bytes_out: 12, latency_ms: 3, tls_version: 'TLSv1.3',
  cipher: 'TLS_AES_128_GCM_SHA256', upstream_status: '200', upstream_addr: '10.9.9.9:443', ...extra,
});

test('JSON Lines appended to a new file in new directories, mode 0640, one whole line per record', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'egress-audit-'));
  try {
    const path = join(dir, 'log', 'svc-egress', 'access.jsonl');
    const log = await AuditLog.open(path, { logger: silentLogger(), liveSecrets: () => [] });
    for (let i = 0; i < 2000; i++) log.write(request(i));
    log.write({ type: 'security_event', ts: auditTimestamp(), sandbox_ip: '10.0.0.2', rule: '', reason: 'default_deny', host: 'x.test' });
    await log.close();
    assert.equal((await stat(path)).mode & 0o777, 0o640);
    const lines = (await readFile(path, 'utf8')).split('\n');
    assert.equal(lines.pop(), '');
    assert.equal(lines.length, 2001);
    lines.forEach((line, i) => {
      const r = JSON.parse(line);
      if (i < 2000) { assert.equal(r.path, `/item/${i}`); assert.equal('type' in r, false); }
    });
    assert.equal(JSON.parse(lines[2000]).type, 'security_event');

    const again = await AuditLog.open(path, { logger: silentLogger(), liveSecrets: () => [] });
    again.write(request(9999));
    await again.close();
    again.write(request(10000)); // after close: dropped, and said so in the operational log
    assert.equal((await readFile(path, 'utf8')).split('\n').length, 2003);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a live secret never reaches the file, raw or JSON-escaped', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'egress-audit-'));
  try {
    const path = join(dir, 'access.jsonl');
    const secrets = ['sk-live-123', 'quote"and\\slash'];
    const log = await AuditLog.open(path, { logger: silentLogger(), liveSecrets: () => secrets });
    log.write(request(1, { path: '/leak?key=sk-live-123' }));
    log.write(request(2, { host: 'quote"and\\slash' }));
    await log.close();
    const text = await readFile(path, 'utf8');
    assert.equal(text.includes('sk-live-123'), false);
    assert.equal(text.includes('and\\\\slash'), false);
    assert.equal(text.split(REDACTED).length - 1, 2);
    assert.equal(redactSecrets('a $& b', ['$&']), `a ${REDACTED} b`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('timestamps are ISO 8601 with a numeric offset', () => {
  assert.match(auditTimestamp(new Date('2026-01-02T03:04:05.678Z')), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}[+-]\d{2}:\d{2}$/);
  const ts = auditTimestamp(new Date('2026-01-02T03:04:05.678Z'));
  assert.equal(Date.parse(ts), Date.parse('2026-01-02T03:04:05.678Z'));
});
