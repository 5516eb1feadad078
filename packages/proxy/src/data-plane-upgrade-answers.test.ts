/**
 * What a sandbox answers to an Upgrade request decides what the client's connection becomes: a
 * tunnel only after a 101; any other answer is relayed as an ordinary response and the
 * connection closes, so that the client's next requests (other users' behind a shared load
 * balancer) never reach that sandbox as tunnelled bytes. Also: a signed /files URL authorises no
 * upgrade.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { fileSignature } from '@svc/common/envd-signature';
import { sandboxHost } from './testing/client.ts';
import { startPlatform, Upstream, type Platform } from './testing/harness.ts';
import { waitFor } from './testing/data-plane-fixture.ts';

let p: Platform;
let proxyPort: number;
let victim: Upstream;
const servers: Server[] = [];

before(async () => {
  p = await startPlatform({ lifecycleReplicas: 1 });
  proxyPort = Number(new URL(p.proxy.httpUrl).port);
  victim = new Upstream('victim');
  await victim.listen();
  p.master.add({ sandboxId: 'victim', envdPort: victim.port });
});
after(async () => {
  for (const s of servers) s.close();
  await victim.close();
  await p.close();
});

/** A sandbox port whose answers the test writes itself; `got` is what each connection received. */
async function rawSandbox(onConnection: (s: Socket) => void): Promise<{ port: number; got: string[] }> {
  const got: string[] = [];
  const server = createServer((s) => {
    const i = got.push('') - 1;
    s.on('data', (d: Buffer) => { got[i] += d.toString('latin1'); });
    s.on('error', () => { /* the proxy closing its side is part of what is tested */ });
    onConnection(s);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as { port: number }).port, got };
}

/** Writes each part in turn, then collects what comes back until the proxy closes (or `waitMs`). */
function rawClient(parts: string[], waitMs = 3_000): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    const s = connect(proxyPort, '127.0.0.1');
    let text = '';
    s.on('data', (d: Buffer) => { text += d.toString('latin1'); });
    s.on('error', () => { /* a reset shows as the close */ });
    s.on('connect', async () => {
      for (const part of parts) {
        if (s.destroyed) break;
        s.write(part);
        await new Promise((r) => setTimeout(r, 100));
      }
    });
    const timer = setTimeout(() => { s.destroy(); resolve({ text, closed: false }); }, waitMs);
    s.on('close', () => { clearTimeout(timer); resolve({ text, closed: true }); });
  });
}

const upgradeHead = (host: string, path = '/ws') => `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`;

