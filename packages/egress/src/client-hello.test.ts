import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import tls from 'node:tls';
import { peekClientHello } from './client-hello.ts';
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
