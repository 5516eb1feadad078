import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { CLUSTER_TOKEN_HEADER } from '@svc/contracts/cluster-token';
import type { SvcError } from '@svc/common';
import { downloadDeadlineMs, downloadVerified } from './verified-download.ts';

const BODY = Buffer.from('the layer\'s bytes\n');
const WANT = { sha256: createHash('sha256').update(BODY).digest('hex'), sizeBytes: BODY.length };

/** A server that records each request's headers, and serves BODY or a redirect. */
async function server(answer: (path: string) => { redirect: string } | { body: Buffer }): Promise<{ url: string; seen: Array<{ path: string; headers: IncomingHttpHeaders }>; srv: Server }> {
  const seen: Array<{ path: string; headers: IncomingHttpHeaders }> = [];
  const srv = createServer((req, res) => {
    seen.push({ path: req.url!, headers: req.headers });
    const a = answer(req.url!);
    if ('redirect' in a) res.writeHead(307, { location: a.redirect }).end();
    else res.writeHead(200, { 'content-length': a.body.length }).end(a.body);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, seen, srv };
}

test('cluster_token goes to the master (its origin, or a download route of another master: each master names its own address) and never to the store a redirect names', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-download-'));
  const store = await server(() => ({ body: BODY }));
  const otherMaster = await server(() => ({ body: BODY }));
  const master = await server((path) => (path.startsWith('/internal/v1/layers/') ? { redirect: `${store.url}/bucket/layer?X-Amz-Signature=abc` } : { body: BODY }));
  const on = { baseUrl: master.url, clusterToken: 'the-cluster-token' };
  try {
    await downloadVerified('artifact', '/svc/template/artifact/download?artifact_id=a1', on, join(dir, 'a'), WANT);
    await downloadVerified('layer', `${master.url}/internal/v1/layers/l1`, on, join(dir, 'b'), WANT);
    await downloadVerified('exec input', `${otherMaster.url}/internal/v1/template-files/team/${'a'.repeat(64)}`, on, join(dir, 'c'), WANT);
    await downloadVerified('layer', `${otherMaster.url}/internal/v1/layers/l2`, on, join(dir, 'e'), WANT);
    await downloadVerified('elsewhere', `${otherMaster.url}/some/file`, on, join(dir, 'd'), WANT);
    assert.deepEqual(readFileSync(join(dir, 'b')), BODY);

    assert.deepEqual(master.seen.map((s) => s.headers[CLUSTER_TOKEN_HEADER]), ['the-cluster-token', 'the-cluster-token']);
    assert.deepEqual(store.seen.map((s) => [s.path, s.headers[CLUSTER_TOKEN_HEADER]]), [['/bucket/layer?X-Amz-Signature=abc', undefined]], 'the redirect is followed without the token');
    assert.deepEqual(otherMaster.seen.map((s) => [s.path.split('/').slice(0, 4).join('/'), s.headers[CLUSTER_TOKEN_HEADER]]),
      [['/internal/v1/template-files', 'the-cluster-token'], ['/internal/v1/layers', 'the-cluster-token'], ['/some/file', undefined]]);
  } finally {
    for (const s of [store, otherMaster, master]) s.srv.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('without cluster_token nothing is added, and a redirect is followed as before', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-download-'));
  const store = await server(() => ({ body: BODY }));
  const master = await server(() => ({ redirect: `${store.url}/presigned` }));
  try {
    await downloadVerified('layer', '/internal/v1/layers/l1', { baseUrl: master.url }, join(dir, 'a'), WANT);
    assert.equal(master.seen[0]!.headers[CLUSTER_TOKEN_HEADER], undefined);
    assert.equal(store.seen.length, 1);
  } finally {
    for (const s of [store, master]) s.srv.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a body past the expected size is cut there, not written whole before the check', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-download-'));
  const chunk = Buffer.alloc(1024 * 1024, 1);
  // 64 MiB for a blob said to be 10 bytes.
  const srv = createServer((_req, res) => {
    let n = 0;
    const more = () => { while (n < 64) { n++; if (!res.write(chunk)) return void res.once('drain', more); } res.end(); };
    more();
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  try {
    const dest = join(dir, 'x');
    await assert.rejects(
      downloadVerified('layer x', `http://127.0.0.1:${(srv.address() as AddressInfo).port}/`, undefined, dest, { sha256: 'a'.repeat(64), sizeBytes: 10 }),
      (e: SvcError) => e.status === 502 && /passed the 10 bytes expected/.test(e.message),
    );
    // Cut before its file was even opened, the download leaves none (seen in .ci/run): 0 bytes then.
    const written = existsSync(dest) ? statSync(dest).size : 0;
    assert.ok(written <= 10, `${written} bytes were written`);
  } finally {
    srv.closeAllConnections();
    srv.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a source that stalls is given up at the download\'s deadline (504), not waited on for ever', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-download-'));
  // Headers and a first chunk, then nothing, the connection left open.
  const srv = createServer((_req, res) => { res.writeHead(200, { 'content-length': WANT.sizeBytes }); res.write(BODY.subarray(0, 4)); });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  try {
    const started = Date.now();
    await assert.rejects(
      downloadVerified('layer x', `http://127.0.0.1:${(srv.address() as AddressInfo).port}/`, undefined, join(dir, 'x'), WANT, 300),
      (e: SvcError) => e.status === 504 && /did not finish within 1 s \(4 of \d+ bytes arrived\)/.test(e.message),
    );
    assert.ok(Date.now() - started < 5_000);
    assert.equal(downloadDeadlineMs(100 * 1024 * 1024), 160_000, 'a minute and a second per MiB');
  } finally {
    srv.closeAllConnections();
    srv.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a failed download names the master\'s path, never an address or a presigned query, as a team reads it when its create fails', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-download-'));
  const closed = await server(() => ({ body: BODY }));
  const base = closed.url;
  await new Promise<void>((r) => closed.srv.close(() => r()));
  const refusing = await server(() => ({ body: BODY }));
  refusing.srv.removeAllListeners('request');
  refusing.srv.on('request', (_req, res) => res.writeHead(404).end());
  const port = (u: string) => new URL(u).port;
  try {
    const master = { baseUrl: base, clusterToken: 't' };
    await assert.rejects(downloadVerified('layer x', '/internal/v1/layers/l1', master, join(dir, 'x'), WANT), (e: SvcError) => {
      assert.equal(e.status, 502);
      assert.equal(e.message, 'layer x: download from the master (/internal/v1/layers/l1) failed: ECONNREFUSED');
      return true;
    });
    await assert.rejects(downloadVerified('artifact a', `${refusing.url}/bucket/a.tar?X-Amz-Signature=secret`, undefined, join(dir, 'y'), WANT), (e: SvcError) => {
      assert.equal(e.message, 'artifact a: download from the artifact store (/bucket/a.tar) answered 404');
      assert.doesNotMatch(e.message, new RegExp(`127\\.0\\.0\\.1|:${port(refusing.url)}|secret`));
      return true;
    });
  } finally {
    refusing.srv.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a download URL that is no URL is the caller\'s error (400), not a crash (500) nor a failed download', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-download-'));
  try {
    for (const url of ['\u0000', ' \t\r\n', 'http://', 'file://other-host/etc/passwd']) {
      await assert.rejects(downloadVerified('artifact a', url, undefined, join(dir, 'x'), WANT), (e: SvcError) => {
        assert.equal(e.status, 400, `${JSON.stringify(url)}: ${e.message}`);
        assert.match(e.message, /^artifact a: its download URL is not a URL this node can read/);
        return true;
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