test('a sandbox answering 200 to an upgrade: the client gets that answer framed, then the connection closes; its next request reaches nobody', async () => {
  const evil = await rawSandbox((s) => s.once('data', () => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok')));
  p.master.add({ sandboxId: 'evil200', envdPort: 49983 });
  const seen = victim.requests.length;
  const next = `GET /secret HTTP/1.1\r\nHost: ${sandboxHost(victim.port, 'victim')}\r\next-traffic-access-token: T0KEN\r\n\r\n`;
  const r = await rawClient([upgradeHead(sandboxHost(evil.port, 'evil200')), next]);
  assert.ok(r.closed, 'the proxy closed the connection');
  assert.match(r.text, /^HTTP\/1\.1 200 OK\r\n/);
  assert.match(r.text, /\r\nContent-Length: 2\r\n/i);
  assert.match(r.text, /\r\nConnection: close\r\n/i);
  assert.ok(r.text.endsWith('\r\n\r\nok'), JSON.stringify(r.text));
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(evil.got.length, 1);
  assert.doesNotMatch(evil.got[0], /secret|T0KEN/, 'the sandbox never got the client\'s next request');
  assert.equal(victim.requests.length, seen);
});

test('a chunked refusal of an upgrade reaches the client decoded and framed again; the bytes after the upgrade head are dropped', async () => {
  const evil = await rawSandbox((s) => s.once('data', () => s.write('HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nnope\r\n0\r\n\r\n')));
  p.master.add({ sandboxId: 'evil403', envdPort: 49983 });
  const r = await rawClient([upgradeHead(sandboxHost(evil.port, 'evil403')) + 'GET /pipelined HTTP/1.1\r\nHost: x\r\n\r\n']);
  assert.ok(r.closed);
  assert.match(r.text, /^HTTP\/1\.1 403 Forbidden\r\n/);
  assert.match(r.text, /\r\nTransfer-Encoding: chunked\r\n[^]*\r\n\r\n4\r\nnope\r\n0\r\n\r\n$/);
  assert.doesNotMatch(evil.got[0], /pipelined/);
});

test('the client\'s bytes wait for the sandbox\'s 101 (an informational answer before it is skipped), then flow both ways', async () => {
  let answer: (() => void) | undefined;
  const sbx = await rawSandbox((s) => s.once('data', () => {
    answer = () => {
      s.write('HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nfrom-sandbox');
      s.on('data', (d: Buffer) => s.write(`echo:${d.toString()}`));
    };
  }));
  p.master.add({ sandboxId: 'sw', envdPort: 49983 });
  const client = connect(proxyPort, '127.0.0.1');
  let text = '';
  client.on('data', (d: Buffer) => { text += d.toString('latin1'); });
  client.write(upgradeHead(sandboxHost(sbx.port, 'sw')) + 'early');
  try {
    await waitFor(() => answer !== undefined);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.doesNotMatch(sbx.got[0], /early/, 'nothing after the head went to the sandbox before its 101');
    answer!();
    await waitFor(() => text.includes('from-sandbox') && sbx.got[0].includes('early'));
    assert.match(text, /^HTTP\/1\.1 101 Switching Protocols\r\n/);
    client.write('later');
    await waitFor(() => text.includes('echo:later'));
  } finally {
    client.destroy();
  }
});

test('an upgrade the sandbox never answers is a 504 after the request idle limit', async () => {
  const q = await startPlatform({ lifecycleReplicas: 1, tuning: { requestIdleTimeoutMs: 300 } });
  try {
    const silent = await rawSandbox(() => { /* accepts, never answers */ });
    q.master.add({ sandboxId: 'quiet', envdPort: 49983 });
    const s = connect(Number(new URL(q.proxy.httpUrl).port), '127.0.0.1');
    let text = '';
    s.on('data', (d: Buffer) => { text += d.toString('latin1'); });
    s.write(upgradeHead(sandboxHost(silent.port, 'quiet')));
    const t0 = Date.now();
    await waitFor(() => text.includes('"code":504'), 5_000);
    assert.ok(Date.now() - t0 >= 250, 'not before the limit');
    assert.match(text, /^HTTP\/1\.1 504 /);
    s.destroy();
  } finally {
    await q.close();
  }
});

test('an open tunnel with no byte either way closes after the tunnel idle limit', async () => {
  const q = await startPlatform({ lifecycleReplicas: 1, tuning: { tunnelIdleTimeoutMs: 300 } });
  try {
    const sbx = await rawSandbox((s) => s.once('data', () => s.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n')));
    q.master.add({ sandboxId: 'idle', envdPort: 49983 });
    const s = connect(Number(new URL(q.proxy.httpUrl).port), '127.0.0.1');
    let closed = false;
    s.on('close', () => { closed = true; });
    s.on('data', () => { /* the 101 */ });
    s.write(upgradeHead(sandboxHost(sbx.port, 'idle')));
    const t0 = Date.now();
    await waitFor(() => closed, 5_000);
    assert.ok(Date.now() - t0 >= 250);
  } finally {
    await q.close();
  }
});

test('a signed /files URL authorises no upgrade: 403 in the JSON form', async () => {
  const up = new Upstream('files');
  await up.listen();
  try {
    p.master.add({ sandboxId: 'signed', envdPort: up.port, envdAccessToken: 'envd-tok' });
    const q = new URLSearchParams({ path: '/home/user/a.txt', username: 'user', signature: fileSignature('/home/user/a.txt', 'read', 'user', 'envd-tok') });
    const r = await rawClient([upgradeHead(sandboxHost(up.port, 'signed'), `/files?${q}`)]);
    assert.match(r.text, /^HTTP\/1\.1 403 /);
    assert.match(r.text, /"code":403/);
    assert.equal(up.requests.length, 0);
  } finally {
    await up.close();
  }
});
