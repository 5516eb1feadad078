import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import https from 'node:https';
import net from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { EgressCa } from './certificates.ts';
import {
  auditFind, connect, connectTo, eventually, kit, listen, readBytes, readHead, readToEnd, rules, SECRET, startKit, stopKit, tlsTo, upgradeRequest, WS_GUID,
} from './tunnel-test-support.ts';

// WebSocket upgrades through the egress proxy (docs/egress.md "WebSocket and CONNECT"); the
// fixture is tunnel-test-support.ts.

const { ports } = kit;
before(startKit);
after(stopKit);

test('a WebSocket upgrade through the HTTP listener: injected header upstream, 101 relayed, bytes both ways, one record at close', async () => {
  const s = await connectTo(kit.proxy.httpPort);
  s.write(upgradeRequest('ws.example.test', ports.wsHttp, '/chat?room=1', 'X-Api-Key: made-up-by-sandbox\r\n'));
  const answer = await readHead(s);
  assert.equal(answer.status, 101);
  assert.match(answer.head, /\r\nUpgrade: websocket/i);
  assert.match(answer.head, /\r\nConnection: Upgrade/i);
  const expectAccept = createHash('sha1').update(`${Buffer.from('key-/chat?room=1').toString('base64')}${WS_GUID}`).digest('base64');
  assert.match(answer.head, new RegExp(`Sec-WebSocket-Accept: ${expectAccept.replace(/[+/]/g, '\\$&')}`));
  const seen = kit.upgrades.at(-1)!;
  assert.equal(seen.url, '/chat?room=1');
  assert.equal(seen.headers['x-api-key'], SECRET, 'the inject replaced the sandbox\'s header');
  assert.equal(seen.headers.host, `ws.example.test:${ports.wsHttp}`);
  assert.equal(seen.headers.upgrade, 'websocket');
  // The greeting came in the same packet as the 101: it must not be lost.
  assert.equal((await readBytes(s, 5, answer.rest)).toString(), 'hello');
  s.write('ping-over-ws');
  assert.equal((await readBytes(s, 12)).toString(), 'ping-over-ws');
  s.end();
  await new Promise((r) => s.once('close', r));
  const rec = await auditFind((l) => l.type === undefined && l.path === '/chat?room=1', 'the upgrade record');
  assert.equal(rec.status, 101);
  assert.equal(rec.upstream_status, '101');
  assert.equal(rec.method, 'GET');
  assert.equal(rec.scheme, 'http');
  assert.equal(rec.rule, 'ws-http');
  assert.equal(rec.bytes_in, 12);
  assert.equal(rec.bytes_out, 5 + 12);
  assert.equal(rec.dst_port, ports.wsHttp);
  assert.equal(rec.upstream_addr, `127.0.0.1:${ports.wsHttp}`);
  assert.deepEqual(rec.injected, ['X-Api-Key']);
  assert.equal((await readFile(join(kit.dir, 'access.jsonl'), 'utf8')).includes(SECRET), false);
});

test('a WebSocket upgrade through the HTTPS listener: TLS both sides, verified upstream, injected Authorization', async () => {
  const s = await tlsTo(kit.proxy.httpsPort, 'wss.example.test');
  s.write(upgradeRequest('wss.example.test', ports.wsHttps, '/secure'));
  const answer = await readHead(s);
  assert.equal(answer.status, 101);
  assert.equal(kit.upgrades.at(-1)!.headers.authorization, `Bearer ${SECRET}`);
  assert.equal((await readBytes(s, 5, answer.rest)).toString(), 'hello');
  const big = Buffer.alloc(200_000, 'w');
  s.write(big);
  assert.equal((await readBytes(s, big.length)).length, big.length);
  s.end();
  await new Promise((r) => s.once('close', r));
  const rec = await auditFind((l) => l.type === undefined && l.path === '/secure', 'the wss record');
  assert.equal(rec.status, 101);
  assert.equal(rec.scheme, 'https');
  assert.equal(rec.bytes_in, big.length);
  assert.equal(rec.bytes_out, 5 + big.length);
  assert.match(String(rec.tls_version), /^TLSv1\.[23]$/);
  await auditFind((l) => l.type === 'security_event' && l.reason === 'inject_fired' && l.path === '/secure', 'the inject_fired event');
});

