/**
 * The lean HTTP/1.1 server on one connection: kept-alive and pipelined requests, HTTP/1.0, how
 * an answer is framed (length, chunked, to the connection's end, none for HEAD and 204), and
 * Expect: 100-continue. Timeouts are in lean-server-timeouts.test.ts, handlers' bodies, upgrades
 * and errors in lean-server-handlers.test.ts.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, closeServed, H, serve, until } from './testing/lean-server-client.ts';

after(closeServed);

const main = serve();

test('several requests in turn on one kept-alive connection are each answered, with a Date, the connection staying open', async () => {
  const c = new Client((await main).port);
  const sent = [`GET /one HTTP/1.1\r\n${H}\r\n`, `POST /two HTTP/1.1\r\n${H}Content-Length: 5\r\n\r\nhello`, `GET /three HTTP/1.1\r\n${H}\r\n`];
  for (const [i, raw] of sent.entries()) { c.send(raw); await c.responses(i + 1); }
  const rs = await c.responses(3);
  assert.deepEqual(rs.map((r) => JSON.parse(r.body).url), ['/one', '/two', '/three']);
  assert.equal(JSON.parse(rs[1].body).body, 'hello');
  for (const r of rs) { assert.equal(r.headers.connection, 'keep-alive'); assert.equal(r.headers['keep-alive'], 'timeout=5'); }
  assert.equal(c.ended, false);
  assert.match(rs[0].headers.date, /^\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT$/);
  assert.ok(Math.abs(Date.parse(rs[0].headers.date) - Date.now()) < 5000);
});

test('two requests pipelined in one write are answered in order', async () => {
  const c = new Client((await main).port);
  c.send(`POST /a HTTP/1.1\r\n${H}Content-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\n${H}\r\n`);
  const rs = await c.responses(2);
  assert.deepEqual(rs.map((r) => [JSON.parse(r.body).url, JSON.parse(r.body).body]), [['/a', 'abc'], ['/b', '']]);
});

test('pipelined requests are answered when the handler replies synchronously at the body\'s end', async () => {
  const c = new Client((await main).port);
  c.send(`GET /sync/a HTTP/1.1\r\n${H}\r\nGET /sync/b HTTP/1.1\r\n${H}\r\n`);
  const rs = await c.responses(2);
  assert.deepEqual(rs.map((r) => JSON.parse(r.body).url), ['/sync/a', '/sync/b']);
});

test('HTTP/1.0 without keep-alive is answered with Connection: close and the connection ends; with keep-alive it stays open', async () => {
  const c = new Client((await main).port);
  c.send('GET /ten HTTP/1.0\r\n\r\n');
  await until(() => c.ended, 'the connection to end');
  const { all: [r], rest } = c.parsed();
  assert.deepEqual([r.headers.connection, JSON.parse(r.body).url, rest], ['close', '/ten', '']);
  const ka = new Client((await main).port);
  for (const i of [1, 2]) { ka.send(`GET /k${i} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n`); await ka.responses(i); }
  assert.deepEqual((await ka.responses(2)).map((x) => [x.headers.connection, JSON.parse(x.body).url]), [['keep-alive', '/k1'], ['keep-alive', '/k2']]);
  assert.equal(ka.ended, false);
});

test('a length-less answer ends with the connection for HTTP/1.0, and is chunked for HTTP/1.1, which keeps it', async () => {
  const c10 = new Client((await main).port);
  c10.send('GET /nolength HTTP/1.0\r\n\r\n');
  await until(() => c10.ended, 'the connection to end');
  const { all: [r10], rest } = c10.parsed();
  assert.deepEqual([r10.headers['transfer-encoding'], r10.headers['content-length'], r10.headers.connection], [undefined, undefined, 'close']);
  assert.deepEqual([r10.body, rest], ['abcdef', '']);
  const c = new Client((await main).port);
  c.send(`GET /nolength HTTP/1.1\r\n${H}\r\n`);
  const [r] = await c.responses(1);
  assert.deepEqual([r.headers['transfer-encoding'], r.body], ['chunked', 'abcdef']);
  assert.match(c.data, /\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n$/);
  c.send(`GET /next HTTP/1.1\r\n${H}\r\n`);
  assert.equal(JSON.parse((await c.responses(2))[1].body).url, '/next');
});

test('answers to HEAD and 204 carry no body, so the next answer on the connection reads right', async () => {
  const c = new Client((await main).port);
  // Pipelined, and answered synchronously from onRequest (before each request's end is handed on).
  c.send(['HEAD /nolength', 'GET /204', 'GET /after'].map((line) => `${line} HTTP/1.1\r\n${H}\r\n`).join(''));
  const rs = await c.responses(3, [0]);
  assert.deepEqual(rs.map((r) => r.status), [200, 204, 200]);
  assert.equal(rs[0].headers['transfer-encoding'], undefined);
  assert.equal(rs[0].headers.connection, 'keep-alive');
  assert.equal(JSON.parse(rs[2].body).url, '/after');
  assert.equal(c.parsed([0]).rest, '');
});

test('an HTTP/1.0 request with Expect: 100-continue gets no 1xx answer (RFC 9110 10.1.1, 15.2)', async () => {
  const c = new Client((await main).port);
  c.send('PUT /up10 HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\ndata');
  await until(() => c.ended, 'the connection to end');
  assert.match(c.data, /^HTTP\/1\.1 200 /);
});

test('Expect: 100-continue gets HTTP/1.1 100 Continue before the final answer', async () => {
  const c = new Client((await main).port);
  c.send(`PUT /up HTTP/1.1\r\n${H}Expect: 100-continue\r\nContent-Length: 4\r\n\r\n`);
  await until(() => c.data.length > 0, 'the interim answer');
  assert.equal(c.data, 'HTTP/1.1 100 Continue\r\n\r\n');
  c.send('data');
  const [r] = await c.responses(1);
  assert.equal(JSON.parse(r.body).body, 'data');
});
