import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileSignature } from '@svc/common/envd-signature';
import { call, sandboxHost } from './testing/client.ts';
import { startPlatform, Upstream, type Platform } from './testing/harness.ts';

// The single-URL mode of `svc up`: the SDK's signed file URLs carry no sandbox id at all.
let p: Platform;
const ups: Upstream[] = [];

before(async () => {
  p = await startPlatform();
  for (const name of ['alpha', 'beta']) {
    const up = new Upstream(name);
    await up.listen();
    ups.push(up);
    p.master.add({ sandboxId: name, envdPort: up.port, envdAccessToken: `token-of-${name}` });
  }
  for (let i = 0; i < 50; i++) p.master.add({ sandboxId: `other${i}`, envdPort: 1, envdAccessToken: `token-${i}` });
  p.master.add({ sandboxId: 'insecure', envdPort: 1 });
});
after(async () => {
  await p.close();
  for (const up of ups) await up.close();
});

const nowSec = () => Math.floor(Date.now() / 1000);
function signedUrl(token: string, opts: { path?: string; op?: 'read' | 'write'; user?: string; exp?: number } = {}): string {
  const path = opts.path ?? '/home/user/a.txt';
  const user = opts.user ?? 'user';
  const sig = fileSignature(path, opts.op ?? 'read', user, token, opts.exp);
  const q = new URLSearchParams({ path, username: user, signature: sig });
  if (opts.exp !== undefined) q.set('signature_expiration', String(opts.exp));
  return `/files?${q}`;
}

test('a signed download URL with no sandbox id reaches the sandbox whose token signed it', async () => {
  for (const [name, i] of [['alpha', 0], ['beta', 1]] as const) {
    const url = signedUrl(`token-of-${name}`, { exp: nowSec() + 60 });
    const r = await call(p.proxy.httpUrl, { host: '127.0.0.1:3002', path: url });
    assert.equal(r.status, 200, r.body);
    assert.equal(r.json().upstream, ups[i].name);
    assert.equal(r.json().url, url);
  }
  // Without an expiration, and for an upload (POST, operation write).
  const forever = await call(p.proxy.httpUrl, { host: '127.0.0.1:3002', path: signedUrl('token-of-beta') });
  assert.equal(forever.json().upstream, 'beta');
  const upload = await call(p.proxy.httpUrl, { host: '127.0.0.1:3002', method: 'POST', path: signedUrl('token-of-alpha', { op: 'write' }), body: 'data' });
  assert.equal(upload.status, 200);
  assert.equal(upload.json().upstream, 'alpha');
  assert.equal(upload.json().body, 'data');
});

test('a wrong, expired, tampered or foreign signature is 401 with the JSON body, never 400', async () => {
  const bad = [
    signedUrl('nobody-has-this-token'),
    signedUrl('token-of-alpha', { exp: nowSec() - 5 }),
    signedUrl('token-of-alpha', { op: 'write' }), // signed for an upload, used for a download
    signedUrl('token-of-alpha').replace('a.txt', 'b.txt'),
    '/files?signature=v1_garbage',
    '/files?path=&signature=',
  ];
  for (const url of bad) {
    const r = await call(p.proxy.httpUrl, { host: '127.0.0.1:3002', path: url });
    assert.equal(r.status, 401, url);
    assert.equal(r.json().code, 401);
  }
  const expired = await call(p.proxy.httpUrl, { host: '127.0.0.1:3002', path: signedUrl('token-of-alpha', { exp: nowSec() - 5 }) });
  assert.match(expired.json<{ message: string }>().message, /expired/);
  for (const up of ups) assert.ok(!up.requests.some((r) => r.url.includes('b.txt') || r.url.includes('garbage')), 'nothing refused reached a sandbox');
  // A request that names no sandbox and is not a signed file URL stays a 400.
  assert.equal((await call(p.proxy.httpUrl, { host: '127.0.0.1:3002', path: '/files?path=/etc/passwd' })).status, 400);
});

test('a signed URL of a sandbox that was killed since is 401: a terminated sandbox signs nothing', async () => {
  p.master.set('beta', { state: 'terminated', terminateReason: 'killed' });
  const r = await call(p.proxy.httpUrl, { host: '127.0.0.1:3002', path: signedUrl('token-of-beta', { path: '/x' }) });
  assert.equal(r.status, 401, 'a terminated sandbox signs nothing any more');
  p.master.set('beta', { state: 'running', terminateReason: undefined });
});

test('envd\'s port of a secured sandbox: a CORS preflight passes without the token (browsers never send it there), anything else is 401 readable by any origin', async () => {
  const pre = await call(p.proxy.httpUrl, { host: sandboxHost(ups[0].port, 'alpha'), method: 'OPTIONS', path: '/process.Process/Start', headers: { Origin: 'http://127.0.0.1:3000', 'Access-Control-Request-Method': 'POST' } });
  assert.equal(pre.status, 200, pre.body);
  assert.equal(pre.json().upstream, 'alpha', 'the preflight reached envd');
  const post = await call(p.proxy.httpUrl, { host: sandboxHost(ups[0].port, 'alpha'), method: 'POST', path: '/process.Process/Start', headers: { Origin: 'http://127.0.0.1:3000' }, body: '{}' });
  assert.equal(post.status, 401);
  assert.equal(post.headers['access-control-allow-origin'], '*');
});


test('a client that sends many signatures no sandbox made gets 429s, and costs the master no more look-ups; other clients are served', async () => {
  const from = (localAddress: string, url: string) => call(p.proxy.httpUrl, { host: '127.0.0.1:3002', path: url, localAddress });
  const good = signedUrl('token-of-alpha', { path: '/budget.txt' });
  assert.equal((await from('127.0.0.3', good)).status, 200, 'a URL the client used before the flood');
  const before = p.master.calls.signatureLookups;
  const statuses: number[] = [];
  for (let i = 0; i < 25; i++) statuses.push((await from('127.0.0.3', signedUrl(`made-up-${i}`))).status);
  assert.deepEqual(statuses, [...Array(20).fill(401), ...Array(5).fill(429)]);
  assert.equal(p.master.calls.signatureLookups - before, 20, 'the refused ones never reached the master');
  const refused = await from('127.0.0.3', signedUrl('made-up-again'));
  assert.equal(refused.headers['retry-after'], '10');
  assert.equal(refused.json().code, 429);
  assert.equal((await from('127.0.0.3', good)).status, 200, 'a URL it had used still works: it is remembered');
  assert.equal((await from('127.0.0.4', signedUrl('token-of-beta', { path: '/other-client.txt' }))).status, 200, 'another client is not held');
  assert.equal((await from('127.0.0.4', signedUrl('made-up-by-another'))).status, 401);
});