test('an absolute-form upgrade goes up with its authority as Host, the inject with it, not the sandbox\'s Host', async () => {
  const s = await tlsTo(kit.proxy.httpsPort, 'wss.example.test');
  s.write(upgradeRequest('attacker.example', 443, `https://wss.example.test:${ports.wsHttps}/abs-upgrade`));
  const answer = await readHead(s);
  assert.equal(answer.status, 101);
  const seen = kit.upgrades.at(-1)!;
  assert.equal(seen.url, '/abs-upgrade');
  assert.equal(seen.headers.host, `wss.example.test:${ports.wsHttps}`);
  assert.equal(seen.headers.authorization, `Bearer ${SECRET}`);
  s.destroy();
  const rec = await auditFind((l) => l.type === undefined && l.path === '/abs-upgrade', 'the absolute-form upgrade record');
  assert.equal(rec.host, 'wss.example.test');
  assert.deepEqual(rec.injected, ['Authorization']);
});

test('an upgrade whose Host differs from the TLS server name is refused before any inject', async () => {
  const before = kit.contacts.ws;
  const s = await tlsTo(kit.proxy.httpsPort, 'other.example.test');
  s.write(upgradeRequest('wss.example.test', ports.wsHttps, '/mismatch'));
  const answer = await readHead(s);
  assert.equal(answer.status, 403);
  s.destroy();
  assert.equal(kit.contacts.ws, before);
  await auditFind((l) => l.type === 'security_event' && l.reason === 'host_sni_mismatch' && l.path === '/mismatch', 'the mismatch event');
});

test('a denied upgrade is a 403 in svc\'s error form, and the upstream never sees a connection', async () => {
  const before = kit.contacts.ws;
  const s = await connectTo(kit.proxy.httpPort);
  s.write(upgradeRequest('denied.example.test', ports.wsHttp, '/denied-ws'));
  const answer = await readHead(s);
  assert.equal(answer.status, 403);
  const body = await readToEnd(s, answer.rest);
  assert.deepEqual(JSON.parse(body.toString()), { code: 403, message: 'egress denied by rule denied' });
  assert.equal(kit.contacts.ws, before);
  const rec = await auditFind((l) => l.type === undefined && l.path === '/denied-ws', 'the denied record');
  assert.equal(rec.status, 403);
  assert.equal(rec.dst_ip, '');
  assert.equal(rec.upstream_status, '');
  assert.equal(rec.bytes_out, body.length);
});

test('an upgrade that carries a body is a 400 (never a 5xx), and the upstream never sees a connection', async () => {
  const before = kit.contacts.ws;
  const s = await connectTo(kit.proxy.httpPort);
  s.write(`${upgradeRequest('ws.example.test', ports.wsHttp, '/ws-with-body', 'Content-Length: 5\r\n')}hello`);
  const answer = await readHead(s);
  assert.equal(answer.status, 400);
  const body = JSON.parse((await readToEnd(s, answer.rest)).toString()) as { code: number; message: string };
  assert.equal(body.code, 400);
  assert.match(body.message, /upgrade \(websocket\) with a request body is not supported/);
  assert.equal(kit.contacts.ws, before);
});

