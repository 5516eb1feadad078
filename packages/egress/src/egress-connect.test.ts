import assert from 'node:assert/strict';
import net from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import tls from 'node:tls';
import { silentLogger } from '@svc/common';
import { startEgressProxy } from './egress-proxy.ts';
import {
  auditFind, auditLines, connect, connectTo, fallbackPolicy, kit, readBytes, readHead, readToEnd, startKit, stopKit, tlsTo,
} from './tunnel-test-support.ts';

// CONNECT through the egress proxy (docs/egress.md "WebSocket and CONNECT"), and the tunnels'
// idle timeout; the fixture is tunnel-test-support.ts.

const { ports } = kit;
before(startKit);
after(stopKit);

test('CONNECT to an allowed host and port: 200, then TLS end to end through the tunnel; one record with the bytes', async () => {
  const { socket, status, head } = await connect(`tls.example.test:${ports.tls}`);
  assert.equal(status, 200);
  assert.equal(head, 'HTTP/1.1 200 Connection established');
  // The sandbox's TLS goes to the upstream itself: it trusts the upstream's CA, not the proxy's.
  const inner = tls.connect({ socket, servername: 'tls.example.test', ca: kit.upstreamCa.caPem });
  await new Promise<void>((resolve, reject) => { inner.once('secureConnect', () => resolve()); inner.once('error', reject); });
  inner.write('GET /through-connect HTTP/1.1\r\nHost: tls.example.test\r\nConnection: close\r\n\r\n');
  const text = (await readToEnd(inner)).toString();
  assert.match(text, /^HTTP\/1\.1 200/);
  assert.match(text, /tls upstream saw \/through-connect$/);
  const rec = await auditFind((l) => l.type === undefined && l.method === 'CONNECT' && l.host === 'tls.example.test', 'the CONNECT record');
  assert.equal(rec.status, 200);
  assert.equal(rec.rule, 'tls');
  assert.equal(rec.path, '');
  assert.equal(rec.scheme, 'https');
  assert.equal(rec.dst_ip, '127.0.0.1');
  assert.equal(rec.dst_port, ports.tls);
  assert.equal(rec.upstream_addr, `127.0.0.1:${ports.tls}`);
  assert.ok(Number(rec.bytes_in) > 100, 'the ClientHello and the request went up');
  assert.ok(Number(rec.bytes_out) > Buffer.byteLength(text), 'the certificate and the answer came down');
  assert.equal(typeof rec.latency_ms, 'number');
});

test('CONNECT counts exactly what flows, including bytes sent before the 200', async () => {
  const socket = await connectTo(kit.proxy.httpPort);
  // An eager client: its first bytes come with the CONNECT, before the proxy answered.
  socket.write(`CONNECT echo.example.test:${ports.echo} HTTP/1.1\r\nHost: echo.example.test:${ports.echo}\r\n\r\nearly-`);
  const answer = await readHead(socket);
  assert.equal(answer.status, 200);
  socket.write('and-late');
  assert.equal((await readBytes(socket, 14, answer.rest)).toString(), 'early-and-late');
  socket.end();
  await new Promise((r) => socket.once('close', r));
  const rec = await auditFind((l) => l.type === undefined && l.method === 'CONNECT' && l.host === 'echo.example.test', 'the echo record');
  assert.equal(rec.bytes_in, 14);
  assert.equal(rec.bytes_out, 14);
  assert.equal(rec.status, 200);
});

test('CONNECT denied by the rules: by a deny rule, by a rule with a path, on a port no allow rule covers; nothing contacted', async () => {
  const before = kit.contacts.echo;
  const denied = await connect(`denied.example.test:${ports.echo}`);
  assert.equal(denied.status, 403);
  assert.deepEqual(JSON.parse((await readToEnd(denied.socket, denied.rest)).toString()), { code: 403, message: `egress denied: CONNECT denied.example.test:${ports.echo} refused: deny rule denied names this host` });
  // A rule with a path cannot match a CONNECT (whose path is empty).
  const pathRule = await connect(`path.example.test:${ports.echo}`);
  assert.equal(pathRule.status, 403);
  assert.match(JSON.parse((await readToEnd(pathRule.socket, pathRule.rest)).toString()).message, /no rule matched/);
  // An allow rule without a port covers 443 only.
  const otherPort = await connect(`portless.example.test:${ports.echo}`);
  assert.equal(otherPort.status, 403);
  otherPort.socket.destroy();
  assert.equal(kit.contacts.echo, before);
  const ev = await auditFind((l) => l.type === 'security_event' && l.reason === 'default_deny' && l.host === 'path.example.test', 'the default_deny event');
  assert.equal(ev.method, 'CONNECT');
  const rec = await auditFind((l) => l.type === undefined && l.method === 'CONNECT' && l.host === 'denied.example.test', 'the denied CONNECT record');
  assert.equal(rec.status, 403);
  assert.equal(rec.dst_ip, '');
  assert.equal(rec.rule, 'denied');
  const refusal = await auditFind((l) => l.type === 'security_event' && l.reason === 'connect_refused' && l.host === 'denied.example.test', 'the denied CONNECT\'s connect_refused event');
  assert.equal(refusal.rule, 'denied');
  assert.equal(refusal.detail, `CONNECT denied.example.test:${ports.echo} refused: deny rule denied names this host; nothing was contacted`);
  // On 443 the portless rule allows: whatever the loopback has there, the answer is not a denial.
  const on443 = await connect('portless.example.test:443');
  on443.socket.destroy();
  assert.notEqual(on443.status, 403);
  await auditFind((l) => l.type === undefined && l.method === 'CONNECT' && l.host === 'portless.example.test' && l.dst_port === 443 && l.rule === 'portless', 'the 443 record');
});

