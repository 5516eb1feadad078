import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, test } from 'node:test';
import { createGzip, gunzipSync } from 'node:zlib';
import { startEnvd, type RunningEnvd } from '../testing/envd-process.ts';

let envd: RunningEnvd;
let dir: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'envd-files-'));
  envd = await startEnvd({ ENVD_DEFAULT_USER: 'root' });
});
after(async () => {
  await envd.stop();
  await rm(dir, { recursive: true, force: true });
});

const filesUrl = (path: string, extra = '') => `${envd.url}/files?path=${encodeURIComponent(path)}${extra}`;

async function upload(path: string, body: RequestInit['body'], headers: Record<string, string> = {}) {
  return fetch(filesUrl(path), { method: 'POST', body, headers: { 'content-type': 'application/octet-stream', ...headers }, duplex: 'half' } as RequestInit);
}

function peakRssMiB(pid: number): Promise<number> {
  return readFile(`/proc/${pid}/status`, 'utf8').then((s) => Number(/VmHWM:\s+(\d+)/.exec(s)![1]) / 1024);
}

test('raw upload then download, with content type, gzip and ranges', async () => {
  const path = join(dir, 'nested/dirs/data.json');
  const res = await upload(path, '{"hello":"world"}');
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), [{ path, name: 'data.json', type: 'file' }]);

  const plain = await fetch(filesUrl(path), { headers: { 'accept-encoding': 'identity' } });
  assert.equal(plain.status, 200);
  assert.equal(plain.headers.get('content-type'), 'application/json');
  assert.equal(plain.headers.get('content-length'), '17');
  assert.equal(await plain.text(), '{"hello":"world"}');

  const small = await fetch(filesUrl(path), { headers: { 'accept-encoding': 'gzip' } });
  assert.equal(small.headers.get('content-encoding'), null, 'tiny files are not worth compressing');
  assert.equal(await small.text(), '{"hello":"world"}');

  const range = await fetch(filesUrl(path), { headers: { range: 'bytes=2-6' } });
  assert.equal(range.status, 206);
  assert.equal(range.headers.get('content-range'), 'bytes 2-6/17');
  assert.equal(await range.text(), 'hello');
  // A range past the end (or reversed) is a 416 with the file's size and the JSON error body.
  for (const bad of ['bytes=999999999999-0', 'bytes=100-200']) {
    const r = await fetch(filesUrl(path), { headers: { range: bad } });
    assert.equal(r.status, 416, bad);
    assert.equal(r.headers.get('content-range'), 'bytes */17');
    assert.match(((await r.json()) as { message: string }).message, /not satisfiable for a file of 17 bytes/);
  }

  const refused = await fetch(filesUrl(path), { headers: { 'accept-encoding': 'br, identity;q=0' } });
  assert.equal(refused.status, 406);
});

