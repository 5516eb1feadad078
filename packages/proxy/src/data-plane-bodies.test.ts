/**
 * Bodies through the data-plane proxy: a streamed response and a streamed request body pass
 * chunk by chunk, an answer before the upload was read reaches the client after its whole
 * upload, Content-Length and HEAD answers, and large bodies both ways under backpressure.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { uploadThenRead } from '@svc/common/upload-then-read';
import { call, sandboxHost } from './testing/client.ts';
import { closeDataPlane, startDataPlane, waitFor, type DataPlane } from './testing/data-plane-fixture.ts';
import { Upstream, type Platform } from './testing/harness.ts';

let plane: DataPlane;
let p: Platform;
let up: Upstream;

before(async () => { ({ p, up } = plane = await startDataPlane()); });
after(() => closeDataPlane(plane));

test('a streamed response reaches the client chunk by chunk, unbuffered', async () => {
  up.armStream();
  const port = Number(new URL(p.proxy.httpUrl).port);
  const firstChunk = await new Promise<{ first: string; rest: Promise<string>; headers: Record<string, unknown> }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/stream', headers: { host: sandboxHost(up.port, 'sbxa') } }, (res) => {
      let rest = '';
      const done = new Promise<string>((r) => res.on('end', () => r(rest)));
      res.once('data', (c: Buffer) => {
        res.on('data', (d: Buffer) => { rest += d.toString(); });
        resolve({ first: c.toString(), rest: done, headers: res.headers });
      });
    });
    req.on('error', reject);
    req.end();
  });
  // The upstream has not sent its last chunk yet: it waits for releaseStream().
  assert.equal(firstChunk.first, 'first;');
  assert.equal(firstChunk.headers['transfer-encoding'], 'chunked');
  up.releaseStream();
  assert.equal(await firstChunk.rest, 'last');
});

test('a request body is streamed to the sandbox as it is sent', async () => {
  const port = Number(new URL(p.proxy.httpUrl).port);
  const seen: string[] = [];
  const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/upload', headers: { host: sandboxHost(up.port, 'sbxa'), 'transfer-encoding': 'chunked' } });
  const done = new Promise<void>((resolve, reject) => {
    req.on('response', (res) => {
      res.on('data', (c: Buffer) => seen.push(c.toString()));
      res.on('end', () => resolve());
    });
    req.on('error', reject);
  });
  req.write('one');
  await waitFor(() => seen.join('').includes('got:one;'));
  req.write('two');
  await waitFor(() => seen.join('').includes('got:two;'));
  req.end();
  await done;
  assert.equal(seen.join(''), 'got:one;got:two;end');
});

test('a backend that answers before reading the upload: the client, kept alive or closing, reads the answer after its whole upload', async () => {
  const port = Number(new URL(p.proxy.httpUrl).port);
  const body = Buffer.alloc(8 * 1024 * 1024, 'x');
  up.custom = (req, res) => {
    if (req.url !== '/too-big') return false;
    // Answers at once and then reads the rest (as envd does for an oversized /init).
    res.writeHead(413, { 'content-type': 'application/json', 'content-length': '17' });
    res.end('{"code":413,"m":1}'.slice(0, 17));
    req.resume();
    return true;
  };
  try {
    // A client that sends its whole upload before it reads anything, on a connection it closes
    // after this request: the answer must survive until then (a reset would discard it).
    for (let i = 0; i < 3; i++) {
      const answer = await uploadThenRead({ port, method: 'POST', path: '/too-big', headers: { Host: sandboxHost(up.port, 'sbxa') }, body });
      assert.equal(answer, 'HTTP/1.1 413 Payload Too Large', `#${i}`);
    }
  } finally {
    up.custom = undefined;
  }
});

test('POST with Content-Length arrives whole', async () => {
  const r = await call(p.proxy.httpUrl, { method: 'POST', host: sandboxHost(up.port, 'sbxa'), path: '/echo', body: 'hello body', headers: { 'content-type': 'text/plain' } });
  assert.equal(r.json().body, 'hello body');
});

test('HEAD answers pass through without a body', async () => {
  const r = await call(p.proxy.httpUrl, { method: 'HEAD', host: sandboxHost(up.port, 'sbxa'), path: '/echo' });
  assert.equal(r.status, 200);
  assert.ok(Number(r.headers['content-length']) > 0);
  assert.equal(r.body, '');
});

test('large bodies both ways survive backpressure intact', async () => {
  const big = new Upstream('big');
  const download = Buffer.alloc(16 * 1024 * 1024);
  for (let i = 0; i < download.length; i += 4096) download.writeUInt32BE(i, i);
  big.custom = (req, res) => {
    if (req.url === '/download') { res.writeHead(200, { 'content-length': download.length }); res.end(download); return true; }
    if (req.url === '/upload-hash') {
      const h = createHash('sha256');
      let n = 0;
      req.on('data', (c: Buffer) => { h.update(c); n += c.length; });
      req.on('end', () => res.end(JSON.stringify({ n, sha: h.digest('hex') })));
      return true;
    }
    return false;
  };
  await big.listen();
  p.master.add({ sandboxId: 'big', envdPort: big.port });
  const port = Number(new URL(p.proxy.httpUrl).port);
  const got = await new Promise<Buffer>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/download', headers: { 'E2b-Sandbox-Id': 'big' } }, (res) => {
      const chunks: Buffer[] = [];
      // A slow reader: pause now and then so the proxy must hold the backend back.
      res.on('data', (c: Buffer) => { chunks.push(c); if (chunks.length % 50 === 0) { res.pause(); setTimeout(() => res.resume(), 5); } });
      res.on('end', () => resolve(Buffer.concat(chunks)));
    });
    req.on('error', reject);
    req.end();
  });
  assert.equal(got.length, download.length);
  assert.ok(got.equals(download));
  for (const chunked of [false, true]) {
    const reply = await new Promise<{ n: number; sha: string }>((resolve, reject) => {
      const headers: Record<string, string> = { 'E2b-Sandbox-Id': 'big' };
      if (!chunked) headers['content-length'] = String(download.length);
      const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/upload-hash', headers }, (res) => {
        let body = '';
        res.on('data', (d) => { body += d; });
        res.on('end', () => resolve(JSON.parse(body)));
      });
      req.on('error', reject);
      for (let i = 0; i < download.length; i += 1024 * 1024) req.write(download.subarray(i, i + 1024 * 1024));
      req.end();
    });
    assert.equal(reply.n, download.length);
    assert.equal(reply.sha, createHash('sha256').update(download).digest('hex'), chunked ? 'chunked upload' : 'content-length upload');
  }
  await big.close();
});
