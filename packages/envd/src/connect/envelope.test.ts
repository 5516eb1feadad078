import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeEnvelope, readEnvelopes } from './envelope.ts';

async function* chunked(data: Buffer, size: number) {
  for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
}

test('envelopes are split correctly whatever the chunking', async () => {
  const messages = [Buffer.from('hello'), Buffer.alloc(0), Buffer.alloc(70_000, 7), Buffer.from('end')];
  const wire = Buffer.concat(messages.map((m, i) => encodeEnvelope(i === 1 ? 1 : 0, m)));
  for (const size of [1, 2, 5, 7, 4096, wire.length]) {
    const got = [];
    for await (const e of readEnvelopes(chunked(wire, size), 1 << 20)) got.push(e);
    assert.equal(got.length, messages.length, `chunk size ${size}`);
    got.forEach((e, i) => assert.ok(e.data.equals(messages[i]!), `message ${i} with chunk size ${size}`));
    assert.equal(got[1]!.flags, 1);
  }
});

test('an oversized or truncated envelope is a protocol error', async () => {
  const big = encodeEnvelope(0, Buffer.alloc(100));
  await assert.rejects(async () => {
    for await (const _ of readEnvelopes(chunked(big, 10), 50));
  }, /resource_exhausted|larger than the limit/);
  await assert.rejects(async () => {
    for await (const _ of readEnvelopes(chunked(big.subarray(0, 50), 10), 1000));
  }, /incomplete envelope/);
});