test('a HEAD that accepts gzip answers the headers without compressing the file', async () => {
  // Node drops a HEAD's body without back-pressure: envd compressed the whole file for nothing,
  // a core busy per request for anyone holding a read URL of one file.
  const path = join(dir, 'big.txt');
  await writeFile(path, Buffer.alloc(128 * 1024 * 1024, 'a'));
  try {
    const cpu = async () => {
      const fields = (await readFile(`/proc/${envd.pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
      return Number(fields[11]) + Number(fields[12]); // utime + stime, in clock ticks (1/100 s)
    };
    const before = await cpu();
    for (let i = 0; i < 4; i++) {
      const head = await fetch(filesUrl(path), { method: 'HEAD', headers: { 'accept-encoding': 'gzip' } });
      assert.equal(head.status, 200);
      assert.equal(head.headers.get('content-encoding'), 'gzip');
    }
    // Four gzips of 128 MiB at level 1 take seconds of CPU; the headers alone take next to none.
    assert.ok((await cpu()) - before < 50, `envd used ${(await cpu()) - before} ticks of CPU for four HEADs`);
  } finally {
    await rm(path, { force: true });
  }
});

test('download errors', async () => {
  const missing = await fetch(filesUrl(join(dir, 'missing.txt')));
  assert.equal(missing.status, 404);
  assert.deepEqual(await missing.json(), { code: 404, message: `path '${join(dir, 'missing.txt')}' does not exist` });
  const directory = await fetch(filesUrl(dir));
  assert.equal(directory.status, 400);
  const badUser = await fetch(filesUrl(join(dir, 'x'), '&username=nobody-such'));
  assert.equal(badUser.status, 401);
});

test('a file of /proc, which says size 0, is read whole; a device is refused, not streamed without end', async () => {
  for (const accept of ['identity', 'gzip']) {
    const version = await fetch(filesUrl('/proc/version'), { headers: { 'accept-encoding': accept } });
    assert.equal(version.status, 200);
    assert.match(await version.text(), /^Linux version /);
  }
  const device = await fetch(filesUrl('/dev/zero'));
  assert.equal(device.status, 400);
  assert.match(((await device.json()) as { message: string }).message, /not a regular file/);
});

test('multipart upload of several files, paths taken from the file names', async () => {
  const form = new FormData();
  form.append('file', new Blob(['one']), join(dir, 'multi/one.txt'));
  form.append('file', new Blob(['two']), join(dir, 'multi/two.txt'));
  const res = await fetch(`${envd.url}/files`, { method: 'POST', body: form });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { path: string }[];
  assert.deepEqual(body.map((f) => f.path), [join(dir, 'multi/one.txt'), join(dir, 'multi/two.txt')]);
  assert.equal(await readFile(join(dir, 'multi/two.txt'), 'utf8'), 'two');

  const twice = new FormData();
  twice.append('file', new Blob(['a']), 'same.txt');
  twice.append('file', new Blob(['b']), 'same.txt');
  const rejected = await fetch(`${envd.url}/files?path=${encodeURIComponent(join(dir, 'same.txt'))}`, { method: 'POST', body: twice });
  assert.equal(rejected.status, 400);
  assert.match(((await rejected.json()) as { message: string }).message, /cannot upload multiple files to the same path/);
});

test('a multipart upload has at most 10,000 parts: 413 with the JSON error', async () => {
  const part = '--b\r\nContent-Disposition: form-data; name="note"\r\n\r\nv\r\n';
  const body = `${part.repeat(10_001)}--b--\r\n`;
  const res = await fetch(`${envd.url}/files?path=${encodeURIComponent(join(dir, 'many'))}`, { method: 'POST', body, headers: { 'content-type': 'multipart/form-data; boundary=b' } });
  assert.equal(res.status, 413);
  assert.deepEqual(await res.json(), { code: 413, message: 'a multipart upload may have at most 10000 parts; send the files in several requests' });
});

test('upload errors', async () => {
  const cases: [string, RequestInit, number, RegExp][] = [
    [`${envd.url}/files?path=${dir}/x`, { method: 'POST', body: 'x', headers: { 'content-type': 'text/plain' } }, 400, /unsupported content type/],
    [`${envd.url}/files`, { method: 'POST', body: 'x', headers: { 'content-type': 'application/octet-stream' } }, 400, /path query parameter is required/],
    [`${envd.url}/files?path=${dir}/x`, { method: 'POST', body: 'x', headers: { 'content-type': 'application/octet-stream', 'content-encoding': 'br' } }, 400, /unsupported compression/],
    [`${envd.url}/files?path=${dir}/x`, { method: 'POST', body: 'x', headers: { 'content-type': 'application/octet-stream', [`x-metadata-${'k'.repeat(250)}`]: 'v' } }, 400, /invalid metadata/],
    [`${envd.url}/files?path=${dir}`, { method: 'POST', body: 'x', headers: { 'content-type': 'application/octet-stream' } }, 400, /is a directory/],
    [`${envd.url}/files?path=${dir}/x&username=ghost`, { method: 'POST', body: 'x', headers: { 'content-type': 'application/octet-stream' } }, 401, /invalid username/],
    [`${envd.url}/files?path=${dir}/x`, { method: 'POST', body: '--b\r\nno end', headers: { 'content-type': 'multipart/form-data; boundary=b' } }, 400, /multipart/],
  ];
  for (const [url, init, status, message] of cases) {
    const res = await fetch(url, init);
    const body = (await res.json()) as { code: number; message: string };
    assert.equal(res.status, status, `${url}: ${body.message}`);
    assert.equal(body.code, status);
    assert.match(body.message, message);
  }
});

/** `total` bytes in 1 MiB chunks, produced only as fast as they are read. */
function generated(total: number, hash: ReturnType<typeof createHash>): Readable {
  const block = Buffer.alloc(1 << 20);
  for (let i = 0; i < block.length; i++) block[i] = (i * 2654435761) >>> 24;
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= total) return this.push(null);
      const chunk = Buffer.from(block);
      chunk.writeUInt32BE(sent / block.length, 0);
      hash.update(chunk);
      sent += chunk.length;
      this.push(chunk);
    },
  });
}

test('huge uploads stream to disk without growing envd', async () => {
  const total = 512 * 1024 * 1024;
  const before = await peakRssMiB(envd.pid);
  const sent = createHash('sha256');
  const path = join(dir, 'huge.bin');
  const res = await upload(path, Readable.toWeb(generated(total, sent)) as ReadableStream);
  assert.equal(res.status, 200, await res.clone().text());
  assert.equal((await stat(path)).size, total);
  const written = createHash('sha256');
  for await (const chunk of (await import('node:fs')).createReadStream(path)) written.update(chunk as Buffer);
  assert.equal(written.digest('hex'), sent.digest('hex'));
  await rm(path);

  // The same through gzip: a tiny body that inflates to hundreds of MiB.
  const zipped = Readable.from(generated(total, createHash('sha256'))).pipe(createGzip({ level: 1 }));
  const res2 = await upload(path, Readable.toWeb(zipped) as ReadableStream, { 'content-encoding': 'gzip' });
  assert.equal(res2.status, 200);
  assert.equal((await stat(path)).size, total);
  await rm(path);

  const growth = (await peakRssMiB(envd.pid)) - before;
  assert.ok(growth < 64, `envd peak RSS grew by ${growth.toFixed(1)} MiB`);
});

test('a full disk answers 507', async (t) => {
  const small = join(dir, 'small-fs');
  await mkdir(small);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', small], { stdio: 'ignore' });
  } catch {
    t.skip('cannot mount a tmpfs here');
    return;
  }
  try {
    const res = await upload(join(small, 'too-big.bin'), Buffer.alloc(4 * 1024 * 1024, 1));
    assert.equal(res.status, 507);
    assert.match(((await res.json()) as { message: string }).message, /not enough disk space/);
  } finally {
    execFileSync('umount', [small]);
  }
});

test('gzip download of a larger file round-trips', async () => {
  const path = join(dir, 'text.txt');
  const text = 'line of text\n'.repeat(50_000);
  await upload(path, text);
  const res = await fetch(filesUrl(path), { headers: { 'accept-encoding': 'gzip' } });
  const raw = await new Promise<Buffer>((resolve, reject) => {
    get(filesUrl(path), { headers: { 'accept-encoding': 'gzip' } }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (c: Buffer) => chunks.push(c));
      response.on('end', () => resolve(Buffer.concat(chunks)));
    }).on('error', reject);
  });
  assert.equal(res.headers.get('content-encoding'), 'gzip');
  assert.equal(await res.text(), text);
  assert.ok(raw.length < text.length, 'the body really was compressed');
  assert.equal(gunzipSync(raw).toString(), text);
});
