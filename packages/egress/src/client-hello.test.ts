import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClientHelloReader, MAX_BUFFERED_BYTES, MAX_CLIENT_HELLO_BYTES, MAX_CLIENT_HELLO_RECORDS, peekClientHello } from './client-hello.ts';
import { captureClientHello } from './testing/client-hello-capture.ts';

test('the SNI of a real ClientHello, and none when the client sends none', async () => {
  const hello = await captureClientHello('API.example.test');
  assert.deepEqual(peekClientHello(hello), { state: 'complete', serverName: 'API.example.test' });
  assert.deepEqual(peekClientHello(await captureClientHello(undefined)), { state: 'complete' });
});

test('a partial ClientHello is incomplete, at any cut', async () => {
  const hello = await captureClientHello('api.example.test');
  for (const cut of [0, 1, 4, 5, 9, 40, hello.length - 1]) assert.equal(peekClientHello(hello.subarray(0, cut)).state, 'incomplete', `cut at ${cut}`);
});

test('a ClientHello split over two TLS records', async () => {
  const hello = await captureClientHello('split.example.test');
  const payload = hello.subarray(5);
  const record = (p: Buffer) => Buffer.concat([Buffer.from([22, 3, 1, p.length >> 8, p.length & 0xff]), p]);
  const split = Buffer.concat([record(payload.subarray(0, 50)), record(payload.subarray(50))]);
  assert.deepEqual(peekClientHello(split), { state: 'complete', serverName: 'split.example.test' });
});

test('plain HTTP and garbage are not TLS', () => {
  assert.equal(peekClientHello(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')).state, 'not_tls');
  assert.equal(peekClientHello(Buffer.from([22, 3, 1, 0, 4, 2, 0, 0, 0])).state, 'not_tls');
  assert.equal(peekClientHello(Buffer.from([22, 3, 1, 0, 6, 1, 0, 0, 2, 3, 3])).state, 'not_tls');
});

const record = (p: Buffer) => Buffer.concat([Buffer.from([22, 3, 1, p.length >> 8, p.length & 0xff]), p]);
/** The ClientHello's handshake bytes in records of `size` bytes each. */
const inRecords = (hello: Buffer, size: number) => {
  const payload = hello.subarray(5);
  const out: Buffer[] = [];
  for (let i = 0; i < payload.length; i += size) out.push(record(payload.subarray(i, i + size)));
  return Buffer.concat(out);
};

test('fed a byte at a time, the reader answers once the last byte came, and hands every byte back', async () => {
  const hello = inRecords(await captureClientHello('trickle.example.test'), 200);
  const reader = new ClientHelloReader();
  for (let i = 0; i < hello.length - 1; i++) assert.equal(reader.push(hello.subarray(i, i + 1)).state, 'incomplete', `byte ${i}`);
  assert.deepEqual(reader.push(hello.subarray(-1)), { state: 'complete', serverName: 'trickle.example.test' });
  assert.deepEqual(reader.bytes(), hello);
  // Bytes after the ClientHello in the same read go back to the socket too.
  const more = new ClientHelloReader();
  more.push(Buffer.concat([hello, Buffer.from([20, 3, 3, 0, 1, 1])]));
  assert.equal(more.bytes().length, hello.length + 6);
});

test('empty handshake records are refused at the first: 66 KB of them trickled cost one record', () => {
  const empty = Buffer.from([0x16, 0x03, 0x01, 0x00, 0x00]);
  assert.deepEqual(peekClientHello(empty), { state: 'not_tls', detail: 'an empty handshake record' });
  const reader = new ClientHelloReader();
  let pushed = 0;
  const started = performance.now();
  for (let i = 0; i < 13_000; i++) {
    pushed++;
    if (reader.push(empty).state !== 'incomplete') break;
  }
  assert.equal(pushed, 1, 'refused at the first record');
  // The whole hostile input at once, as one read: refused as fast.
  const all = Buffer.concat(Array.from({ length: 13_000 }, () => empty));
  assert.equal(peekClientHello(all).state, 'not_tls');
  assert.ok(performance.now() - started < 1_000, 'no quadratic work');
});

test(`a ClientHello may span ${MAX_CLIENT_HELLO_RECORDS} records, not one more`, async () => {
  const hello = await captureClientHello('records.example.test');
  const length = hello.length - 5;
  const fits = inRecords(hello, Math.ceil(length / MAX_CLIENT_HELLO_RECORDS));
  assert.deepEqual(peekClientHello(fits), { state: 'complete', serverName: 'records.example.test' });
  // One-byte records: refused at the record past the limit, however many more come.
  const reader = new ClientHelloReader();
  const tiny = inRecords(hello, 1);
  let records = 0;
  let peek;
  for (let i = 0; i < tiny.length; i += 6) {
    records++;
    peek = reader.push(tiny.subarray(i, i + 6));
    if (peek.state !== 'incomplete') break;
  }
  assert.deepEqual(peek, { state: 'not_tls', detail: `a ClientHello over more than ${MAX_CLIENT_HELLO_RECORDS} records` });
  assert.equal(records, MAX_CLIENT_HELLO_RECORDS + 1);
});

test('a ClientHello larger than one record\'s payload is not TLS, whole or still coming', () => {
  assert.deepEqual(peekClientHello(record(Buffer.from([1, 0, 0x40, 0x01]))), { state: 'not_tls', detail: `ClientHello of ${MAX_CLIENT_HELLO_BYTES + 1} bytes` });
  assert.deepEqual(peekClientHello(record(Buffer.from([1, 1, 0, 1]))), { state: 'not_tls', detail: 'ClientHello of 65537 bytes' });
  // The largest allowed, its first record whole and the second still coming: refused once the bytes read pass the bound.
  const reader = new ClientHelloReader();
  assert.equal(reader.push(record(Buffer.concat([Buffer.from([1, 0, 0x40, 0]), Buffer.alloc(16_380)]))).state, 'incomplete');
  assert.deepEqual(reader.push(Buffer.concat([Buffer.from([22, 3, 1, 0x40, 0]), Buffer.alloc(100)])), { state: 'not_tls', detail: `no complete ClientHello in the first ${MAX_BUFFERED_BYTES} bytes` });
});

test('a connection mid-ClientHello holds at most the bound twice over (the bytes read and the handshake taken from them), however it trickles', () => {
  // The largest allowed ClientHello: its first record (16 KB) sent 1 KB at a time, then the
  // second record's first bytes, never finished.
  const first = record(Buffer.concat([Buffer.from([1, 0, 0x40, 0]), Buffer.alloc(16_380)]));
  const reader = new ClientHelloReader();
  let most = 0;
  const push = (b: Buffer) => {
    assert.equal(reader.push(b).state, 'incomplete');
    most = Math.max(most, reader.heldBytes);
  };
  for (let off = 0; off < first.length; off += 1024) push(first.subarray(off, off + 1024));
  push(Buffer.from([22, 3, 1, 0, 4, 0, 0]));
  assert.ok(most <= 2 * MAX_BUFFERED_BYTES, `held ${most} bytes, more than ${2 * MAX_BUFFERED_BYTES}`);
});
