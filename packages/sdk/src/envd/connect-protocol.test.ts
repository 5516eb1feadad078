import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConnectError } from '../errors.ts';
import { EnvelopeReader, connectErrorFromJson, decodeStreamEnvelope, encodeEnvelope } from './connect-protocol.ts';

test('envelopes survive any chunking', () => {
  const a = encodeEnvelope({ event: { start: { pid: 7 } } });
  const b = encodeEnvelope({ error: { code: 'not_found', message: 'gone' } }, 2);
  const all = new Uint8Array([...a, ...b]);
  for (let cut = 1; cut < all.length; cut++) {
    const reader = new EnvelopeReader();
    const got = [...reader.push(all.slice(0, cut)), ...reader.push(all.slice(cut))];
    assert.equal(got.length, 2, `cut at ${cut}`);
    assert.equal(reader.pending, 0);
    assert.deepEqual(decodeStreamEnvelope(got[0]), { kind: 'message', message: { event: { start: { pid: 7 } } } });
    const end = decodeStreamEnvelope(got[1]);
    assert.equal(end.kind, 'end');
    assert.ok(end.kind === 'end' && end.error instanceof ConnectError && end.error.connectCode === 'not_found');
  }
});

test('the length prefix is big-endian', () => {
  const env = encodeEnvelope({ x: 'y'.repeat(300) });
  assert.equal(env[0], 0);
  assert.equal((env[1] << 24) | (env[2] << 16) | (env[3] << 8) | env[4], env.length - 5);
});

test('an end-of-stream without error is a clean end; a compressed frame is refused', () => {
  assert.deepEqual(decodeStreamEnvelope({ flags: 2, data: new TextEncoder().encode('{}') }), { kind: 'end' });
  assert.throws(() => decodeStreamEnvelope({ flags: 1, data: new Uint8Array() }), /compressed/);
});

test('only Connect error bodies are Connect errors', () => {
  assert.equal(connectErrorFromJson({ code: 404, message: 'x' }), undefined);
  assert.equal(connectErrorFromJson({ code: 'bogus', message: 'x' }), undefined);
  assert.equal(connectErrorFromJson({ code: 'unavailable', message: 'x' }, 503)?.status, 503);
});

test('an announced length past the limit is refused at its header, before its bytes are buffered', () => {
  const header = new Uint8Array([0, 0x7f, 0xff, 0xff, 0xf0]);
  assert.throws(() => new EnvelopeReader().push(header), (err: unknown) => err instanceof ConnectError && /2147483632 bytes, more than the limit of 67108864/.test(err.message));
  const small = new EnvelopeReader(10);
  assert.deepEqual(small.push(encodeEnvelope('1234567')).length, 1, 'a message of 9 bytes, within 10');
  assert.throws(() => small.push(encodeEnvelope('123456789')), /11 bytes, more than the limit of 10/);
});

test('a large message in small chunks is read in linear time, and its room is not kept', () => {
  // 8 MiB in 1 KiB chunks: copying all that was buffered on every chunk moved 32 GiB and took minutes
  const payload = 'a'.repeat(8 * 1024 * 1024);
  const env = encodeEnvelope(payload);
  const reader = new EnvelopeReader();
  const started = Date.now();
  const got = [];
  for (let at = 0; at < env.length; at += 1024) got.push(...reader.push(env.subarray(at, at + 1024)));
  assert.ok(Date.now() - started < 3000, `took ${Date.now() - started} ms`);
  assert.equal(got.length, 1);
  assert.equal(reader.pending, 0);
  assert.deepEqual(decodeStreamEnvelope(got[0]), { kind: 'message', message: payload });
  // many small envelopes in one chunk: each one out, nothing left
  const many = new Uint8Array([...encodeEnvelope(1), ...encodeEnvelope(2), ...encodeEnvelope(3)]);
  assert.deepEqual(reader.push(many).map((e) => decodeStreamEnvelope(e)), [1, 2, 3].map((n) => ({ kind: 'message', message: n })));
});
