import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { after, before, test } from 'node:test';
import { readText, streamGet } from './http-stream.ts';

let a: Server;
let b: Server;
let aUrl: string;
let bUrl: string;

function listen(s: Server): Promise<string> {
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(s.address() as { port: number }).port}`)));
}

before(async () => {
  b = createServer((req, res) => res.end(`auth=${req.headers.authorization ?? ''}`));
  bUrl = await listen(b);
  a = createServer((req, res) => {
    switch (req.url) {
      case '/same': res.writeHead(302, { location: '/final' }).end(); return;
      case '/cross': res.writeHead(307, { location: `${bUrl}/final` }).end(); return;
      case '/final': res.end(`auth=${req.headers.authorization ?? ''}`); return;
      case '/loop': res.writeHead(302, { location: '/loop' }).end(); return;
      case '/silent': return; // never answers
      case '/trickle': res.writeHead(200); res.write('first'); return; // body never ends
      case '/big-error': res.writeHead(500).end('x'.repeat(200_000)); return;
      default: res.writeHead(404).end();
    }
  });
  aUrl = await listen(a);
});

after(() => {
  a.closeAllConnections();
  b.closeAllConnections();
  a.close();
  b.close();
});

const opts = { headers: { authorization: 'Bearer secret' }, headerTimeoutMs: 5000, timeoutError: () => new Error('too slow') };
const body = async (res: IncomingMessage) => readText(res);

test('redirects keep the Authorization header on the same origin and drop it across origins', async () => {
  assert.equal(await body(await streamGet(`${aUrl}/same`, opts)), 'auth=Bearer secret');
  assert.equal(await body(await streamGet(`${aUrl}/cross`, opts)), 'auth=');
  await assert.rejects(streamGet(`${aUrl}/loop`, opts), /too many redirects/);
});

test('the final response comes back whatever its status; error bodies are read only so far', async () => {
  const missing = await streamGet(`${aUrl}/nothing`, opts);
  assert.equal(missing.statusCode, 404);
  const big = await streamGet(`${aUrl}/big-error`, opts);
  assert.equal(big.statusCode, 500);
  assert.equal((await readText(big, 1000)).length, 1000);
});

test('headers that do not come in time fail with the given error', async () => {
  await assert.rejects(streamGet(`${aUrl}/silent`, { ...opts, headerTimeoutMs: 200 }), /too slow/);
});

test('the signal stops the request and, later, its body', async () => {
  const early = new AbortController();
  const p = streamGet(`${aUrl}/silent`, { ...opts, signal: early.signal });
  setTimeout(() => early.abort(new Error('stopped early')), 50);
  await assert.rejects(p, /stopped early/);

  const late = new AbortController();
  const res = await streamGet(`${aUrl}/trickle`, { ...opts, signal: late.signal });
  const reading = (async () => { for await (const _ of res); })();
  setTimeout(() => late.abort(new Error('stopped late')), 50);
  await assert.rejects(reading);
  assert.ok(res.destroyed);
});