test('CONNECT is refused by a deny rule for its host that names a path, method or SNI: the tunnel could carry any of them', async () => {
  const allowEcho = { name: 'echo', match: { scheme: 'https' as const, port: ports.echo, host: 'echo.example.test' }, action: { allow: true } };
  const narrow = [
    { name: 'no-admin', match: { host: 'echo.example.test', path: '/admin*' }, action: { allow: false } },
    { name: 'no-delete', match: { host: 'echo.example.test', method: ['DELETE'] }, action: { allow: false } },
  ];
  const before = kit.contacts.echo;
  const sniRule = { name: 'no-sni', match: { host: 'echo.example.test', sni: 'evil.example.net' }, action: { allow: false } };
  const target = `CONNECT echo.example.test:${ports.echo} refused`;
  for (const [name, rule, why] of [
    ['no-admin', narrow[0], `${target}: deny rule no-admin names this host, and a tunnel carries any path and method (the rule's path /admin* cannot be checked inside it)`],
    ['no-delete', narrow[1], `${target}: deny rule no-delete names this host, and a tunnel carries any path and method (the rule's method DELETE cannot be checked inside it)`],
    ['no-sni', sniRule, `${target}: deny rule no-sni names this host, and a tunnel carries any SNI, path and method (the rule's sni evil.example.net cannot be checked inside it)`],
  ] as const) {
    kit.proxy.store.put({ sandboxId: 'sbx-narrow', address: '127.0.0.3', rules: [rule, allowEcho] });
    // What the review sent: a DELETE /admin inside a tunnel a later host-wide allow let through.
    const r = await connect(`echo.example.test:${ports.echo}`, '127.0.0.3');
    assert.equal(r.status, 403, name);
    // The answer and the audit say which host and port, which rule, and why it holds for the whole tunnel.
    assert.deepEqual(JSON.parse((await readToEnd(r.socket, r.rest)).toString()), { code: 403, message: `egress denied: ${why}` });
    const ev = await auditFind((l) => l.type === 'security_event' && l.reason === 'connect_refused' && l.rule === name && l.sandbox_id === 'sbx-narrow', `the connect_refused event of ${name}`);
    assert.equal(ev.detail, `${why}; nothing was contacted`);
    assert.equal(ev.host, 'echo.example.test');
    assert.equal(ev.method, 'CONNECT');
  }
  assert.equal(kit.contacts.echo, before, 'nothing contacted');
  // Without such a rule the same tunnel opens.
  kit.proxy.store.put({ sandboxId: 'sbx-narrow', address: '127.0.0.3', rules: [allowEcho] });
  const ok = await connect(`echo.example.test:${ports.echo}`, '127.0.0.3');
  assert.equal(ok.status, 200);
  ok.socket.destroy();
  kit.proxy.store.delete('sbx-narrow');
});

test('a malformed deny rule (one that carries inject) refuses a CONNECT with one event that says both', async () => {
  const malformed = { name: 'bad-deny', match: { host: 'echo.example.test' }, action: { allow: false, inject: [{ header: 'X-Key', secret: 'S' }] } };
  kit.proxy.store.put({ sandboxId: 'sbx-malformed', address: '127.0.0.4', rules: [malformed] });
  try {
    const r = await connect(`echo.example.test:${ports.echo}`, '127.0.0.4');
    assert.equal(r.status, 403);
    r.socket.destroy();
    const ev = await auditFind((l) => l.type === 'security_event' && l.sandbox_id === 'sbx-malformed', 'the refusal\'s event');
    assert.equal(ev.reason, 'connect_refused');
    assert.match(String(ev.detail), /deny rule bad-deny names this host.*nothing was contacted; and a deny rule carries inject \(a configuration error\)/);
    // The record of the CONNECT itself is written once the exchange closes: after it, no second event.
    await auditFind((l) => l.type === undefined && l.method === 'CONNECT' && l.sandbox_id === 'sbx-malformed', 'the CONNECT record');
    assert.equal((await auditLines()).filter((l) => l.type === 'security_event' && l.sandbox_id === 'sbx-malformed').length, 1);
  } finally {
    kit.proxy.store.delete('sbx-malformed');
  }
});

