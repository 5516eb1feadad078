/**
 * How the upstream pool dials: a dial resolving later (a connecting or a connected socket, as a
 * proxy's tunnel hands it over) with writes waiting in order, a dial that rejects or throws, a
 * refused TCP connect, and the connect timeout (a TLS handshake never answered, a dial that
 * never settles, a tunnel finished too late).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import tls from 'node:tls';
import { requestHead } from './request-head.ts';
import type { Dial, DialedSocket } from './upstream-pool.ts';
import { assertTimeout, connected, countingDial, eachRequest, exchange, GET, HOST, OK, pool, recorder, tcpBackend, test } from './testing/upstream-pool-fixtures.ts';

// A proxy's tunnel ('now') and a TCP connect made late ('connect'): writes made before the socket
// exists wait in order.
const asyncDials: Array<[string, (port: number) => Dial]> = [
  ['a dial resolving after 30 ms with a connecting socket', (port) => () => sleep(30).then((): DialedSocket => ({ socket: net.connect(port, HOST), ready: 'connect' }))],
  ['a dial resolving with a connected socket', (port) => async () => ({ socket: await connected(port), ready: 'now' })],
];
for (const [name, makeDial] of asyncDials) {
  test(`${name}: head and early body arrive in order, onceConnected fires`, async (t) => {
    const received: string[] = [];
    const backend = await tcpBackend(t, (s) => eachRequest(s, (raw) => { received.push(raw); s.write(OK); }));
    const p = pool(t);
    const conn = p.acquire('k', makeDial(backend.port));
    const r = recorder();
    let connectedCalls = 0;
    conn.onceConnected(() => { connectedCalls++; });
    conn.start(r.sink, requestHead('POST', '/upload', ['Host', 'backend', 'Content-Length', '11']), false, true, 2000);
    conn.writeBody('hello ');
    conn.writeBody(Buffer.from('world'));
    conn.endBody();
    assert.equal(conn.isConnected, false, 'the socket does not exist yet');
    const out = await r.done;
    assert.deepEqual(received, ['POST /upload HTTP/1.1\r\nHost: backend\r\nContent-Length: 11\r\n\r\nhello world']);
    assert.deepEqual([out.status, out.body, out.events.at(-1)], [200, 'ok', 'complete']);
    assert.equal(connectedCalls, 1);
    let late = 0;
    conn.onceConnected(() => { late++; });
    assert.equal(late, 1, 'a connected connection runs the callback at once');
    assert.equal(p.idleCount, 1);
  });
}

test('a dial that rejects, or throws, fails the exchange with its own error', async (t) => {
  const p = pool(t);
  const refused = Object.assign(new Error('the proxy refused'), { code: 'EPROXYREFUSED' });
  for (const dial of [() => Promise.reject(refused), () => { throw refused; }] as Dial[]) {
    const conn = p.acquire('k', dial);
    let ranConnected = false;
    conn.onceConnected(() => { ranConnected = true; });
    const out = await exchange(conn);
    assert.equal(out.error, refused);
    assert.deepEqual([out.events, out.responseStarted], [['failure'], false]);
    assert.deepEqual([ranConnected, conn.isDestroyed, p.idleCount], [false, true, 0]);
  }
});

test('a refused TCP connect fails with ECONNREFUSED', async (t) => {
  // A port just freed: nothing listens there.
  const server = net.createServer().listen(0, HOST);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  const out = await exchange(pool(t).acquire('k', countingDial(port)));
  assert.deepEqual([out.error?.code, out.responseStarted], ['ECONNREFUSED', false]);
});

test('a TLS handshake the server never answers fails as a connect timeout', async (t) => {
  const backend = await tcpBackend(t, () => { /* takes the ClientHello and says nothing */ });
  const dial: Dial = () => ({ socket: tls.connect({ host: HOST, port: backend.port, rejectUnauthorized: false }), ready: 'secureConnect' });
  const conn = pool(t).acquire('k', dial);
  const startedAt = Date.now();
  assertTimeout(await exchange(conn, GET, 150), 'connect', 150);
  assert.ok(Date.now() - startedAt >= 140, 'not before the limit');
  await backend.closed[0];
});

test('a dial that never settles fails as a connect timeout', async (t) => {
  const conn = pool(t).acquire('k', () => new Promise<DialedSocket>(() => undefined));
  assertTimeout(await exchange(conn, GET, 100), 'connect', 100);
  assert.equal(conn.isDestroyed, true);
});

test('a tunnel a dial finishes after the connect timeout is closed, not used', async (t) => {
  let accepted!: () => void;
  const backend = await tcpBackend(t, () => accepted());
  const acceptedNow = new Promise<void>((resolve) => { accepted = resolve; });
  const tunnel = sleep(150).then(async (): Promise<DialedSocket> => ({ socket: await connected(backend.port), ready: 'now' }));
  const conn = pool(t).acquire('k', () => tunnel);
  assertTimeout(await exchange(conn, GET, 50), 'connect', 50);
  assert.equal((await tunnel).socket.destroyed, true);
  await acceptedNow;
  await backend.closed[0];
});
