import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EgressRequestRecord } from '@svc/contracts/egress-audit';
import { requestRecordJson } from './audit-json.ts';

/** A record as ExchangeGate builds one: the contract's fields in order, svc's additions after. */
function record(over: Partial<EgressRequestRecord> = {}): EgressRequestRecord {
  return {
    ts: '2026-11-29T21:59:01.123+01:00', sandbox_ip: '10.11.0.2', dst_ip: '203.0.113.7', dst_port: 443, scheme: 'https',
    host: 'api.example.test', method: 'GET', path: '/v1/items?q=1', status: 200, bytes_in: 12, bytes_out: 3456, latency_ms: 7,
    tls_version: 'TLSv1.3', cipher: 'TLS_AES_256_GCM_SHA384', upstream_status: '200', upstream_addr: '203.0.113.7:443', ...over,
  };
}

test('a request record is the text JSON.stringify makes, with and without svc\'s additions', () => {
  for (const r of [
    record(),
    record({ sandbox_id: 'sbx-1' }),
    record({ sandbox_id: 'sbx-1', rule: 'allow-api', injected: ['Authorization', 'X-Key'] }),
    record({ rule: 'r', injected: [] }),
    record({ sandbox_id: 'sbx-2', rule: 'block', reason: 'deny_rule' }),
  ]) assert.equal(requestRecordJson(r), JSON.stringify(r));
});

test('what a sandbox sends is escaped as JSON escapes it: quotes, backslashes, control characters, lone surrogates, non-ASCII', () => {
  const hostile = [
    '/a"b', '/back\\slash', '/nul\u0000', '/tab\tand\nline\r', '/esc\u001b[31m', '/lone\ud800', '/pair\ud83d\ude00', '/é ü ß',
    '/","status":999,"x":"', '\u2028\u2029', '\u007f',
  ];
  for (const path of hostile) {
    const r = record({ path, method: path, host: path, sandbox_id: path, rule: path, injected: [path] });
    const line = requestRecordJson(r);
    assert.equal(line, JSON.stringify(r), JSON.stringify(path));
    assert.deepEqual(JSON.parse(line), r);
  }
});

test('a number that is not finite is written null, as JSON.stringify writes it', () => {
  const r = record({ latency_ms: Number.NaN, bytes_out: Number.POSITIVE_INFINITY });
  assert.equal(requestRecordJson(r), JSON.stringify(r));
});
