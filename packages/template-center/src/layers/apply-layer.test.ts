import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, test } from 'node:test';
import { tarOf, compress, type TestEntry } from '../test-support/oci-builder.ts';
import { LayerApplier } from './apply-layer.ts';
import { ImageTooLargeError, UnpackBudget } from './unpack-budget.ts';
import { injectSandboxEssentials } from '../rootfs/inject.ts';
import { decompress } from './decompress.ts';

const roots: string[] = [];
after(() => { for (const r of roots) rmSync(r, { recursive: true, force: true }); });

function newRoot(): string {
  const r = mkdtempSync(join(tmpdir(), 'tc-apply-'));
  roots.push(r);
  return r;
}

async function apply(applier: LayerApplier, entries: TestEntry[], whiteouts = true) {
  await applier.apply(Readable.from([await tarOf(entries)]), 'test', { whiteouts });
}

test('layers stack: whiteouts remove, opaque directories hide lower content only', async () => {
  const root = newRoot();
  const a = new LayerApplier(root);
  await apply(a, [
    { name: 'etc/', type: 'directory' },
    { name: 'etc/keep', content: 'keep' },
    { name: 'etc/gone', content: 'gone' },
    { name: 'opq/', type: 'directory' },
    { name: 'opq/lower-a', content: 'a' },
    { name: 'opq/sub/', type: 'directory' },
    { name: 'opq/sub/lower-b', content: 'b' },
  ]);
  await apply(a, [
    { name: 'etc/.wh.gone', content: '' },
    { name: 'opq/', type: 'directory' },
    { name: 'opq/upper', content: 'new' },       // added by this layer before the marker: stays
    { name: 'opq/.wh..wh..opq', content: '' },
  ]);
  await a.finish();
  assert.equal(readFileSync(join(root, 'etc/keep'), 'utf8'), 'keep');
  assert.ok(!existsSync(join(root, 'etc/gone')));
  assert.ok(!existsSync(join(root, 'etc/.wh.gone')));
  assert.ok(!existsSync(join(root, 'opq/lower-a')));
  assert.ok(!existsSync(join(root, 'opq/sub')));
  assert.equal(readFileSync(join(root, 'opq/upper'), 'utf8'), 'new');
  assert.ok(!existsSync(join(root, 'opq/.wh..wh..opq')));
});

test('files, modes, owners, times, hard links, symlinks, devices', async () => {
  const root = newRoot();
  const a = new LayerApplier(root);
  const mtime = new Date('2020-02-02T02:02:02Z');
  await apply(a, [
    { name: 'bin/', type: 'directory', mtime },
    { name: 'bin/tool', content: '#!/bin/sh\n', mode: 0o4755, uid: 1234, gid: 5678, mtime },
    { name: 'bin/tool-link', type: 'link', linkname: 'bin/tool' },
    { name: 'bin/sh', type: 'symlink', linkname: '/bin/tool', uid: 7, gid: 8 },
    { name: 'dev/', type: 'directory' },
    { name: 'dev/null', type: 'character-device', devmajor: 1, devminor: 3, mode: 0o666 },
    { name: 'dev/fifo', type: 'fifo', mode: 0o600 },
  ]);
  await a.finish();
  const tool = statSync(join(root, 'bin/tool'));
  assert.equal(tool.mode & 0o7777, 0o4755);
  assert.equal(tool.uid, 1234);
  assert.equal(tool.gid, 5678);
  assert.equal(tool.mtime.getTime(), mtime.getTime());
  assert.equal(statSync(join(root, 'bin')).mtime.getTime(), mtime.getTime());
  assert.equal(statSync(join(root, 'bin/tool-link')).ino, tool.ino);
  assert.equal(readlinkSync(join(root, 'bin/sh')), '/bin/tool');
  assert.equal(lstatSync(join(root, 'bin/sh')).uid, 7);
  const dev = lstatSync(join(root, 'dev/null'));
  assert.ok(dev.isCharacterDevice());
  assert.equal(dev.rdev, (1 << 8) | 3);
  assert.ok(lstatSync(join(root, 'dev/fifo')).isFIFO());
});

