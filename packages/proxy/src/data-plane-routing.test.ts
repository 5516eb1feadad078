/**
 * The data-plane proxy finds the sandbox a request names: by Host <port>-<sandboxID>.<domain>
 * or by the e2b SDK's E2b-Sandbox-Id / E2b-Sandbox-Port headers; 400 for none, 404 for an
 * unknown one, 502 for a port with nothing listening; and the headers it adds and drops.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { call, sandboxHost } from './testing/client.ts';
import { closeDataPlane, startDataPlane, type DataPlane } from './testing/data-plane-fixture.ts';
import { Upstream, type Platform } from './testing/harness.ts';

let plane: DataPlane;
let p: Platform;
let up: Upstream;
let other: Upstream;

before(async () => { ({ p, up, other } = plane = await startDataPlane()); });
after(() => closeDataPlane(plane));

test('routes by Host <port>-<sandboxID>.<domain>, the Host port ignored', async () => {
  const r = await call(p.proxy.httpUrl, { host: sandboxHost(up.port, 'sbxa'), path: '/echo?x=1' });
  assert.equal(r.status, 200);
  assert.deepEqual(r.json(), { upstream: 'sbx-a', method: 'GET', url: '/echo?x=1', body: '' });
  const r2 = await call(p.proxy.httpUrl, { host: `${other.port}-sbxb.example.com`, path: '/' });
  assert.equal(r2.json().upstream, 'sbx-b');
});

test('routes by the E2b-Sandbox-Id / E2b-Sandbox-Port headers the e2b SDK sends', async () => {
  const r = await call(p.proxy.httpUrl, { host: 'localhost:3002', path: '/h', headers: { 'E2b-Sandbox-Id': 'sbxb', 'E2b-Sandbox-Port': String(other.port) } });
  assert.equal(r.status, 200);
  assert.equal(r.json().upstream, 'sbx-b');
  // Without a port header the sandbox's envd port is used.
  const r2 = await call(p.proxy.httpUrl, { host: 'localhost:3002', path: '/h', headers: { 'E2b-Sandbox-Id': 'sbxa' } });
  assert.equal(r2.json().upstream, 'sbx-a');
});

test('a request naming no sandbox is 400 and an unknown sandbox 404, both {code, message}', async () => {
  const r = await call(p.proxy.httpUrl, { host: 'localhost:3002' });
  assert.equal(r.status, 400);
  assert.equal(r.json().code, 400);
  assert.match(r.json<{ message: string }>().message, /E2b-Sandbox-Id/);
  // A user port; envd's port answers 502 for a sandbox that is not there (gating.test.ts).
  const r2 = await call(p.proxy.httpUrl, { host: sandboxHost(8000, 'nosuch') });
  assert.equal(r2.status, 404);
  assert.deepEqual(r2.json(), { code: 404, message: 'sandbox nosuch not found' });
  assert.equal(Object.keys(r2.headers).some((h) => /retcode/i.test(h)), false);
});

test('a sandbox port with nothing listening is 502', async () => {
  const closed = new Upstream();
  const port = await closed.listen();
  await closed.close();
  const r = await call(p.proxy.httpUrl, { host: sandboxHost(port, 'sbxa') });
  assert.equal(r.status, 502);
  assert.match(r.json<{ message: string }>().message, new RegExp(`nothing listens on port ${port}`));
});

test('adds X-Forwarded-*, drops hop-by-hop headers, keeps the rest', async () => {
  up.requests.length = 0;
  const r = await call(p.proxy.httpUrl, {
    host: sandboxHost(up.port, 'sbxa'), path: '/hdr',
    headers: { 'X-Forwarded-For': '10.1.1.1', 'Proxy-Authorization': 'Basic x', 'X-Custom': 'kept', Connection: 'keep-alive, X-Drop-Me', 'X-Drop-Me': '1', 'X-Access-Token': 'envd' },
  });
  assert.equal(r.status, 200);
  const h = up.requests[0].headers;
  assert.equal(h['x-forwarded-for'], '10.1.1.1, 127.0.0.1');
  assert.equal(h['x-forwarded-proto'], 'http');
  assert.equal(h['x-forwarded-host'], sandboxHost(up.port, 'sbxa'));
  assert.equal(h['x-custom'], 'kept');
  assert.equal(h['x-access-token'], 'envd');
  assert.equal(h['proxy-authorization'], undefined);
  assert.equal(h['x-drop-me'], undefined);
  assert.equal(h.host, sandboxHost(up.port, 'sbxa'));
});
