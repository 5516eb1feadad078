/**
 * WebSockets through the data-plane proxy: an echo by Host and by the e2b headers, the proxy's
 * close ending open WebSockets, and a JSON 404 on the raw socket for an upgrade to a sandbox
 * that does not exist.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import WebSocket from 'ws';
import { sandboxHost } from './testing/client.ts';
import { closeDataPlane, startDataPlane, waitFor, type DataPlane } from './testing/data-plane-fixture.ts';
import { startPlatform, type Platform, type Upstream } from './testing/harness.ts';

let plane: DataPlane;
let p: Platform;
let up: Upstream;
let other: Upstream;

before(async () => { ({ p, up, other } = plane = await startDataPlane()); });
after(() => closeDataPlane(plane));

test('a WebSocket echoes through the proxy', async () => {
  const ws = new WebSocket(`${p.proxy.httpUrl.replace('http', 'ws')}/ws`, { headers: { host: sandboxHost(up.port, 'sbxa') } });
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const replies: string[] = [];
  ws.on('message', (d) => replies.push(d.toString()));
  ws.send('ping-1');
  ws.send('ping-2');
  await waitFor(() => replies.length === 2);
  assert.deepEqual(replies, ['sbx-a:ping-1', 'sbx-a:ping-2']);
  ws.close();
});

test('closing the proxy closes open WebSockets instead of waiting for them', async () => {
  const q = await startPlatform();
  try {
    q.master.add({ sandboxId: 'wsclose', envdPort: up.port });
    const ws = new WebSocket(`${q.proxy.httpUrl.replace('http', 'ws')}/ws`, { headers: { 'E2b-Sandbox-Id': 'wsclose' } });
    await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
    const closed = new Promise((resolve) => ws.once('close', resolve));
    const t0 = Date.now();
    await q.close();
    await closed;
    assert.ok(Date.now() - t0 < 2_000);
  } catch (err) {
    await q.close().catch(() => { /* closed already by the test */ });
    throw err;
  }
});

test('a WebSocket by the e2b headers reaches the named sandbox', async () => {
  const ws = new WebSocket(`${p.proxy.httpUrl.replace('http', 'ws')}/ws`, { headers: { 'E2b-Sandbox-Id': 'sbxb', 'E2b-Sandbox-Port': String(other.port) } });
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const reply = new Promise<string>((resolve) => ws.once('message', (d) => resolve(d.toString())));
  ws.send('hi');
  assert.equal(await reply, 'sbx-b:hi');
  ws.close();
});

test('an upgrade to a sandbox that does not exist gets a JSON 404 on the raw socket', async () => {
  const port = Number(new URL(p.proxy.httpUrl).port);
  const text = await new Promise<string>((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let buf = '';
    s.on('data', (d) => { buf += d.toString(); });
    s.on('end', () => resolve(buf));
    s.on('error', reject);
    s.write(`GET /ws HTTP/1.1\r\nHost: ${sandboxHost(8000, 'ghost')}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`);
  });
  assert.match(text, /^HTTP\/1\.1 404 Not Found\r\n/);
  assert.match(text, /\{"code":404,"message":"sandbox ghost not found"\}$/);
});