test('an image\'s block devices, and character devices other than the harmless ones, are never made; the sandbox essentials then write over FIFOs and devices at their paths', async () => {
  const root = newRoot();
  const a = new LayerApplier(root);
  // What a hostile image ships: a host disk's node, kernel memory, and /etc files that are not files.
  await apply(a, [
    { name: 'dev/', type: 'directory' },
    { name: 'dev/disk', type: 'block-device', devmajor: 8, devminor: 0, mode: 0o666 },
    { name: 'dev/kmem', type: 'character-device', devmajor: 1, devminor: 2, mode: 0o666 },
    { name: 'dev/urandom', type: 'character-device', devmajor: 1, devminor: 9, mode: 0o666 },
    { name: 'etc/', type: 'directory' },
    { name: 'etc/passwd', type: 'fifo', mode: 0o644 },
    { name: 'etc/group', type: 'block-device', devmajor: 7, devminor: 0, mode: 0o644 },
    { name: 'etc/skel/', type: 'directory' },
    { name: 'etc/skel/.bashrc', content: 'echo hi\n' },
    { name: 'etc/skel/pipe', type: 'fifo', mode: 0o644 },
    { name: 'usr/local/share/ca-certificates/', type: 'directory' },
    { name: 'usr/local/share/ca-certificates/svc-egress.crt', type: 'fifo', mode: 0o644 },
  ]);
  await a.finish();
  assert.equal(existsSync(join(root, 'dev/disk')), false);
  assert.equal(existsSync(join(root, 'dev/kmem')), false);
  assert.ok(lstatSync(join(root, 'dev/urandom')).isCharacterDevice(), 'a harmless one stays');
  // Before 2026-11-30 the write to the FIFO at /etc/passwd blocked the template center for good.
  const made = await injectSandboxEssentials(root, { caPem: '-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n' });
  assert.equal(made.userCreated, true);
  for (const f of ['etc/passwd', 'etc/group', 'usr/local/share/ca-certificates/svc-egress.crt']) assert.ok(lstatSync(join(root, f)).isFile(), f);
  assert.match(readFileSync(join(root, 'etc/passwd'), 'utf8'), /^user:x:1000:/m);
  assert.equal(readFileSync(join(root, 'home/user/.bashrc'), 'utf8'), 'echo hi\n');
  assert.equal(existsSync(join(root, 'home/user/pipe')), false, 'a FIFO in /etc/skel is not copied (it would wait for a writer)');
});

test('a later layer replaces a directory by a file and a file by a directory', async () => {
  const root = newRoot();
  const a = new LayerApplier(root);
  await apply(a, [{ name: 'x/', type: 'directory' }, { name: 'x/inner', content: '1' }, { name: 'y', content: 'file' }]);
  await apply(a, [{ name: 'x', content: 'now a file' }, { name: 'y/', type: 'directory' }, { name: 'y/z', content: 'z' }]);
  assert.equal(readFileSync(join(root, 'x'), 'utf8'), 'now a file');
  assert.equal(readFileSync(join(root, 'y/z'), 'utf8'), 'z');
});

test('symbolic links never carry writes out of the root', async () => {
  const outside = newRoot();
  writeFileSync(join(outside, 'victim'), 'untouched');
  const root = newRoot();
  const a = new LayerApplier(root);
  await apply(a, [
    { name: 'escape', type: 'symlink', linkname: outside },
    { name: 'rel', type: 'symlink', linkname: '../../../../../../..' + outside },
  ]);
  await apply(a, [
    { name: 'escape/victim', content: 'pwned' },
    { name: 'rel/victim', content: 'pwned' },
  ]);
  assert.equal(readFileSync(join(outside, 'victim'), 'utf8'), 'untouched');
  // The writes landed inside the root, where the links point when seen from the image.
  assert.equal(readFileSync(join(root, outside, 'victim'), 'utf8'), 'pwned');
});

test('an entry with .. is refused', async () => {
  const root = newRoot();
  const a = new LayerApplier(root);
  await assert.rejects(apply(a, [{ name: '../evil', content: 'x' }]), /escapes the root/);
  await assert.rejects(apply(a, [{ name: 'a/../../evil', content: 'x' }]), /escapes the root/);
  await assert.rejects(apply(a, [{ name: 'h', type: 'link', linkname: '../../etc/passwd' }]), /escapes the root/);
});

test('a hard link cannot point outside through a symlinked directory', async () => {
  const outside = newRoot();
  writeFileSync(join(outside, 'secret'), 'secret');
  const root = newRoot();
  mkdirSync(join(root, 'x'));
  const a = new LayerApplier(root);
  await apply(a, [{ name: 'out', type: 'symlink', linkname: outside }]);
  await assert.rejects(apply(a, [{ name: 'stolen', type: 'link', linkname: 'out/secret' }]), /does not contain/);
});

test('rootfs tarballs keep .wh. names as ordinary files', async () => {
  const root = newRoot();
  const a = new LayerApplier(root);
  await apply(a, [{ name: 'f', content: '1' }, { name: '.wh.f', content: 'literal' }], false);
  assert.equal(readFileSync(join(root, '.wh.f'), 'utf8'), 'literal');
  assert.ok(existsSync(join(root, 'f')));
});

