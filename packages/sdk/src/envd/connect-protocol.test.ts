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
