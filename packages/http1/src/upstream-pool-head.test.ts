/**
 * What the upstream pool writes: a head goes as latin1, one byte per character, so a head holding
 * a character past U+00FF (which latin1 would cut to its low byte: U+010A to LF) fails the
 * exchange and nothing reaches the upstream.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { countingDial, eachRequest, exchange, OK, pool, tcpBackend, test } from './testing/upstream-pool-fixtures.ts';

test('a head holding a character past U+00FF fails with ERR_INVALID_CHAR and sends nothing', async (t) => {
  const received: string[] = [];
  let bytes = 0;
  const backend = await tcpBackend(t, (s) => {
    s.on('data', (d: Buffer) => { bytes += d.length; });
    eachRequest(s, (raw) => { received.push(raw); s.write(OK); });
  });
  const p = pool(t);
  // Built without requestHead's checks, as a caller of its own might: latin1 makes it two requests.
  const head = 'GET / HTTP/1.1\r\nHost: backend\r\nX-Key: a\u010D\u010A\u010D\u010AGET /smuggled HTTP/1.1\r\nHost: backend\r\n\r\n';
  const conn = p.acquire('k', countingDial(backend.port));
  const out = await exchange(conn, head);
  assert.deepEqual(out.events, ['failure']);
  assert.equal(out.error?.code, 'ERR_INVALID_CHAR');
  assert.equal(conn.isDestroyed, true);
  await sleep(50);
  assert.deepEqual([received, bytes, p.idleCount], [[], 0, 0]);
});

test('a head with Latin-1 characters goes one byte per character', async (t) => {
  const received: string[] = [];
  const backend = await tcpBackend(t, (s) => eachRequest(s, (raw) => { received.push(raw); s.write(OK); }));
  const p = pool(t);
  const out = await exchange(p.acquire('k', countingDial(backend.port)), 'GET / HTTP/1.1\r\nHost: backend\r\nX-Name: caf\u00e9\r\n\r\n');
  assert.equal(out.status, 200);
  assert.deepEqual(received, ['GET / HTTP/1.1\r\nHost: backend\r\nX-Name: caf\u00e9\r\n\r\n']);
});
