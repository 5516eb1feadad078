/**
 * JsonClient's deadlines. Node's fetch gives up on an answer's headers after 300 s whatever the
 * caller's deadline, so a deadline that long goes through a dispatcher without that limit
 * (http-client.ts, patientFetch). Waiting 300 s in a test is not an option: these tests show that
 * such a request does not go through the built-in fetch and that it behaves as any other
 * (its answer, its errors). The 300 s case itself was run by hand (stop 63's note).
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, afterEach, before, mock, test } from 'node:test';
import { SvcError, UnreachableError } from './errors.ts';
import { JsonClient } from './http-client.ts';

let server: Server;
let base: string;

before(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => { body += c.toString(); });
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const delay = Number(url.searchParams.get('delay') ?? 0);
      setTimeout(() => {
        if (url.pathname === '/missing') {
          res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 404, message: 'no such thing' }));
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ method: req.method, body, auth: req.headers['x-auth'] ?? null }));
      }, delay);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((resolve) => server.close(() => resolve())));
afterEach(() => mock.restoreAll());

const LONG = 400_000;

test('a deadline past fetch\'s own 300 s limit does not go through the built-in fetch, and its answer arrives whole', async () => {
  const builtIn = mock.method(globalThis, 'fetch');
  const client = new JsonClient(base, { timeoutMs: LONG, headers: { 'x-auth': 'k' } });
  const got = await client.post<{ method: string; body: string; auth: string }>('/create?delay=300', { template: 'base' });
  assert.deepEqual(got, { method: 'POST', body: JSON.stringify({ template: 'base' }), auth: 'k' });
  assert.equal(builtIn.mock.callCount(), 0);
});

test('a short deadline keeps the built-in fetch', async () => {
  const builtIn = mock.method(globalThis, 'fetch');
  const client = new JsonClient(base, { timeoutMs: 5_000 });
  await client.get('/x');
  assert.equal(builtIn.mock.callCount(), 1);
});

test('a long deadline\'s errors are those of any request: the callee\'s error, an unreachable component', async () => {
  const client = new JsonClient(base, { timeoutMs: LONG });
  await assert.rejects(client.get('/missing'), (e: unknown) => e instanceof SvcError && e.status === 404 && e.message === 'no such thing');
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  await assert.rejects(new JsonClient(`http://127.0.0.1:${port}`, { timeoutMs: LONG }).get('/x'), (e: unknown) => e instanceof UnreachableError && e.status === 503);
});

test('a deadline still ends a request that gets no answer, with a 504', async () => {
  const client = new JsonClient(base);
  await assert.rejects(client.get('/x?delay=2000', { timeoutMs: 200 }), (e: unknown) => e instanceof SvcError && e.status === 504);
});
