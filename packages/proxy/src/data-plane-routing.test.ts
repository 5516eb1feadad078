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

test('sets X-Forwarded-* in place of the client\'s, drops hop-by-hop headers, keeps the rest', async () => {
  up.requests.length = 0;
  const r = await call(p.proxy.httpUrl, {
    host: sandboxHost(up.port, 'sbxa'), path: '/hdr',
    headers: { 'X-Forwarded-For': '10.1.1.1', 'Proxy-Authorization': 'Basic x', 'X-Custom': 'kept', Connection: 'keep-alive, X-Drop-Me', 'X-Drop-Me': '1', 'X-Access-Token': 'envd' },
  });
  assert.equal(r.status, 200);
  const h = up.requests[0].headers;
  assert.equal(h['x-forwarded-for'], '127.0.0.1', 'the client\'s address alone: the proxy trusts no X-Forwarded-For it is sent');
  assert.equal(h['x-forwarded-proto'], 'http');
  assert.equal(h['x-forwarded-host'], sandboxHost(up.port, 'sbxa'));
  assert.equal(h['x-custom'], 'kept');
  assert.equal(h['x-access-token'], 'envd');
  assert.equal(h['proxy-authorization'], undefined);
  assert.equal(h['x-drop-me'], undefined);
  assert.equal(h.host, sandboxHost(up.port, 'sbxa'));
});

test('the E2b-Sandbox-* headers win over a Host that seems to name a sandbox, and the answer varies on them', async () => {
  // E2B_SANDBOX_URL=http://192-168-1-10.sslip.io:3002: the proxy's own name reads as port 192 of
  // sandbox 168-1-10, and the official SDK sends the headers with every envd call.
  const r = await call(p.proxy.httpUrl, { host: '192-168-1-10.sslip.io:3002', path: '/h', headers: { 'E2b-Sandbox-Id': 'sbxb', 'E2b-Sandbox-Port': String(other.port) } });
  assert.equal(r.status, 200);
  assert.equal(r.json().upstream, 'sbx-b');
  assert.equal(r.headers.vary, 'E2b-Sandbox-Id, E2b-Sandbox-Port');
  // A Host in the form of a sandbox's that is no issued id: the headers decide, and a cache in front keys on them (Vary).
  const other2 = await call(p.proxy.httpUrl, { host: sandboxHost(up.port, 'sbxa'), headers: { 'E2b-Sandbox-Id': 'sbxb', 'E2b-Sandbox-Port': String(other.port) } });
  assert.equal(other2.json().upstream, 'sbx-b');
  assert.equal(other2.headers.vary, 'E2b-Sandbox-Id, E2b-Sandbox-Port');
  const byHost = await call(p.proxy.httpUrl, { host: sandboxHost(up.port, 'sbxa') });
  assert.equal(byHost.json().upstream, 'sbx-a');
  assert.equal(byHost.headers.vary, undefined, 'routed by Host: nothing to vary on');
});

test('a Host naming one issued sandbox and E2b-Sandbox-Id another is a 400, so no cache can file one\'s answer under the other\'s name', async () => {
  const victim = 'ivictim0000000000001';
  const attacker = 'iattacker00000000001';
  p.master.add({ sandboxId: victim, envdPort: up.port });
  p.master.add({ sandboxId: attacker, envdPort: other.port });
  const seen = up.requests.length + other.requests.length;
  const r = await call(p.proxy.httpUrl, { host: sandboxHost(8000, victim), path: '/app.js', headers: { 'E2b-Sandbox-Id': attacker, 'E2b-Sandbox-Port': String(other.port) } });
  assert.equal(r.status, 400);
  assert.equal(r.json().code, 400);
  assert.match(r.json<{ message: string }>().message, /Host names sandbox ivictim0000000000001 and the E2b-Sandbox-Id header sandbox iattacker00000000001/);
  assert.equal(up.requests.length + other.requests.length, seen, 'nothing reached a sandbox');
  // The official SDK by name: Host and headers name the same sandbox.
  const same = await call(p.proxy.httpUrl, { host: sandboxHost(other.port, attacker), path: '/h', headers: { 'E2b-Sandbox-Id': attacker, 'E2b-Sandbox-Port': String(other.port) } });
  assert.equal(same.json().upstream, 'sbx-b');
});

test('a sandbox id in upper case, by Host or header, is the lower-case sandbox: one cached route, one look-up', async () => {
  const id = 'icased00000000000001';
  p.master.add({ sandboxId: id, envdPort: up.port });
  p.master.resetCalls();
  const byHost = await call(p.proxy.httpUrl, { host: sandboxHost(up.port, id.toUpperCase()), path: '/h' });
  assert.equal(byHost.json().upstream, 'sbx-a');
  const byHeader = await call(p.proxy.httpUrl, { host: 'localhost:3002', path: '/h', headers: { 'E2b-Sandbox-Id': 'ICASED00000000000001', 'E2b-Sandbox-Port': String(up.port) } });
  assert.equal(byHeader.json().upstream, 'sbx-a');
  assert.equal((await call(p.proxy.httpUrl, { host: sandboxHost(up.port, id), path: '/h' })).json().upstream, 'sbx-a');
  assert.deepEqual(p.master.calls.route, [id], 'looked up once, by its lower-case id');
});

test('an answer routed by the E2b headers varies on them, after any Vary of the sandbox\'s', async () => {
  other.custom = (req, res) => {
    if (req.url !== '/varies') return false;
    res.writeHead(200, { Vary: 'Accept-Encoding', 'Content-Length': '2' });
    res.end('ok');
    return true;
  };
  const headers = { 'E2b-Sandbox-Id': 'sbxb', 'E2b-Sandbox-Port': String(other.port) };
  const plain = await call(p.proxy.httpUrl, { host: 'localhost:3002', path: '/h', headers });
  assert.equal(plain.json().upstream, 'sbx-b');
  assert.equal(plain.headers.vary, 'E2b-Sandbox-Id, E2b-Sandbox-Port');
  const own = await call(p.proxy.httpUrl, { host: 'localhost:3002', path: '/varies', headers });
  assert.equal(own.headers.vary, 'Accept-Encoding, E2b-Sandbox-Id, E2b-Sandbox-Port');
});

test('an absolute-form request target naming another host than Host is a 400; the same host is forwarded', async () => {
  const seen = up.requests.length + other.requests.length;
  const r = await call(p.proxy.httpUrl, { host: sandboxHost(other.port, 'sbxb'), path: `http://${sandboxHost(up.port, 'sbxa')}/app.js` });
  assert.equal(r.status, 400);
  assert.match(r.json<{ message: string }>().message, /Host/);
  assert.equal(up.requests.length + other.requests.length, seen);
  // Host names compare without case, the sandbox id in them too.
  const same = await call(p.proxy.httpUrl, { host: sandboxHost(up.port, 'sbxa'), path: `http://${sandboxHost(up.port, 'sbxa').toUpperCase()}/app.js` });
  assert.equal(same.json().upstream, 'sbx-a');
  // A default port spelled in one of them, or userinfo, names the same host.
  const port80 = await call(p.proxy.httpUrl, { host: `${up.port}-sbxa.sandbox.test`, path: `http://u@${up.port}-sbxa.sandbox.test:80/app.js` });
  assert.equal(port80.json().upstream, 'sbx-a');
});
