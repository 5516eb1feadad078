/**
 * The lean HTTP/1.1 server's clocks: headersTimeoutMs for a head left incomplete,
 * keepAliveTimeoutMs for an idle connection, and requestIdleTimeoutMs for a request gone quiet.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, closeServed, H, serve, until } from './testing/lean-server-client.ts';

after(closeServed);

const timers = serve({ keepAliveTimeoutMs: 200, headersTimeoutMs: 150 });

test('a head left incomplete is refused with 408 after headersTimeoutMs', async () => {
  const s = await timers;
  const c = new Client(s.port);
  const t0 = Date.now();
  c.send(`GET /slow HTTP/1.1\r\n${H}`);
  await until(() => s.clientErrors.length === 1, 'the client error');
  assert.equal(s.clientErrors[0].status, 408);
  const ms = Date.now() - t0;
  assert.ok(ms >= 140 && ms < 1500, `refused after ${ms} ms`);
  await until(() => c.ended, 'the connection to end');
  assert.match(c.data, /^HTTP\/1\.1 408 /);
});

test('an idle kept-alive connection is closed after keepAliveTimeoutMs', async () => {
  const c = new Client((await timers).port);
  c.send(`GET /once HTTP/1.1\r\n${H}\r\n`);
  await c.responses(1);
  const t0 = Date.now();
  await until(() => c.closed, 'the idle connection to close');
  const ms = Date.now() - t0;
  assert.ok(ms >= 150 && ms < 1500, `closed after ${ms} ms`);
});

test('without requestIdleTimeoutMs a request outlasts keepAliveTimeoutMs; once answered, the connection idles out as before', async () => {
  const c = new Client((await timers).port);
  c.send(`GET /late/400 HTTP/1.1\r\n${H}\r\n`);
  assert.equal((await c.responses(1))[0].body, 'late');
  const t0 = Date.now();
  await until(() => c.closed, 'the idle connection to close');
  const ms = Date.now() - t0;
  assert.ok(ms >= 150 && ms < 1500, `closed after ${ms} ms`);
});

const longer = serve({ keepAliveTimeoutMs: 150, headersTimeoutMs: 150, requestIdleTimeoutMs: 500 });

test('requestIdleTimeoutMs longer than keepAliveTimeoutMs: counted from the last byte, and a request quiet that long is cut', async () => {
  const s = await longer;
  const c = new Client(s.port);
  c.send(`GET /late/300 HTTP/1.1\r\n${H}\r\n`);
  assert.equal((await c.responses(1))[0].body, 'late', 'quiet 300 ms: past the keep-alive limit, within the request\'s');
  // Quiet for 400 ms after a byte at 250: 650 ms in all, but never 500 ms without a byte.
  c.send(`GET /trickle HTTP/1.1\r\n${H}\r\n`);
  assert.equal((await c.responses(2))[1].body, 'ok');
  const t0 = Date.now();
  c.send(`POST /hang HTTP/1.1\r\n${H}Content-Length: 10\r\n\r\n`);
  await until(() => c.closed, 'the quiet request to be cut', 3000);
  const ms = Date.now() - t0;
  assert.ok(ms >= 450 && ms < 2000, `cut after ${ms} ms`);
});