test('an upgrade to anything but WebSocket (h2c, say) is a 400 naming it, and the upstream never sees a connection', async () => {
  const before = kit.contacts.ws;
  for (const protocol of ['h2c', 'websocket, h2c', 'HTTP/2.0', 'tls/1.0']) {
    const s = await connectTo(kit.proxy.httpPort);
    s.write(upgradeRequest('ws.example.test', ports.wsHttp, '/h2c').replace('Upgrade: websocket', `Upgrade: ${protocol}`));
    const answer = await readHead(s);
    assert.equal(answer.status, 400, protocol);
    const body = JSON.parse((await readToEnd(s, answer.rest)).toString()) as { code: number; message: string };
    assert.equal(body.code, 400);
    assert.match(body.message, /forwards only WebSocket upgrades \(Upgrade: websocket\), not Upgrade: /);
    assert.ok(body.message.includes(JSON.stringify(protocol)), body.message);
  }
  assert.equal(kit.contacts.ws, before);
  // The token is case-insensitive (RFC 6455 4.1).
  const s = await connectTo(kit.proxy.httpPort);
  s.write(upgradeRequest('ws.example.test', ports.wsHttp, '/ws-case').replace('Upgrade: websocket', 'Upgrade: WebSocket'));
  const answer = await readHead(s);
  assert.equal(answer.status, 101);
  s.destroy();
});

test('an upgrade whose inject cannot be carried (a policy pushed past the checks) is a 502 naming the host; nothing contacted', async () => {
  const before = kit.contacts.ws;
  const evil = { name: 'evil', match: { scheme: 'http' as const, port: ports.wsHttp, host: 'ws.example.test' }, action: { allow: true, inject: [{ header: 'X-Key', secret: 'zq9\u010D\u010AX-Evil: 1' }] } };
  kit.proxy.store.put({ sandboxId: 'sbx-evil', address: '127.0.0.3', rules: [evil] });
  try {
    const s = await connectTo(kit.proxy.httpPort, '127.0.0.3');
    s.write(upgradeRequest('ws.example.test', ports.wsHttp, '/evil-ws'));
    const answer = await readHead(s);
    assert.equal(answer.status, 502);
    const text = (await readToEnd(s, answer.rest)).toString();
    assert.match(JSON.parse(text).message, /cannot send the request to ws\.example\.test: the header X-Key holds a character/);
    assert.equal(text.includes('zq9'), false, 'the secret is not shown');
    assert.equal(kit.contacts.ws, before);
  } finally {
    kit.proxy.store.delete('sbx-evil');
  }
});

test('an upstream that answers a WebSocket upgrade with a switch to another protocol is a 502; nothing is relayed', async () => {
  const s = await connectTo(kit.proxy.httpPort);
  s.write(upgradeRequest('ws.example.test', ports.wsHttp, '/switch-h2c'));
  const answer = await readHead(s);
  assert.equal(answer.status, 502);
  const body = (await readToEnd(s, answer.rest)).toString();
  assert.match(JSON.parse(body).message, /switched to "h2c", not the WebSocket the egress proxy asked for/);
  assert.equal(body.includes('PRI-bytes'), false);
});

test('an upstream that declines the upgrade: its answer is relayed as an ordinary response, then the connection closes', async () => {
  const s = await connectTo(kit.proxy.httpPort);
  s.write(upgradeRequest('ws.example.test', ports.wsHttp, '/refuse'));
  const answer = await readHead(s);
  assert.equal(answer.status, 403);
  assert.match(answer.head, /\r\nX-Why: no-ws/);
  assert.match(answer.head, /\r\nConnection: close/);
  assert.doesNotMatch(answer.head, /Transfer-Encoding/i);
  assert.equal((await readToEnd(s, answer.rest)).toString(), 'nope!');
  const rec = await auditFind((l) => l.type === undefined && l.path === '/refuse', 'the declined record');
  assert.equal(rec.status, 403);
  assert.equal(rec.upstream_status, '403');
  assert.equal(rec.bytes_out, 5);
});

