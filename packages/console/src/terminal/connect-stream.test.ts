import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ConnectError, EnvelopeReader, base64ToBytes, bytesToBase64, decodeStreamEnvelope, encodeEnvelope, errorFromResponse,
} from './connect-stream.ts';
import { envdUrl } from './envd-pty.ts';

test('an envelope is a flag byte, a big-endian length and the JSON', () => {
  const env = encodeEnvelope({ process: { pid: 7 } });
  const json = '{"process":{"pid":7}}';
  assert.equal(env[0], 0);
  assert.equal(new DataView(env.buffer).getUint32(1, false), json.length);
  assert.equal(new TextDecoder().decode(env.subarray(5)), json);
  assert.equal(encodeEnvelope({}, 2)[0], 2);
});

test('the reader cuts envelopes out of chunks split anywhere', () => {
  const a = encodeEnvelope({ event: { start: { pid: 12 } } });
  const b = encodeEnvelope({ event: { data: { pty: 'aGk=' } } });
  const end = encodeEnvelope({}, 2);
  const all = new Uint8Array([...a, ...b, ...end]);
  for (const cut of [1, 3, 5, a.length, a.length + 2, all.length - 1]) {
    const reader = new EnvelopeReader();
    const got = [...reader.push(all.slice(0, cut)), ...reader.push(all.slice(cut))];
    assert.equal(got.length, 3, `cut at ${cut}`);
    assert.equal(reader.pending, 0);
    assert.deepEqual(decodeStreamEnvelope(got[0]), { kind: 'message', message: { event: { start: { pid: 12 } } } });
    assert.deepEqual(decodeStreamEnvelope(got[1]), { kind: 'message', message: { event: { data: { pty: 'aGk=' } } } });
    assert.deepEqual(decodeStreamEnvelope(got[2]), { kind: 'end' });
  }
  const reader = new EnvelopeReader();
  assert.deepEqual(reader.push(a.slice(0, 4)), []);
  assert.equal(reader.pending, 4);
});

test('the end-of-stream envelope carries the error', () => {
  const item = decodeStreamEnvelope({ flags: 2, data: new TextEncoder().encode('{"error":{"code":"not_found","message":"process 9 not found"}}') });
  assert.equal(item.kind, 'end');
  assert.ok(item.kind === 'end' && item.error instanceof ConnectError);
  assert.equal(item.kind === 'end' && item.error?.code, 'not_found');
  assert.equal(item.kind === 'end' && item.error?.message, 'process 9 not found');
  assert.throws(() => decodeStreamEnvelope({ flags: 1, data: new Uint8Array(0) }), /compressed/);
  assert.throws(() => decodeStreamEnvelope({ flags: 0, data: new TextEncoder().encode('{nope') }), /not valid JSON/);
});

test('error answers: Connect errors keep their code, the proxy\'s JSON and text keep the status', () => {
  const connect = errorFromResponse(401, '{"code":"unauthenticated","message":"bad token"}');
  assert.equal(connect.code, 'unauthenticated');
  assert.equal(connect.status, 401);
  assert.equal(errorFromResponse(410, '{"code":410,"message":"sandbox x was killed"}').message, 'HTTP 410: sandbox x was killed');
  assert.equal(errorFromResponse(502, 'Bad Gateway').message, 'HTTP 502: Bad Gateway');
  assert.equal(errorFromResponse(500, '').message, 'HTTP 500');
});

test('base64 of bytes round-trips, UTF-8 and binary alike, without Buffer', () => {
  const text = 'echo héllo ✓ 🙂\r';
  const bytes = new TextEncoder().encode(text);
  assert.equal(bytesToBase64(bytes), 'ZWNobyBow6lsbG8g4pyTIPCfmYIN');
  assert.equal(new TextDecoder().decode(base64ToBytes(bytesToBase64(bytes))), text);
  const big = Uint8Array.from({ length: 100_000 }, (_, i) => (i * 31) & 0xff);
  assert.deepEqual(base64ToBytes(bytesToBase64(big)), big);
  assert.equal(bytesToBase64(new Uint8Array(0)), '');
  assert.deepEqual(base64ToBytes('G1szMm0='), new Uint8Array([0x1b, 0x5b, 0x33, 0x32, 0x6d]));
});

test('envd is reached at <port>-<id>.<domain> with the page\'s scheme', () => {
  assert.equal(envdUrl('http:', 'abc123', 'localhost:3002'), 'http://49983-abc123.localhost:3002');
  assert.equal(envdUrl('https:', 'abc123', 'sb.example.com'), 'https://49983-abc123.sb.example.com');
});
