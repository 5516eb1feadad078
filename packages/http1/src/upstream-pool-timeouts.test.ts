/**
 * The upstream pool's io timeout (ioTimeoutMs): an upstream that never answers, an answer that
 * stalls midway, none without the option, and how it and idleMs share one timer. Connect
 * timeouts are in upstream-pool-dials.test.ts.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { requestHead } from './request-head.ts';
import { assertTimeout, countingDial, eachRequest, exchange, GET, OK, pool, recorder, tcpBackend, test } from './testing/upstream-pool-fixtures.ts';

test('with ioTimeoutMs, an upstream that takes the request and never answers fails as an io timeout', async (t) => {
  const backend = await tcpBackend(t, () => undefined);
  assertTimeout(await exchange(pool(t, { ioTimeoutMs: 200 }).acquire('k', countingDial(backend.port))), 'io', 200);
  await backend.closed[0];
});

test('with ioTimeoutMs, an answer that stalls midway fails with responseStarted', async (t) => {
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => s.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\npart')));
  const out = await exchange(pool(t, { ioTimeoutMs: 200 }).acquire('k', countingDial(backend.port)));
  assert.deepEqual([out.events, out.error?.timeout, out.responseStarted], [['head', 'body', 'failure'], 'io', true]);
});

test('without ioTimeoutMs a silent upstream is waited on', async (t) => {
  const backend = await tcpBackend(t, () => undefined);
  const conn = pool(t).acquire('k', countingDial(backend.port));
  const r = recorder();
  conn.start(r.sink, GET, false, false, 2000);
  assert.equal(await Promise.race([r.done.then(() => 'settled'), sleep(400).then(() => 'waiting')]), 'waiting');
  conn.destroy();
  await backend.closed[0];
  assert.deepEqual(r.seen.events, [], 'an abandoned exchange tells its sink nothing');
});

test('one timer for two limits: an exchange outlasts a shorter idleMs, fails at ioTimeoutMs, and its connection then idles out at idleMs', async (t) => {
  // Answers / at once, /slow after 300 ms, /trickle with a byte at 250 ms and the rest 400 ms later, and never /silent.
  const backend = await tcpBackend(t, (s) => eachRequest(s, (raw) => {
    if (raw.startsWith('GET / ')) s.write(OK);
    if (raw.startsWith('GET /slow')) setTimeout(() => s.write(OK), 300);
    if (raw.startsWith('GET /trickle')) {
      setTimeout(() => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\no'), 250);
      setTimeout(() => s.write('k'), 650);
    }
  }));
  const p = pool(t, { idleMs: 100, ioTimeoutMs: 500 });
  const dial = countingDial(backend.port);
  const slow = await exchange(p.acquire('k', dial), requestHead('GET', '/slow', ['Host', 'backend']));
  assert.deepEqual([slow.status, slow.body], [200, 'ok'], 'quiet for 300 ms: past idleMs, within ioTimeoutMs');
  // Quiet for 400 ms after a byte at 250: 650 ms in all, but never 500 ms without a byte.
  const trickle = await exchange(p.acquire('k', dial), requestHead('GET', '/trickle', ['Host', 'backend']));
  assert.deepEqual([trickle.status, trickle.body, dial.count], [200, 'ok', 1], 'the quiet counts from the last byte');
  const t0 = Date.now();
  const silent = await exchange(p.acquire('k', dial), requestHead('GET', '/silent', ['Host', 'backend']));
  assertTimeout(silent, 'io', 500);
  const ms = Date.now() - t0;
  assert.ok(ms >= 450 && ms < 2000, `failed after ${ms} ms`);
  // A new connection, back in the pool after its exchange, closes at idleMs as before.
  await exchange(p.acquire('k', dial));
  assert.equal(p.idleCount, 1);
  const idleSince = Date.now();
  await backend.closed[1];
  const idled = Date.now() - idleSince;
  assert.ok(idled >= 80 && idled < 450, `closed after ${idled} ms idle`);
});