test('an upgrade to an upstream that is down is a 502 naming it', async () => {
  const port = await new Promise<number>((resolve) => { const t = net.createServer(); t.listen(0, '127.0.0.1', () => { const p = (t.address() as net.AddressInfo).port; t.close(() => resolve(p)); }); });
  kit.proxy.store.put({ sandboxId: 'sbx-tunnels', address: '127.0.0.1', rules: [...rules(), { name: 'down', match: { scheme: 'http', port, host: 'ws.example.test' }, action: { allow: true } }] });
  try {
    const s = await connectTo(kit.proxy.httpPort);
    s.write(upgradeRequest('ws.example.test', port, '/down'));
    const answer = await readHead(s);
    assert.equal(answer.status, 502);
    assert.match(JSON.parse((await readToEnd(s, answer.rest)).toString()).message, /ws\.example\.test .* refused the connection/);
  } finally {
    kit.proxy.store.put({ sandboxId: 'sbx-tunnels', address: '127.0.0.1', rules: rules() });
  }
});

test('an upgrade to an https upstream whose certificate is not trusted is a 502, as for requests', async () => {
  const stranger = await EgressCa.loadOrCreate(join(kit.dir, 'stranger-ca'));
  const leaf = stranger.leafFor('wss.example.test');
  const untrusted = https.createServer({ cert: leaf.cert, key: leaf.key }).on('upgrade', () => assert.fail('the proxy must not send the upgrade to an untrusted upstream'));
  const port = await listen(untrusted);
  kit.proxy.store.put({ sandboxId: 'sbx-tunnels', address: '127.0.0.1', rules: [...rules(), { name: 'untrusted', match: { scheme: 'https', port, host: 'wss.example.test' }, action: { allow: true } }] });
  try {
    const s = await tlsTo(kit.proxy.httpsPort, 'wss.example.test');
    s.write(upgradeRequest('wss.example.test', port, '/untrusted'));
    const answer = await readHead(s);
    assert.equal(answer.status, 502);
    assert.match(JSON.parse((await readToEnd(s, answer.rest)).toString()).message, /wss\.example\.test presented a certificate that is not trusted/);
  } finally {
    kit.proxy.store.put({ sandboxId: 'sbx-tunnels', address: '127.0.0.1', rules: rules() });
    untrusted.close();
  }
});

test('300 tunnels (upgrades, declined, denied, CONNECT, aborted) leak no descriptors', async () => {
  const fds = async () => readdirSync('/proc/self/fd').length;
  const kinds: Array<() => Promise<unknown>> = [
    async () => {
      const s = await connectTo(kit.proxy.httpPort);
      s.write(upgradeRequest('ws.example.test', ports.wsHttp, '/leak'));
      const a = await readHead(s);
      await readBytes(s, 5, a.rest);
      s.end();
      await new Promise((r) => s.once('close', r));
    },
    async () => {
      const s = await connectTo(kit.proxy.httpPort);
      s.write(upgradeRequest('ws.example.test', ports.wsHttp, '/refuse-leak'));
      await readToEnd(s, (await readHead(s)).rest);
    },
    async () => {
      const s = await connectTo(kit.proxy.httpPort);
      s.write(upgradeRequest('denied.example.test', ports.wsHttp, '/leak'));
      await readToEnd(s, (await readHead(s)).rest);
    },
    async () => {
      const r = await connect(`echo.example.test:${ports.echo}`);
      r.socket.write('abc');
      await readBytes(r.socket, 3, r.rest);
      r.socket.destroy(); // a reset mid-tunnel
    },
    async () => {
      const s = await connectTo(kit.proxy.httpPort);
      s.write(upgradeRequest('wss.example.test', ports.wsHttp, '/leak'));
      s.destroy(); // gone before any answer
    },
  ];
  const round = async (n: number) => {
    for (let i = 0; i < n; i++) await kinds[i % kinds.length]();
  };
  await round(50);
  await new Promise((r) => setTimeout(r, 100));
  const before = await fds();
  await round(300);
  await eventually(async () => ((await fds()) <= before + 4 ? true : undefined), `descriptors to settle (before: ${before}, now: ${await fds()})`, 5_000);
});
