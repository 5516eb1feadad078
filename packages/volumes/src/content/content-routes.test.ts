import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { chmod, mkdir, readFile, readdir, stat, symlink, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { Volume, VolumeError, VolumePathNotFoundError } from 'e2b';
import { createHttpApp, notFound, silentLogger } from '@svc/common';
import { registerVolumeContentRoutes, type VolumeContentRouteOptions } from './content-routes.ts';
import { makeSandbox, names, type Sandbox } from './test-support.ts';

let sb: Sandbox;
let app: FastifyInstance;
/** Per volume id: opens and releases seen; release must follow every open exactly once. */
let opened: { id: string; auth: string | undefined }[];
let released: number;

async function setup(extra: Partial<VolumeContentRouteOptions> = {}): Promise<void> {
  app = createHttpApp({ logger: silentLogger() });
  await registerVolumeContentRoutes(app, {
    prefix: '/volumecontent',
    open: async (id, req) => {
      if (id !== 'vol1') throw notFound(`volume ${id} not found`);
      opened.push({ id, auth: req.headers.authorization });
      return { root: sb.root, release: async () => { released++; } };
    },
    ...extra,
  });
  // A sibling route: its JSON parsing must be unaffected by the upload route's raw parser.
  app.put('/other', async (req) => ({ got: req.body }));
  await app.ready();
}

beforeEach(async () => {
  sb = await makeSandbox();
  opened = [];
  released = 0;
});
afterEach(async () => {
  await app?.close();
  await sb.cleanup();
});

/** Waits until every open has been released (downloads release when their response closes). */
async function allReleased(): Promise<void> {
  for (let i = 0; i < 200 && released < opened.length; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(released, opened.length, 'every opened volume is released once');
}

describe('through the official e2b SDK (Volume with apiUrl)', () => {
  test('list, makeDir, getInfo, exists, updateMetadata, readFile, writeFile, remove', async () => {
    await setup();
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    const vol = new Volume('vol1', 'vol1', 'vol-token', undefined, false);
    const o = { apiUrl: url };

    // writeFile: a string, then bytes, a Blob and a ReadableStream.
    const w = await vol.writeFile('/test.txt', 'Hello, World!', o);
    assert.equal(w.name, 'test.txt');
    assert.equal(w.type, 'file');
    assert.equal(w.path, '/test.txt');
    assert.ok(w.mtime instanceof Date && !Number.isNaN(w.mtime.getTime()));
    assert.equal(await readFile(join(sb.root, 'test.txt'), 'utf8'), 'Hello, World!');
    await vol.writeFile('/bin.bin', new Uint8Array([0, 1, 2, 3, 4]).buffer, o);
    await vol.writeFile('/blob.txt', new Blob(['Test blob content']), o);
    const big = Buffer.alloc(3 * 1024 * 1024, 0x62); // over the app's 1 MiB JSON body limit
    const stream = new ReadableStream<Uint8Array>({
      start(c) { c.enqueue(new Uint8Array(big.subarray(0, 1000))); c.enqueue(new Uint8Array(big.subarray(1000))); c.close(); },
    });
    assert.equal((await vol.writeFile('/stream.txt', stream, o)).size, big.length);
    assert.ok((await readFile(join(sb.root, 'stream.txt'))).equals(big));
    await vol.writeFile('/empty.txt', '', o);

    // force: false (the default) refuses an existing file; force: true replaces it.
    await assert.rejects(vol.writeFile('/test.txt', 'New', { ...o, force: false }), VolumeError);
    await assert.rejects(vol.writeFile('/test.txt', 'New', o), VolumeError);
    await vol.writeFile('/test.txt', 'New content', { ...o, force: true, uid: 1000, gid: 1000, mode: 0o644 });

    // readFile: text, bytes, blob, stream, empty.
    assert.equal(await vol.readFile('/test.txt', o), 'New content');
    assert.equal(await vol.readFile('/test.txt', { ...o, format: 'text' }), 'New content');
    assert.deepEqual(await vol.readFile('/bin.bin', { ...o, format: 'bytes' }), new Uint8Array([0, 1, 2, 3, 4]));
    assert.equal(await (await vol.readFile('/blob.txt', { ...o, format: 'blob' })).text(), 'Test blob content');
    const rs = await vol.readFile('/stream.txt', { ...o, format: 'stream' });
    let n = 0;
    for await (const chunk of rs as unknown as AsyncIterable<Uint8Array>) n += chunk.length;
    assert.equal(n, big.length);
    assert.equal(await vol.readFile('/empty.txt', o), '');
    assert.equal((await vol.readFile('/empty.txt', { ...o, format: 'bytes' })).length, 0);
    await assert.rejects(vol.readFile('/nope.txt', o), VolumePathNotFoundError);

    // makeDir.
    const d = await vol.makeDir('/dir-with-metadata', { ...o, uid: 1000, gid: 1000, mode: 0o755 });
    assert.deepEqual([d.type, d.uid, d.gid, d.mode & 0o777], ['directory', 1000, 1000, 0o755]);
    await assert.rejects(vol.makeDir('/dir-with-metadata', { ...o, force: false }), VolumeError);
    assert.equal((await vol.makeDir('/nested/deep/directory', { ...o, force: true })).type, 'directory');
    await assert.rejects(vol.makeDir('/missing/parent', o), VolumePathNotFoundError);
    await vol.writeFile('/nested/deep/directory/file.txt', 'Nested', o);

    // getInfo and exists.
    const info = await vol.getInfo('/test.txt', o);
    assert.deepEqual([info.name, info.type, info.path, info.uid, info.mode], ['test.txt', 'file', '/test.txt', 1000, 0o644]);
    assert.ok(info.ctime instanceof Date);
    assert.equal((await vol.getInfo('/nested', o)).type, 'directory');
    assert.equal(await vol.exists('/test.txt', o), true);
    assert.equal(await vol.exists('/non-existent.txt', o), false);

    // updateMetadata.
    const u = await vol.updateMetadata('/test.txt', { uid: 1001, gid: 1002, mode: 0o755 }, o);
    assert.deepEqual([u.path, u.type, u.uid, u.gid, u.mode], ['/test.txt', 'file', 1001, 1002, 0o755]);
    assert.equal((await vol.updateMetadata('/test.txt', { mode: 0o600 }, o)).uid, 1001);
    await assert.rejects(vol.updateMetadata('/non-existent.txt', { mode: 0o644 }, o), VolumePathNotFoundError);

    // list.
    const root = await vol.list('/', o);
    assert.deepEqual(root.map((e) => e.name), ['bin.bin', 'blob.txt', 'dir-with-metadata', 'empty.txt', 'nested', 'stream.txt', 'test.txt']);
    assert.deepEqual((await vol.list('/nested', { ...o, depth: 3 })).map((e) => e.path),
      ['/nested/deep', '/nested/deep/directory', '/nested/deep/directory/file.txt']);
    await assert.rejects(vol.list('/non-existent', o), VolumePathNotFoundError);
    await assert.rejects(vol.list('/', { ...o, depth: 11 }), (e: Error) => e instanceof VolumeError && /depth/.test(e.message));

    // remove.
    await vol.remove('/test.txt', o);
    assert.equal(await vol.exists('/test.txt', o), false);
    await vol.remove('/nested', o);
    assert.equal(await vol.exists('/nested', o), false);
    await assert.rejects(vol.remove('/non-existent.txt', o), VolumePathNotFoundError);
    await assert.rejects(vol.remove('/', o), VolumeError);

    // A symlink planted by a sandbox is shown, not followed.
    await symlink(sb.outside, join(sb.root, 'escape'));
    await writeFile(join(sb.outside, 'secret'), 'secret');
    const esc = await vol.getInfo('/escape', o);
    assert.deepEqual([esc.type, esc.target], ['symlink', sb.outside]);
    await assert.rejects(vol.readFile('/escape/secret', o), (e: Error) => e instanceof VolumeError && /symlink/.test(e.message));
    await assert.rejects(vol.writeFile('/escape/x', 'x', o), VolumeError);
    assert.deepEqual(await names(sb.outside), ['secret']);

    assert.ok(opened.every((x) => x.id === 'vol1' && x.auth === 'Bearer vol-token'), 'the token reaches open()');
    await allReleased();
  });
});

describe('the routes (inject)', () => {
  test('statuses: 201 for POST dir and PUT file, 204 for DELETE, 200 otherwise', async () => {
    await setup();
    const post = await app.inject({ method: 'POST', url: '/volumecontent/vol1/dir?path=/d&mode=448&uid=5&gid=6' });
    assert.equal(post.statusCode, 201);
    assert.deepEqual(((b) => [b.path, b.mode, b.uid, b.gid])(post.json()), ['/d', 0o700, 5, 6]);
    const put = await app.inject({ method: 'PUT', url: '/volumecontent/vol1/file?path=d/f', headers: { 'content-type': 'application/octet-stream' }, payload: 'abc' });
    assert.equal(put.statusCode, 201);
    assert.equal(put.json().size, 3);
    const get = await app.inject({ method: 'GET', url: '/volumecontent/vol1/file?path=/d/f' });
    assert.equal(get.statusCode, 200);
    assert.equal(get.headers['content-type'], 'application/octet-stream');
    assert.equal(get.headers['content-length'], '3');
    assert.equal(get.body, 'abc');
    assert.equal((await app.inject({ method: 'GET', url: '/volumecontent/vol1/path?path=/d/f' })).statusCode, 200);
    assert.equal((await app.inject({ method: 'GET', url: '/volumecontent/vol1/dir?path=/' })).json().length, 1);
    const patch = await app.inject({ method: 'PATCH', url: '/volumecontent/vol1/path?path=/d/f', payload: { mode: 0o600 } });
    assert.equal(patch.statusCode, 200);
    assert.equal(patch.json().mode, 0o600);
    const del = await app.inject({ method: 'DELETE', url: '/volumecontent/vol1/path?path=/d' });
    assert.equal(del.statusCode, 204);
    assert.equal(del.body, '');
    assert.deepEqual(await readdir(sb.root), []);
    await allReleased();
  });

  test('errors are {code, message} with code = status', async () => {
    await setup();
    const r = await app.inject({ method: 'GET', url: '/volumecontent/vol1/path?path=/nope' });
    assert.equal(r.statusCode, 404);
    assert.deepEqual(r.json(), { code: 404, message: 'failed to stat: "/nope" not found' });
    const c = await app.inject({ method: 'POST', url: '/volumecontent/vol1/dir?path=/' });
    assert.deepEqual([c.statusCode, c.json().code], [409, 409]);
    const unknown = await app.inject({ method: 'GET', url: '/volumecontent/other/path?path=/' });
    assert.deepEqual([unknown.statusCode, unknown.json().message], [404, 'volume other not found']);
    await allReleased();
  });

  test('query validation is 400 and opens no volume', async () => {
    await setup();
    const bad = [
      ['GET', '/volumecontent/vol1/path'],
      ['GET', '/volumecontent/vol1/path?path='],
      ['GET', '/volumecontent/vol1/path?path=a&path=b'],
      ['GET', '/volumecontent/vol1/path?path=%00'],
      ['GET', '/volumecontent/vol1/dir?path=/&depth=11'],
      ['GET', '/volumecontent/vol1/dir?path=/&depth=-1'],
      ['GET', '/volumecontent/vol1/dir?path=/&depth=x'],
      ['POST', '/volumecontent/vol1/dir?path=/d&uid=4294967296'],
      ['POST', '/volumecontent/vol1/dir?path=/d&gid=1.5'],
      ['POST', '/volumecontent/vol1/dir?path=/d&mode=4096'],
      ['POST', '/volumecontent/vol1/dir?path=/d&mode=0x1ff'],
      ['POST', '/volumecontent/vol1/dir?path=/d&force=yes'],
      ['PUT', '/volumecontent/vol1/file?path=/f&force=1'],
      ['DELETE', '/volumecontent/vol1/path?path=/'],
    ] as const;
    for (const [method, url] of bad) {
      const r = await app.inject({ method, url, ...(method === 'PUT' ? { payload: 'x', headers: { 'content-type': 'application/octet-stream' } } : {}) });
      assert.equal(r.statusCode, 400, `${method} ${url}: ${r.body}`);
      assert.equal(r.json().code, 400);
    }
    // Only the root's deletion is refused by the content itself, once the volume is open.
    assert.equal(opened.length, 1);
    // depth 10, the largest uid and the largest mode are accepted.
    assert.equal((await app.inject({ method: 'GET', url: '/volumecontent/vol1/dir?path=/&depth=10' })).statusCode, 200);
    assert.equal((await app.inject({ method: 'POST', url: '/volumecontent/vol1/dir?path=/d&uid=4294967294&mode=4095&force=true' })).statusCode, 201);
    assert.equal((await stat(join(sb.root, 'd'))).uid, 4294967294);
    await allReleased();
  });

  test('PATCH bodies: non-object or out-of-range values are 400; empty only stats', async () => {
    await setup();
    await writeFile(join(sb.root, 'f'), '');
    await chmod(join(sb.root, 'f'), 0o644);
    for (const payload of ['[1]', '"x"', '{"mode":-1}', '{"uid":"1"}', '{"mode":4096}', '{"gid":1.5}']) {
      const r = await app.inject({ method: 'PATCH', url: '/volumecontent/vol1/path?path=/f', headers: { 'content-type': 'application/json' }, payload });
      assert.equal(r.statusCode, 400, payload);
    }
    const empty = await app.inject({ method: 'PATCH', url: '/volumecontent/vol1/path?path=/f', headers: { 'content-type': 'application/json' }, payload: '' });
    assert.deepEqual([empty.statusCode, empty.json().mode], [200, 0o644]);
    const nulls = await app.inject({ method: 'PATCH', url: '/volumecontent/vol1/path?path=/f', payload: { uid: null, mode: 0o640 } });
    assert.deepEqual([nulls.statusCode, nulls.json().mode], [200, 0o640]);
    await allReleased();
  });

  test('uploads take any content type as raw bytes; other routes keep their JSON parsing', async () => {
    await setup();
    const json = '{"not": "parsed"}';
    for (const [i, type] of [['1', 'application/json'], ['2', 'text/plain'], ['3', 'application/x-whatever'], ['4', undefined]] as const) {
      const r = await app.inject({ method: 'PUT', url: `/volumecontent/vol1/file?path=/f${i}`, payload: json, headers: type ? { 'content-type': type } : {} });
      assert.equal(r.statusCode, 201, `${type}: ${r.body}`);
      assert.equal(await readFile(join(sb.root, `f${i}`), 'utf8'), json);
    }
    const other = await app.inject({ method: 'PUT', url: '/other', payload: { a: 1 } });
    assert.deepEqual(other.json(), { got: { a: 1 } });
    await allReleased();
  });

  test('maxUploadBytes: 413 by content-length or by the bytes that arrive; nothing kept', async () => {
    await setup({ maxUploadBytes: 10 });
    const declared = await app.inject({ method: 'PUT', url: '/volumecontent/vol1/file?path=/f', headers: { 'content-type': 'application/octet-stream' }, payload: 'x'.repeat(11) });
    assert.equal(declared.statusCode, 413);
    assert.deepEqual(declared.json(), { code: 413, message: 'the upload is 11 bytes; at most 10 are accepted' });
    assert.deepEqual(await readdir(sb.root), []);

    // A chunked upload (no content-length) over the limit, on a real connection.
    const url = new URL(await app.listen({ host: '127.0.0.1', port: 0 }));
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest({ host: url.hostname, port: url.port, method: 'PUT', path: '/volumecontent/vol1/file?path=/g', headers: { 'transfer-encoding': 'chunked' } }, (r) => {
        let body = '';
        r.on('data', (c: Buffer) => { body += c.toString(); });
        r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.write('0123456');
      setTimeout(() => req.end('789abc'), 20);
    });
    assert.equal(res.status, 413);
    assert.match(JSON.parse(res.body).message, /larger than 10 bytes/);
    assert.deepEqual(await readdir(sb.root), []);
    await allReleased();
  });

  test('an upload that stalls is cut after the idle timeout and keeps nothing', async () => {
    await setup({ uploadIdleTimeoutMs: 100 });
    await writeFile(join(sb.root, 'old'), 'old');
    const url = new URL(await app.listen({ host: '127.0.0.1', port: 0 }));
    for (const [path, force] of [['/new', 'false'], ['/old', 'true']]) {
      await new Promise<void>((resolve) => {
        const req = httpRequest({ host: url.hostname, port: url.port, method: 'PUT', path: `/volumecontent/vol1/file?path=${path}&force=${force}`, headers: { 'content-length': '100' } });
        req.on('error', () => resolve()); // the server cuts the connection
        req.on('response', (r) => { r.resume(); r.on('end', resolve); });
        req.write('partial');
      });
    }
    await allReleased();
    assert.deepEqual(await readdir(sb.root), ['old']);
    assert.equal(await readFile(join(sb.root, 'old'), 'utf8'), 'old');
  });

  test('a download releases its volume when the client goes away midway, and closes its file', async () => {
    await setup();
    await mkdir(join(sb.root, 'd'));
    await writeFile(join(sb.root, 'd/big'), Buffer.alloc(64 * 1024 * 1024));
    const url = new URL(await app.listen({ host: '127.0.0.1', port: 0 }));
    const fdsBefore = (await readdir('/proc/self/fd')).length;
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest({ host: url.hostname, port: url.port, path: '/volumecontent/vol1/file?path=/d/big' }, (r) => {
        assert.equal(r.headers['content-length'], String(64 * 1024 * 1024));
        r.once('data', () => { req.destroy(); resolve(); });
      });
      req.on('error', (err: NodeJS.ErrnoException) => { if (err.code !== 'ECONNRESET') reject(err); });
      req.end();
    });
    await allReleased();
    for (let i = 0; i < 100 && (await readdir('/proc/self/fd')).length > fdsBefore; i++) await new Promise((r) => setTimeout(r, 10));
    assert.ok((await readdir('/proc/self/fd')).length <= fdsBefore, 'the file descriptor was closed');
    // HEAD is not a route of the file endpoint.
    assert.equal((await app.inject({ method: 'HEAD', url: '/volumecontent/vol1/file?path=/d/big' })).statusCode, 404);
  });

  test('a failed download (404, 400) releases its volume too', async () => {
    await setup();
    await mkdir(join(sb.root, 'd'));
    assert.equal((await app.inject({ method: 'GET', url: '/volumecontent/vol1/file?path=/nope' })).statusCode, 404);
    assert.equal((await app.inject({ method: 'GET', url: '/volumecontent/vol1/file?path=/d' })).statusCode, 400);
    assert.equal(opened.length, 2);
    await allReleased();
  });

  test('a failing release is logged, not turned into an error', async () => {
    const lines: string[] = [];
    app = createHttpApp({ logger: pino({ level: 'warn' }, { write: (line: string) => { lines.push(line); } }) });
    await registerVolumeContentRoutes(app, {
      prefix: '/v/',
      open: async () => ({ root: sb.root, release: async () => { throw new Error('unmount failed'); } }),
    });
    const r = await app.inject({ method: 'GET', url: '/v/x/path?path=/' });
    assert.equal(r.statusCode, 200);
    assert.equal(r.json().path, '/');
    assert.equal(lines.length, 1);
    assert.match(lines[0], /releasing a volume after a content request failed/);
    assert.match(lines[0], /unmount failed/);
  });
});
