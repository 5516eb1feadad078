import assert from 'node:assert/strict';
import { test } from 'node:test';
import { commandName, encodeFrame, encodeMessage, encodeReady, FrameDecoder, greeting } from './zmtp.ts';

test('the greeting is 64 bytes: signature, version 3.0, NULL, not a server', () => {
  const g = greeting();
  assert.equal(g.length, 64);
  assert.equal(g[0], 0xff);
  assert.equal(g[9], 0x7f);
  assert.deepEqual([g[10], g[11]], [3, 0]);
  assert.equal(g.subarray(12, 32).toString('ascii').replace(/\0+$/, ''), 'NULL');
  assert.equal(g[32], 0);
});

test('frames are short up to 255 bytes and long beyond, with MORE on all but the last part', () => {
  assert.deepEqual([...encodeFrame(Buffer.from('ab'))], [0x00, 2, 0x61, 0x62]);
  assert.deepEqual([...encodeFrame(Buffer.from('a'), { more: true })], [0x01, 1, 0x61]);
  const long = encodeFrame(Buffer.alloc(300, 1), { more: true });
  assert.equal(long[0], 0x03);
  assert.equal(long.readBigUInt64BE(1), 300n);
  assert.equal(long.length, 9 + 300);
  const message = encodeMessage([Buffer.from('x'), Buffer.from('y')]);
  assert.deepEqual([...message], [0x01, 1, 0x78, 0x00, 1, 0x79]);
});

test('READY carries its properties as name length, name, 4-byte value length, value', () => {
  const ready = encodeReady({ 'Socket-Type': 'DEALER' });
  assert.equal(ready[0], 0x04);
  const body = ready.subarray(2, 2 + ready[1]);
  assert.equal(commandName(body), 'READY');
  const props = body.subarray(6);
  assert.equal(props[0], 11);
  assert.equal(props.subarray(1, 12).toString(), 'Socket-Type');
  assert.equal(props.readUInt32BE(12), 6);
  assert.equal(props.subarray(16).toString(), 'DEALER');
});

test('the decoder reads a greeting and frames however the bytes are cut', () => {
  const stream = Buffer.concat([greeting(), encodeReady({ 'Socket-Type': 'ROUTER' }), encodeMessage([Buffer.from('head'), Buffer.alloc(1000, 7)])]);
  for (const step of [1, 7, 64, stream.length]) {
    const decoder = new FrameDecoder();
    const frames = [];
    for (let i = 0; i < stream.length; i += step) {
      const got = decoder.push(stream.subarray(i, i + step));
      assert.ok(Array.isArray(got), `step ${step}`);
      frames.push(...got);
    }
    assert.equal(frames.length, 3, `step ${step}`);
    assert.ok(frames[0].command);
    assert.equal(commandName(frames[0].body), 'READY');
    assert.deepEqual([frames[1].more, frames[1].body.toString()], [true, 'head']);
    assert.deepEqual([frames[2].more, frames[2].body.length], [false, 1000]);
  }
});

test('the decoder refuses a peer that is not ZMTP 3 with NULL security', () => {
  assert.equal((new FrameDecoder().push(Buffer.from('HTTP/1.1 400')) as { code: string }).code, 'bad_greeting');
  const old = greeting();
  old[10] = 2;
  assert.equal((new FrameDecoder().push(old) as { code: string }).code, 'bad_greeting');
  const curve = greeting();
  curve.fill(0, 12, 32);
  curve.write('CURVE', 12, 'ascii');
  assert.match((new FrameDecoder().push(curve) as { message: string }).message, /CURVE/);
});