test('CONNECT to a rule that injects is refused with connect_refused: the tunnel could not carry the credential', async () => {
  const before = kit.contacts.echo;
  const r = await connect(`inject.example.test:${ports.echo}`);
  assert.equal(r.status, 403);
  const body = JSON.parse((await readToEnd(r.socket, r.rest)).toString());
  assert.match(body.message, /inject injects headers, which the proxy cannot add inside a CONNECT tunnel/);
  assert.equal(kit.contacts.echo, before);
  const ev = await auditFind((l) => l.type === 'security_event' && l.reason === 'connect_refused' && l.rule === 'inject', 'the connect_refused event');
  assert.equal(ev.host, 'inject.example.test');
  assert.equal(ev.method, 'CONNECT');
  assert.equal((await auditLines()).some((l) => l.reason === 'inject_fired' && l.host === 'inject.example.test'), false);
});

test('CONNECT decided by address (E2B\'s lists): allowed in allowOut, denied in denyOut; a transform host is refused', async () => {
  const ok = await connect(`fallback.example.test:${ports.echo}`, '127.0.0.2');
  assert.equal(ok.status, 200);
  ok.socket.write('by-address');
  assert.equal((await readBytes(ok.socket, 10, ok.rest)).toString(), 'by-address');
  ok.socket.end();
  const rec = await auditFind((l) => l.type === undefined && l.method === 'CONNECT' && l.host === 'fallback.example.test' && l.status === 200, 'the fallback record');
  assert.equal(rec.sandbox_id, 'sbx-fallback');
  assert.equal(rec.bytes_in, 10);

  const transform = await connect(`transform.example.test:${ports.echo}`, '127.0.0.2');
  assert.equal(transform.status, 403);
  transform.socket.destroy();
  await auditFind((l) => l.type === 'security_event' && l.reason === 'connect_refused' && l.rule === 'transform transform.example.test', 'the transform\'s connect_refused');

  kit.proxy.store.put(fallbackPolicy(['127.0.0.1/32']));
  try {
    const before = kit.contacts.echo;
    const no = await connect(`fallback.example.test:${ports.echo}`, '127.0.0.2');
    assert.equal(no.status, 403);
    assert.match(JSON.parse((await readToEnd(no.socket, no.rest)).toString()).message, /deny_out 127\.0\.0\.1\/32/);
    assert.equal(kit.contacts.echo, before);
  } finally {
    kit.proxy.store.put(fallbackPolicy());
  }
});

test('a malformed CONNECT target is a 400', async () => {
  const r = await connect('no-port.example.test');
  assert.equal(r.status, 400);
  r.socket.destroy();
});

test('CONNECT through the HTTPS listener works the same (a client that reaches the proxy over TLS)', async () => {
  const s = await tlsTo(kit.proxy.httpsPort, 'kit.proxy.example.test');
  s.write(`CONNECT echo.example.test:${ports.echo} HTTP/1.1\r\n\r\n`);
  const answer = await readHead(s);
  assert.equal(answer.status, 200);
  s.write('over-tls');
  assert.equal((await readBytes(s, 8, answer.rest)).toString(), 'over-tls');
  s.end();
  const rec = await auditFind((l) => l.type === undefined && l.method === 'CONNECT' && l.host === 'echo.example.test' && l.tls_version !== '', 'the record of the CONNECT over TLS');
  assert.equal(rec.bytes_in, 8);
});


test('an idle tunnel is closed at the idle timeout; close() ends the tunnels still open', async () => {
  const quick = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: '',
    caDir: join(kit.dir, 'egress-ca'), auditLogPath: join(kit.dir, 'quick.jsonl'), logger: silentLogger(),
    resolve: { 'echo.example.test': '127.0.0.1' }, ioTimeoutMs: 300,
  });
  let open: net.Socket | undefined;
  try {
    quick.store.put({ sandboxId: 'sbx-quick', address: '127.0.0.1', rules: [{ name: 'echo', match: { scheme: 'https', port: ports.echo, host: 'echo.example.test' }, action: { allow: true } }] });
    const viaQuick = async () => {
      const s = await connectTo(quick.httpPort);
      s.write(`CONNECT echo.example.test:${ports.echo} HTTP/1.1\r\n\r\n`);
      const a = await readHead(s);
      assert.equal(a.status, 200);
      return s;
    };
    const idle = await viaQuick();
    const t0 = Date.now();
    idle.write('x');
    await readBytes(idle, 1);
    await readToEnd(idle);
    const waited = Date.now() - t0;
    assert.ok(waited >= 250 && waited < 3_000, `closed after ${waited} ms`);
    open = await viaQuick();
    open.write('keep me busy');
    await readBytes(open, 12);
  } finally {
    const closed = open ? new Promise((r) => open!.once('close', r)) : Promise.resolve();
    await quick.close();
    await closed;
  }
});
