/**
 * The lean HTTP/1.1 server and its handler: an early answer and the body it drops, a client gone
 * mid-request, upgrades, request bodies (paused, chunked with trailers), writeHead's refusal of
 * CR/LF, a handler that throws, a malformed request, and closeAll().
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { InvalidHeaderError } from './request-head.ts';
import { Client, closeServed, H, serve, sleep, until } from './testing/lean-server-client.ts';

after(closeServed);

const main = serve();

test('an early answer drops the rest of its body, which is not read as a request', async () => {
  const s = await main;
  const c = new Client(s.port);
  const body = `GET /smuggled HTTP/1.1\r\n${H}\r\n`;
  c.send(`POST /early HTTP/1.1\r\n${H}Content-Length: ${body.length}\r\n\r\n`);
  await c.responses(1);
  c.send(body);
  await sleep(50);
  c.send(`GET /second HTTP/1.1\r\n${H}\r\n`);
  const rs = await c.responses(2);
  assert.equal(rs[0].body, 'early');
  assert.equal(JSON.parse(rs[1].body).url, '/second');
  assert.equal(s.urls.includes('/smuggled'), false);
});

test('after an early answer, a pipelined request sent in the same write as the dropped body is answered', async () => {
  const s = await main;
  const c = new Client(s.port);
  const body = `GET /smuggled2 HTTP/1.1\r\n${H}\r\n`;
  c.send(`POST /early HTTP/1.1\r\n${H}Content-Length: ${body.length}\r\n\r\n`);
  await c.responses(1);
  c.send(`${body}GET /second2 HTTP/1.1\r\n${H}\r\n`);
  const rs = await c.responses(2);
  assert.equal(JSON.parse(rs[1].body).url, '/second2');
  assert.equal(s.urls.includes('/smuggled2'), false);
});

test('a client that destroys its socket mid-request fires reply.onClose with the answer unfinished', async () => {
  const s = await main;
  const c = new Client(s.port);
  c.send(`POST /hang HTTP/1.1\r\n${H}Content-Length: 100\r\n\r\n0123456789`);
  await until(() => s.urls.includes('/hang'), 'the request');
  c.sock.destroy();
  await until(() => s.closes.some((x) => x.url === '/hang'), 'onClose');
  assert.deepEqual(s.closes.filter((x) => x.url === '/hang'), [{ url: '/hang', finished: false, aborted: true }]);
});

test('an Upgrade request hands the socket and exactly the bytes after the head to onUpgrade, and is no longer read', async () => {
  const s = await main;
  const c = new Client(s.port);
  c.send(`GET /ws HTTP/1.1\r\n${H}Connection: Upgrade\r\nUpgrade: websocket\r\n\r\nHELLO`);
  await until(() => s.upgrades.length === 1, 'onUpgrade');
  const u = s.upgrades[0];
  assert.deepEqual([u.req.url, u.head.toString('latin1')], ['/ws', 'HELLO']);
  const more = `GET /not-a-request HTTP/1.1\r\n${H}\r\n`;
  c.send(more);
  await until(() => Buffer.concat(u.later).toString('latin1') === more, 'the upgraded side to read the bytes');
  await until(() => c.data.endsWith(`echo:${more}`), 'the echo');
  assert.match(c.data, /^HTTP\/1\.1 101 Switching Protocols\r\n/);
  assert.equal(s.urls.includes('/not-a-request') || s.urls.includes('/ws'), false, 'neither is an onRequest');
});

test('a request body paused and resumed by its handler arrives whole (4 MB)', async () => {
  const c = new Client((await main).port);
  const body = randomBytes(4 * 1024 * 1024);
  c.send(Buffer.concat([Buffer.from(`POST /pause HTTP/1.1\r\n${H}Content-Length: ${body.length}\r\n\r\n`), body]));
  const [r] = await c.responses(1, [], 10_000);
  const got = JSON.parse(r.body);
  assert.deepEqual([got.bytes, got.sha], [body.length, createHash('sha256').update(body).digest('hex')]);
  assert.ok(got.pauses >= 4, `paused ${got.pauses} times`);
});

test('a chunked request body is decoded and its trailers arrive on req.trailers', async () => {
  const c = new Client((await main).port);
  c.send(`POST /chunked HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Sum: abc\r\nX-Other: 1\r\n\r\n`);
  const got = JSON.parse((await c.responses(1))[0].body);
  assert.equal(got.body, 'hello world');
  assert.deepEqual(got.trailers, ['X-Sum', 'abc', 'X-Other', '1']);
});

for (const [where, path] of [['a header value', '/crlf'], ['the status text', '/crlf-status'], ['a header value as U+010D U+010A', '/crlf-wide'], ['a header name as U+010D U+010A', '/crlf-name']]) {
  test(`writeHead with CR/LF in ${where} throws InvalidHeaderError and writes nothing`, async () => {
    const s = await main;
    const c = new Client(s.port);
    const errors = s.headerErrors.length;
    c.send(`GET ${path} HTTP/1.1\r\n${H}\r\n`);
    const rs = await c.responses(1);
    assert.equal(c.data.includes('Injected'), false, c.data);
    assert.ok(s.headerErrors[errors] instanceof InvalidHeaderError);
    assert.deepEqual([rs[0].status, rs[0].body, c.parsed().rest], [500, 'refused, sent=false', '']);
  });
}

test('a handler that throws fires onInternalError and the connection closes unanswered', async () => {
  const s = await main;
  const c = new Client(s.port);
  c.send(`GET /throw HTTP/1.1\r\n${H}\r\n`);
  await until(() => c.closed, 'the connection to close');
  assert.equal(c.data, '');
  assert.equal((s.internalErrors[0] as Error).message, 'handler bug');
});

test('a malformed request gets onClientError, and nothing later on that connection is served', async () => {
  const s = await main;
  const c = new Client(s.port);
  c.send(`GET /bad HTTP/1.1\r\n${H}Bad Header: y\r\n\r\nGET /after-bad HTTP/1.1\r\n${H}\r\n`);
  await until(() => c.ended, 'the connection to end');
  assert.equal(s.clientErrors.at(-1)?.status, 400);
  assert.deepEqual(c.parsed().all.map((r) => r.status), [400]);
  assert.equal(s.urls.includes('/bad') || s.urls.includes('/after-bad'), false);
});

test('closeAll() ends open connections, idle or mid-request', async () => {
  const s = await serve();
  const idle = new Client(s.port);
  idle.send(`GET /i HTTP/1.1\r\n${H}\r\n`);
  await idle.responses(1);
  const busy = new Client(s.port);
  busy.send(`GET /hang HTTP/1.1\r\n${H}\r\n`);
  await until(() => s.urls.includes('/hang'), 'the request');
  assert.equal(s.lean.connectionCount, 2);
  s.lean.closeAll();
  await until(() => idle.closed && busy.closed, 'both connections to close');
  assert.equal(s.lean.connectionCount, 0);
  await until(() => s.closes.find((x) => x.url === '/hang')?.finished === false, 'onClose of the unfinished answer');
});
