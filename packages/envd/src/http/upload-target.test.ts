/**
 * Uploads run as root for a user (`username=`); what a user planted (a symlink, a FIFO, a hard
 * link) must not get root to write, chown or create anywhere the user could not have itself.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, chown, lchown, link, lstat, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startEnvd, type RunningEnvd } from '../testing/envd-process.ts';

const NOBODY = 65534;
const TOKEN = 'upload-token';
let envd: RunningEnvd;
let base: string;
let home: string;
let rootOnly: string;
let secret: string;

before(async () => {
  base = await mkdtemp(join(tmpdir(), 'envd-upload-as-'));
  await chmod(base, 0o755);
  home = join(base, 'home');
  rootOnly = join(base, 'rootonly');
  await mkdir(home);
  await chown(home, NOBODY, NOBODY);
  await mkdir(rootOnly, { mode: 0o755 });
  secret = join(rootOnly, 'passwd');
  await writeFile(secret, 'root:x:0:0:root:/root:/bin/bash\n', { mode: 0o644 });
  await symlink(secret, join(home, 'report.txt'));
  await lchown(join(home, 'report.txt'), NOBODY, NOBODY);
  await symlink(rootOnly, join(home, 'dirlink'));
  await lchown(join(home, 'dirlink'), NOBODY, NOBODY);
  envd = await startEnvd({ ENVD_DEFAULT_USER: 'root' }, { accessToken: TOKEN });
});
after(async () => {
  await envd.stop();
  await rm(base, { recursive: true, force: true });
});

function upload(path: string, user: string, body = 'pwned\n', signal?: AbortSignal) {
  return fetch(`${envd.url}/files?path=${encodeURIComponent(path)}&username=${user}`, {
    method: 'POST', body, signal, headers: { 'content-type': 'application/octet-stream', 'x-access-token': TOKEN },
  });
}

async function expectRefused(res: Response, status: number, message: RegExp): Promise<void> {
  const body = (await res.json()) as { code: number; message: string };
  assert.equal(res.status, status, body.message);
  assert.deepEqual(Object.keys(body).sort(), ['code', 'message'], 'E2B\'s error shape');
  assert.equal(body.code, status);
  assert.match(body.message, message);
}

async function secretUntouched(): Promise<void> {
  assert.equal(await readFile(secret, 'utf8'), 'root:x:0:0:root:/root:/bin/bash\n');
  const info = await stat(secret);
  assert.deepEqual([info.uid, info.gid], [0, 0]);
}

test('a symlink as the last component is refused, for the user and for root', async () => {
  await expectRefused(await upload(join(home, 'report.txt'), 'nobody'), 400, /is a symbolic link/);
  await expectRefused(await upload(join(home, 'report.txt'), 'root'), 400, /is a symbolic link/);
  await secretUntouched();
});

test('a user cannot upload into, or create directories in, a directory it may not write, symlinked or not', async () => {
  await expectRefused(await upload(join(rootOnly, 'new.txt'), 'nobody'), 403, /user 'nobody' may not create files in/);
  await expectRefused(await upload(join(home, 'dirlink/new.txt'), 'nobody'), 403, /may not create files in/);
  await expectRefused(await upload(join(home, 'dirlink/sub/deeper/new.txt'), 'nobody'), 403, /may not create directories in/);
  await assert.rejects(stat(join(rootOnly, 'new.txt')));
  await assert.rejects(stat(join(rootOnly, 'sub')));
  // A hard link to a file it may not write is not the user's to truncate, though its directory is.
  await link(secret, join(home, 'hardlink'));
  await expectRefused(await upload(join(home, 'hardlink'), 'nobody'), 403, /may not write/);
  await secretUntouched();
  await rm(join(home, 'hardlink'));
});

test('what the user could do itself still works, and what it creates is its own', async () => {
  const deep = join(home, 'made/by/upload.txt');
  assert.equal((await upload(deep, 'nobody', 'ok')).status, 200);
  for (const p of [join(home, 'made'), join(home, 'made/by'), deep]) {
    const info = await stat(p);
    assert.deepEqual([info.uid, info.gid], [NOBODY, NOBODY], p);
  }
  // Put into the user's home by root (a template's COPY): the user could replace it, so it is written and becomes the user's.
  const copied = join(home, 'copied.txt');
  await writeFile(copied, 'from the image', { mode: 0o644 });
  assert.equal((await upload(copied, 'nobody', 'new')).status, 200);
  assert.equal(await readFile(copied, 'utf8'), 'new');
  assert.equal((await stat(copied)).uid, NOBODY);
  // Writable through its group in a directory the user may not write: written in place, its owner kept.
  const shared = join(rootOnly, 'shared.txt');
  await writeFile(shared, 'x');
  await chmod(shared, 0o664);
  await chown(shared, 0, NOBODY);
  assert.equal((await upload(shared, 'nobody', 'by the group')).status, 200);
  assert.equal(await readFile(shared, 'utf8'), 'by the group');
  assert.equal((await stat(shared)).uid, 0);
  // root may write anywhere (but never through a final symlink, above).
  assert.equal((await upload(join(rootOnly, 'by-root.txt'), 'root', 'root')).status, 200);
});

test('each part of a multipart upload is checked, with a path in the query or none (a signed URL)', async () => {
  const form = new FormData();
  form.append('file', new Blob(['fine']), join(home, 'part-ok.txt'));
  form.append('file', new Blob(['evil']), join(rootOnly, 'part-evil.txt'));
  const res = await fetch(`${envd.url}/files?username=nobody`, { method: 'POST', body: form, headers: { 'x-access-token': TOKEN } });
  await expectRefused(res, 403, /may not create files in/);
  await assert.rejects(stat(join(rootOnly, 'part-evil.txt')));

  const linked = new FormData();
  linked.append('file', new Blob(['evil']), join(home, 'report.txt'));
  const signature = `v1_${createHash('sha256').update(['', 'write', 'nobody', TOKEN].join(':')).digest('base64').replace(/=+$/, '')}`;
  const signed = await fetch(`${envd.url}/files?username=nobody&signature=${encodeURIComponent(signature)}`, { method: 'POST', body: linked });
  await expectRefused(signed, 400, /is a symbolic link/);
  await secretUntouched();
});

test('uploads to FIFOs are refused at once and never hold envd\'s threads', async () => {
  const fifos = Array.from({ length: 8 }, (_, i) => join(base, `fifo-${i}`));
  for (const f of fifos) execFileSync('mkfifo', [f]);
  const answers = await Promise.all(fifos.map((f) => upload(f, 'root', 'x', AbortSignal.timeout(5_000))));
  for (const res of answers) await expectRefused(res, 400, /not a regular file/);
  // Four blocked opens once took every libuv thread: file work after them must still be served.
  const plain = join(base, 'after-fifos.txt');
  assert.equal((await upload(plain, 'root', 'still served', AbortSignal.timeout(5_000))).status, 200);
  assert.equal(await readFile(plain, 'utf8'), 'still served');
  assert.ok((await lstat(fifos[0]!)).isFIFO(), 'the FIFO itself is left alone');
});