test('gzip, zstd and plain streams are recognised by their magic bytes', async () => {
  const tar = await tarOf([{ name: 'hello', content: 'world' }]);
  for (const c of ['gzip', 'zstd', 'none'] as const) {
    const out: Buffer[] = [];
    for await (const chunk of await decompress(Readable.from([compress(tar, c)]))) out.push(chunk as Buffer);
    assert.deepEqual(Buffer.concat(out), tar, c);
  }
});

test('directory times are set on what the root holds at the end: a directory moved behind a link later does not take its time outside', async () => {
  const outside = newRoot();
  mkdirSync(join(outside, 'victimdir'));
  const before = statSync(join(outside, 'victimdir')).mtime.getTime();
  const root = newRoot();
  const a = new LayerApplier(root);
  const old = new Date('2001-09-09T01:46:40Z');
  // `a/victimdir` is recorded, then `a` becomes a link to a host directory: the pass at the end
  // re-timed the host's directory through the link (the host's /etc with `/` as the target).
  await apply(a, [
    { name: 'a/', type: 'directory' },
    { name: 'a/victimdir/', type: 'directory', mtime: old },
    { name: 'a', type: 'symlink', linkname: outside },
    { name: 'kept/', type: 'directory', mtime: old },
  ]);
  await a.finish();
  assert.equal(statSync(join(outside, 'victimdir')).mtime.getTime(), before, 'the host directory keeps its time');
  assert.equal(statSync(join(root, 'kept')).mtime.getTime(), old.getTime(), 'a directory still in the root gets its time');
});

test('a whiteout that names its own directory or its parent is refused, and removes nothing', async () => {
  const job = newRoot();
  const root = join(job, 'rootfs');
  mkdirSync(root);
  writeFileSync(join(job, 'sibling-of-rootfs'), 'x');
  writeFileSync(join(root, 'keep'), 'x');
  const a = new LayerApplier(root);
  for (const name of ['.wh...', '.wh..', 'sub/.wh...', '.wh.']) {
    await assert.rejects(apply(a, [{ name: 'sub/', type: 'directory' }, { name, content: '' }]), /whiteout .* names no entry/, name);
  }
  assert.ok(existsSync(join(job, 'sibling-of-rootfs')), 'the build\'s own directory is still there');
  assert.ok(existsSync(join(root, 'keep')) && existsSync(join(root, 'sub')), 'and the root and its directories');
});

test('every entry counts against the budget: its overhead beside its tar bytes, and at most the entry cap', async () => {
  const empties = Array.from({ length: 300 }, (_, i) => ({ name: `f${i}`, content: '' }));
  // 300 empty files are 150 KiB of tar and 1.2 MiB of overhead.
  await assert.rejects(new LayerApplier(newRoot(), new UnpackBudget(1024 * 1024)).apply(Readable.from([await tarOf(empties)]), 'layer 1/1', { whiteouts: true }),
    (e: Error) => e instanceof ImageTooLargeError && /^layer 1\/1 unpacks past 1 MiB/.test(e.message));
  await assert.rejects(new LayerApplier(newRoot(), new UnpackBudget(Infinity, 100)).apply(Readable.from([await tarOf(empties)]), 'layer 1/1', { whiteouts: true }),
    (e: Error) => e instanceof ImageTooLargeError && e.message === 'layer 1/1 unpacks to more than 100 files, directories and links, the most an image may have');
  const fits = newRoot();
  await new LayerApplier(fits, new UnpackBudget(2 * 1024 * 1024, 300)).apply(Readable.from([await tarOf(empties)]), 'layer 1/1', { whiteouts: true });
  assert.equal(readdirSync(fits).length, 300);
});

test('an opaque directory keeps what the layer wrote before its marker, by inode: files, links, directories and what they hold', async () => {
  const root = newRoot();
  const a = new LayerApplier(root);
  await apply(a, [
    { name: 'opq/', type: 'directory' },
    { name: 'opq/lower', content: 'lower' },
    { name: 'opq/lower-dir/', type: 'directory' },
    { name: 'opq/lower-dir/x', content: 'x' },
    { name: 'opq/replaced', content: 'lower' },
  ]);
  await apply(a, [
    { name: 'opq/replaced', content: 'upper' },
    { name: 'opq/link', type: 'symlink', linkname: 'replaced' },
    { name: 'opq/hard', type: 'link', linkname: 'opq/replaced' },
    { name: 'opq/new-dir/', type: 'directory' },
    { name: 'opq/new-dir/y', content: 'y' },
    { name: 'opq/.wh..wh..opq', content: '' },
  ]);
  assert.deepEqual(readdirSync(join(root, 'opq')).sort(), ['hard', 'link', 'new-dir', 'replaced']);
  assert.equal(readFileSync(join(root, 'opq/hard'), 'utf8'), 'upper');
  assert.equal(readFileSync(join(root, 'opq/new-dir/y'), 'utf8'), 'y');
});
