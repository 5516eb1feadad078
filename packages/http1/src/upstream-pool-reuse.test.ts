/**
 * The upstream pool keeps and reuses connections: one keep-alive connection for exchanges in
 * turn, none kept after Connection: close, a backend's close or an answer before the whole body;
 * a chunked body that leaves it reusable; idleMs; dropIdle and closeAll; and a reused connection
 * that dies under a request, failed as retryable.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { Socket } from 'node:net';
import { requestHead } from './request-head.ts';
import { countingDial, eachRequest, exchange, httpBackend, OK, pool, recorder, tcpBackend, test } from './testing/upstream-pool-fixtures.ts';

test('sequential exchanges on one key share one keep-alive connection', async (t) => {
  const backend = await httpBackend(t, (_req, res) => res.end('ok'));
  const p = pool(t);
  const dial = countingDial(backend.port);
  const first = p.acquire('k', dial);
  assert.equal(first.reused, false);
  const a = await exchange(first);
  assert.deepEqual([a.status, a.body, a.keepAlive], [200, 'ok', true]);
  assert.equal(p.idleCount, 1);

  const second = p.acquire('k', dial);
  assert.equal(second, first);
  assert.equal(second.reused, true);
  assert.equal(p.idleCount, 0, 'a handed-out connection is not idle');
  const b = await exchange(second);
  assert.deepEqual(b.events, ['head', 'body', 'complete']);
  assert.deepEqual([dial.count, backend.connections()], [1, 1], 'one dial, one connection');
});

test('a response with Connection: close is not pooled; the next exchange dials anew', async (t) => {
  // The backend leaves its side open: the client must close it on the header alone.
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => s.write('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok')));
  const p = pool(t);
  const dial = countingDial(backend.port);
  const first = p.acquire('k', dial);
  const a = await exchange(first);
  assert.deepEqual([a.status, a.keepAlive], [200, false]);
  assert.deepEqual([p.idleCount, first.isDestroyed], [0, true]);
  await backend.closed[0];

  const second = p.acquire('k', dial);
  assert.notEqual(second, first);
  assert.equal((await exchange(second)).status, 200);
  assert.equal(dial.count, 2);
});

test('writeChunk and the last chunk make a chunked body node reads whole', async (t) => {
  let seen: { te?: string; body: string } | undefined;
  const backend = await httpBackend(t, (req, res) => {
    let body = '';
    req.setEncoding('latin1');
    req.on('data', (d: string) => { body += d; });
    req.on('end', () => { seen = { te: req.headers['transfer-encoding'], body }; res.end('ok'); });
  });
  const p = pool(t);
  const conn = p.acquire('k', countingDial(backend.port));
  const r = recorder();
  conn.start(r.sink, requestHead('POST', '/', ['Host', 'backend', 'Transfer-Encoding', 'chunked']), false, true, 2000);
  conn.onceConnected(() => {
    conn.writeChunk(Buffer.from('hello '));
    conn.writeChunk(Buffer.from('chunked '.repeat(100)));
    conn.writeChunk(Buffer.from('world'));
    conn.writeBody('0\r\n\r\n');
    conn.endBody();
  });
  const out = await r.done;
  assert.deepEqual([out.status, out.body], [200, 'ok']);
  assert.deepEqual(seen, { te: 'chunked', body: `hello ${'chunked '.repeat(100)}world` });
  assert.equal(p.idleCount, 1, 'a whole chunked body leaves the connection reusable');
});

test('an idle connection closes after idleMs and leaves the pool', async (t) => {
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => s.write(OK)));
  const p = pool(t, { idleMs: 100 });
  await exchange(p.acquire('k', countingDial(backend.port)));
  assert.equal(p.idleCount, 1);
  const idleSince = Date.now();
  await backend.closed[0];
  assert.ok(Date.now() - idleSince >= 80, 'not before idleMs');
  assert.equal(p.idleCount, 0);
});

test('dropIdle closes only the matching keys; closeAll closes the rest', async (t) => {
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => s.write(OK)));
  const p = pool(t);
  const dial = countingDial(backend.port);
  // One after the other, so the backend's first connection is sandbox-a's.
  await exchange(p.acquire('sandbox-a|80', dial));
  await exchange(p.acquire('sandbox-b|80', dial));
  assert.equal(p.idleCount, 2);

  p.dropIdle((key) => key.startsWith('sandbox-a|'));
  assert.equal(p.idleCount, 1);
  await backend.closed[0];
  assert.equal(backend.sockets[1].destroyed, false, "sandbox-b's connection stays open");

  p.closeAll();
  assert.equal(p.idleCount, 0);
  await backend.closed[1];
  assert.equal(dial.count, 2);
});

test('a pooled connection the backend closed is not handed out again', async (t) => {
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => { s.write(OK); s.end(); }));
  const p = pool(t);
  const dial = countingDial(backend.port);
  const first = p.acquire('k', dial);
  await exchange(first);
  // Right after the FIN: the connection knows it is dead before its socket has emitted 'close'.
  if (!dial.sockets[0].readableEnded) await once(dial.sockets[0], 'end');
  assert.equal(first.isDestroyed, true);
  const second = p.acquire('k', dial);
  assert.notEqual(second, first);
  assert.deepEqual([second.reused, (await exchange(second)).status], [false, 200]);
  assert.equal(dial.count, 2);
});

test('a pooled connection that dies under the next request fails it as retryable', async (t) => {
  // The race the previous test avoids: the backend closes as the reused request arrives.
  let requests = 0;
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => { if (++requests === 1) s.write(OK); else s.destroy(); }));
  const p = pool(t);
  const conn = p.acquire('k', countingDial(backend.port));
  await exchange(conn);
  assert.equal(p.acquire('k', countingDial(backend.port)), conn);
  const out = await exchange(conn);
  assert.deepEqual(out.events, ['failure']);
  assert.ok(['ECONNRESET', 'EPIPE'].includes(out.error?.code ?? ''), `code ${out.error?.code}`);
  assert.deepEqual([out.responseStarted, conn.reused, p.idleCount], [false, true, 0], 'a stale reused socket: the caller may retry');
});

test('an answer before the whole body was sent leaves the connection out of the pool', async (t) => {
  // The backend offers keep-alive, but the rest of the body would be read as its next request.
  const backend = await tcpBackend(t, (s) => {
    s.once('data', () => s.write('HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\n\r\ntoo big!'));
  });
  const p = pool(t);
  const dial = countingDial(backend.port);
  const conn = p.acquire('k', dial);
  const r = recorder();
  conn.start(r.sink, requestHead('PUT', '/big', ['Host', 'backend', 'Content-Length', '100000']), false, true, 2000);
  conn.onceConnected(() => conn.writeBody(Buffer.alloc(1000, 'x')));
  const out = await r.done;
  assert.deepEqual([out.status, out.body, out.events.at(-1)], [413, 'too big!', 'complete']);
  conn.writeBody(Buffer.alloc(1000, 'x'));
  conn.endBody();
  assert.deepEqual([p.idleCount, conn.isDestroyed], [0, true]);
  await backend.closed[0];
  assert.notEqual(p.acquire('k', dial), conn);
});

test('maxIdleTotal closes the connection parked longest, whatever its key; maxIdlePerKey the newcomer', async (t) => {
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => s.write(OK)));
  const p = pool(t, { maxIdlePerKey: 2, maxIdleTotal: 3 });
  const dial = countingDial(backend.port);
  const a = p.acquire('a', dial);
  await exchange(a);
  const b1 = p.acquire('b', dial);
  const b2 = p.acquire('b', dial);
  const b3 = p.acquire('b', dial);
  await Promise.all([exchange(b1), exchange(b2), exchange(b3)]);
  assert.equal(p.idleCount, 3, 'a, and two of b (the third past the key\'s cap)');
  const c = p.acquire('c', dial);
  await exchange(c);
  assert.equal(p.idleCount, 3);
  assert.equal(a.isDestroyed, true, 'the longest parked went');
  assert.equal(c.isDestroyed, false);
});

test('a reused connection parked again is the newest: the total closes the one idle longest', async (t) => {
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => s.write(OK)));
  const p = pool(t, { maxIdleTotal: 3 });
  const dial = countingDial(backend.port);
  const [x, y, z] = ['x', 'y', 'z'].map((k) => p.acquire(k, dial));
  for (const conn of [x!, y!, z!]) await exchange(conn); // parked in this order
  const again = p.acquire('x', dial);
  assert.equal(again, x);
  await exchange(again); // parked again: now y, z, x
  await exchange(p.acquire('w', dial));
  assert.deepEqual([x!.isDestroyed, y!.isDestroyed, z!.isDestroyed], [false, true, false]);
  assert.equal(p.idleCount, 3);
});

test('groups: one group past maxIdlePerGroup closes its own longest parked; past the total, the largest group gives one up', async (t) => {
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => s.write(OK)));
  const p = pool(t, { groupOf: (key) => key[0]!, maxIdlePerGroup: 2, maxIdleTotal: 3 });
  const dial = countingDial(backend.port);
  const park = async (key: string) => { const conn = p.acquire(key, dial); await exchange(conn); return conn; };
  const a1 = await park('a1');
  const a2 = await park('a2');
  const b1 = await park('b1');
  const a3 = await park('a3'); // group a over 2: a1 goes
  assert.deepEqual([a1.isDestroyed, a2.isDestroyed, b1.isDestroyed, a3.isDestroyed], [true, false, false, false]);
  const c1 = await park('c1'); // the total over 3: a (2) holds the most, its oldest a2 goes, b's and c's stay
  assert.deepEqual([a2.isDestroyed, a3.isDestroyed, b1.isDestroyed, c1.isDestroyed], [true, false, false, false]);
  assert.equal(p.idleCount, 3);
});

test('an idle connection the backend closes leaves the caps\' count: the pool fills to its total again', async (t) => {
  const sockets: Socket[] = [];
  const backend = await tcpBackend(t, (s) => { sockets.push(s); eachRequest(s, () => s.write(OK)); });
  const p = pool(t, { maxIdleTotal: 2 });
  const dial = countingDial(backend.port);
  const first = p.acquire('k1', dial);
  await exchange(first);
  const second = p.acquire('k2', dial);
  await exchange(second);
  sockets[0]!.destroy();
  for (let i = 0; i < 50 && !first.isDestroyed; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(p.idleCount, 1);
  const third = p.acquire('k3', dial);
  await exchange(third);
  assert.deepEqual([second.isDestroyed, third.isDestroyed, p.idleCount], [false, false, 2], 'no eviction: the closed one no longer counts');
});
