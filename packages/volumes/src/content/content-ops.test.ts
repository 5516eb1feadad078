import assert from 'node:assert/strict';
import { chmod, chown, lstat, mkdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { VolumeContent, VOLUME_CONTENT_DEFAULTS } from './content-ops.ts';
import { bodyOf, failingBody, makeSandbox, names, rejectsWith, streamText, type Sandbox } from './test-support.ts';

let sb: Sandbox;
let vc: VolumeContent;
let prevUmask: number;

before(() => {
  // A restrictive umask proves modes are set explicitly, not left to it.
  prevUmask = process.umask(0o077);
});
after(() => {
  process.umask(prevUmask);
});
afterEach(() => sb.cleanup());
beforeEach(async () => {
  sb = await makeSandbox();
  vc = new VolumeContent(sb.root);
});

describe('paths', () => {
  test('relative, dotted and doubled paths are normalized to volume-absolute ones', async () => {
    const e = await vc.makeDir('a//./b/', { force: true });
    assert.equal(e.path, '/a/b');
    assert.equal(e.name, 'b');
    assert.equal((await vc.stat('a/b/../b')).path, '/a/b');
  });

  test('.. is clamped at the root (lexically, as E2B cleans paths)', async () => {
    const e = await vc.writeFile('../../../x.txt', bodyOf('x'));
    assert.equal(e.path, '/x.txt');
    assert.equal(await readFile(join(sb.root, 'x.txt'), 'utf8'), 'x');
    assert.deepEqual(await names(sb.base), ['outside', 'vol']);
  });

  test('empty, NUL-bearing and over-long paths are 400', async () => {
    await rejectsWith(vc.stat(''), 400, /required/);
    await rejectsWith(vc.stat('/a\0b'), 400, /NUL/);
    await rejectsWith(vc.stat(`/${'a'.repeat(4096)}`), 400, /4096/);
    await rejectsWith(vc.stat(`/${'a'.repeat(300)}`), 400, /too long/);
  });
});

describe('stat', () => {
  test('the root', async () => {
    const e = await vc.stat('/');
    assert.equal(e.name, '/');
    assert.equal(e.path, '/');
    assert.equal(e.type, 'directory');
  });

  test('a file: E2B fields, mode as permission bits, ISO times', async () => {
    await writeFile(join(sb.root, 'f.txt'), 'hello');
    await chmod(join(sb.root, 'f.txt'), 0o640);
    await chown(join(sb.root, 'f.txt'), 1000, 1001);
    const e = await vc.stat('/f.txt');
    const st = await lstat(join(sb.root, 'f.txt'));
    assert.deepEqual(e, {
      name: 'f.txt', path: '/f.txt', type: 'file', size: 5, mode: 0o640, uid: 1000, gid: 1001,
      atime: st.atime.toISOString(), mtime: st.mtime.toISOString(), ctime: st.ctime.toISOString(),
    });
  });

  test('a symlink is described, not followed', async () => {
    await writeFile(join(sb.root, 't.txt'), 'x');
    await symlink('t.txt', join(sb.root, 'l'));
    const e = await vc.stat('/l');
    assert.equal(e.type, 'symlink');
    assert.equal(e.target, 't.txt');
    assert.equal(e.size, 't.txt'.length);
  });

  test('missing is 404; through a file is 400', async () => {
    await writeFile(join(sb.root, 'f'), '');
    await rejectsWith(vc.stat('/nope'), 404, /"\/nope" not found/);
    await rejectsWith(vc.stat('/nope/deeper'), 404);
    await rejectsWith(vc.stat('/f/x'), 400, /component of the path is a file/);
  });
});

describe('makeDir', () => {
  test('defaults: E2B owner 9090 and mode 0o777 despite the umask', async () => {
    const e = await vc.makeDir('/d');
    assert.equal(e.type, 'directory');
    assert.equal(e.mode, 0o777);
    assert.equal(e.uid, VOLUME_CONTENT_DEFAULTS.uid);
    assert.equal(e.gid, VOLUME_CONTENT_DEFAULTS.gid);
    const st = await stat(join(sb.root, 'd'));
    assert.equal(st.mode & 0o7777, 0o777);
    assert.equal(st.uid, 9090);
  });

  test('uid, gid, mode; set-id and sticky bits are not applied (E2B applies the permission bits)', async () => {
    const e = await vc.makeDir('/d', { uid: 1000, gid: 2000, mode: 0o3750 });
    assert.deepEqual([e.uid, e.gid, e.mode], [1000, 2000, 0o750]);
    assert.equal((await stat(join(sb.root, 'd'))).mode & 0o7777, 0o750);
  });

  test('existing without force is 409; with force an existing directory is left as it is', async () => {
    await vc.makeDir('/d', { uid: 1500, gid: 1600, mode: 0o700 });
    await rejectsWith(vc.makeDir('/d'), 409, /already exists/);
    await rejectsWith(vc.makeDir('/d', { force: false }), 409);
    const e = await vc.makeDir('/d', { force: true, uid: 1, gid: 1, mode: 0o777 });
    assert.deepEqual([e.uid, e.gid, e.mode], [1500, 1600, 0o700]);
  });

  test('missing parent is 404 without force; force makes parents (0o777, the request owner)', async () => {
    await rejectsWith(vc.makeDir('/a/b/c'), 404);
    const e = await vc.makeDir('/a/b/c', { force: true, uid: 1000, gid: 1000, mode: 0o755 });
    assert.equal(e.path, '/a/b/c');
    assert.equal(e.mode, 0o755);
    for (const p of ['a', 'a/b']) {
      const st = await stat(join(sb.root, p));
      assert.equal(st.mode & 0o7777, 0o777, p);
      assert.equal(st.uid, 1000, p);
    }
  });

  test('force does not change existing parents', async () => {
    await mkdir(join(sb.root, 'a'), { mode: 0o700 });
    await chmod(join(sb.root, 'a'), 0o700);
    await vc.makeDir('/a/b', { force: true, uid: 7, gid: 7 });
    const st = await stat(join(sb.root, 'a'));
    assert.equal(st.mode & 0o777, 0o700);
    assert.equal(st.uid, 0);
  });

  test('a file in the way is 409 (even with force); a file as parent is 400', async () => {
    await writeFile(join(sb.root, 'f'), 'x');
    await rejectsWith(vc.makeDir('/f', { force: true }), 409);
    await rejectsWith(vc.makeDir('/f'), 409);
    await rejectsWith(vc.makeDir('/f/sub'), 400);
    await rejectsWith(vc.makeDir('/f/sub', { force: true }), 400);
  });

  test('the root: 409, with force its stat', async () => {
    await rejectsWith(vc.makeDir('/'), 409);
    assert.equal((await vc.makeDir('/', { force: true })).path, '/');
  });

  test('invalid uid, gid, mode are 400', async () => {
    await rejectsWith(vc.makeDir('/d', { uid: -1 }), 400, /uid/);
    await rejectsWith(vc.makeDir('/d', { gid: 2 ** 32 }), 400, /gid/);
    await rejectsWith(vc.makeDir('/d', { mode: 0o10000 }), 400, /mode/);
    await rejectsWith(vc.makeDir('/d', { mode: 1.5 }), 400, /mode/);
  });
});

describe('writeFile', () => {
  test('creates a file: content, E2B defaults (9090, 0o666), entry', async () => {
    const e = await vc.writeFile('/f.txt', bodyOf('Hello, World!'));
    assert.equal(e.name, 'f.txt');
    assert.equal(e.path, '/f.txt');
    assert.equal(e.type, 'file');
    assert.equal(e.size, 13);
    assert.equal(e.mode, 0o666);
    assert.deepEqual([e.uid, e.gid], [9090, 9090]);
    assert.equal(await readFile(join(sb.root, 'f.txt'), 'utf8'), 'Hello, World!');
    assert.equal((await stat(join(sb.root, 'f.txt'))).mode & 0o7777, 0o666);
  });

  test('uid, gid, mode', async () => {
    const e = await vc.writeFile('/m', bodyOf('x'), { uid: 1000, gid: 1000, mode: 0o4644 });
    assert.deepEqual([e.uid, e.gid, e.mode], [1000, 1000, 0o644]);
    assert.equal((await stat(join(sb.root, 'm'))).mode & 0o7777, 0o644);
  });

  test('an existing file without force is 409 and unchanged', async () => {
    await vc.writeFile('/f', bodyOf('first'));
    await rejectsWith(vc.writeFile('/f', bodyOf('second')), 409, /already exists/);
    await rejectsWith(vc.writeFile('/f', bodyOf('second'), { force: false }), 409);
    assert.equal(await readFile(join(sb.root, 'f'), 'utf8'), 'first');
  });

  test('force replaces the file atomically (new inode, owner and mode of the request), no temp left', async () => {
    await vc.writeFile('/f', bodyOf('first'), { uid: 1, gid: 1, mode: 0o600 });
    const before = await stat(join(sb.root, 'f'));
    const e = await vc.writeFile('/f', bodyOf('second, longer'), { force: true, uid: 2, gid: 3, mode: 0o644 });
    assert.equal(await readFile(join(sb.root, 'f'), 'utf8'), 'second, longer');
    assert.deepEqual([e.uid, e.gid, e.mode, e.size], [2, 3, 0o644, 14]);
    assert.notEqual((await stat(join(sb.root, 'f'))).ino, before.ino);
    assert.deepEqual(await names(sb.root), ['f']);
  });

  test('force makes missing parents; without it a missing parent is 404', async () => {
    await rejectsWith(vc.writeFile('/n/d/f', bodyOf('x')), 404);
    await vc.writeFile('/n/d/f', bodyOf('x'), { force: true, uid: 1000, gid: 1000 });
    assert.equal(await readFile(join(sb.root, 'n/d/f'), 'utf8'), 'x');
    assert.equal((await stat(join(sb.root, 'n'))).uid, 1000);
  });

  test('a file as parent is 400; a directory in the way is 409', async () => {
    await writeFile(join(sb.root, 'f'), '');
    await mkdir(join(sb.root, 'd'));
    await rejectsWith(vc.writeFile('/f/x', bodyOf('x')), 400);
    await rejectsWith(vc.writeFile('/d', bodyOf('x')), 409);
    await rejectsWith(vc.writeFile('/d', bodyOf('x'), { force: true }), 409, /is a directory/);
    await rejectsWith(vc.writeFile('/', bodyOf('x'), { force: true }), 409);
    assert.ok((await stat(join(sb.root, 'd'))).isDirectory());
  });

  test('empty and large bodies', async () => {
    assert.equal((await vc.writeFile('/empty', bodyOf(''))).size, 0);
    const big = Buffer.alloc(5 * 1024 * 1024 + 7, 0x61);
    const chunks = [big.subarray(0, 1000), big.subarray(1000, 3_000_000), big.subarray(3_000_000)];
    assert.equal((await vc.writeFile('/big', (async function* () { yield* chunks; })())).size, big.length);
    assert.ok((await readFile(join(sb.root, 'big'))).equals(big));
  });

  test('over maxBytes is 413 and nothing is kept (new file; forced replacement keeps the old one)', async () => {
    await rejectsWith(vc.writeFile('/f', bodyOf('0123456789'), { maxBytes: 9 }), 413);
    assert.deepEqual(await names(sb.root), []);
    await vc.writeFile('/g', bodyOf('old'));
    await rejectsWith(vc.writeFile('/g', bodyOf('0123456789'), { maxBytes: 9, force: true }), 413);
    assert.equal(await readFile(join(sb.root, 'g'), 'utf8'), 'old');
    assert.deepEqual(await names(sb.root), ['g']);
    assert.equal((await vc.writeFile('/h', bodyOf('012345678'), { maxBytes: 9 })).size, 9);
  });

  test('a body that fails midway keeps nothing', async () => {
    await assert.rejects(vc.writeFile('/f', failingBody('partial')), /client went away/);
    assert.deepEqual(await names(sb.root), []);
    await vc.writeFile('/g', bodyOf('old'));
    await assert.rejects(vc.writeFile('/g', failingBody('partial'), { force: true }), /client went away/);
    assert.equal(await readFile(join(sb.root, 'g'), 'utf8'), 'old');
    assert.deepEqual(await names(sb.root), ['g']);
  });
});

describe('readFile', () => {
  test('a file: stream and size', async () => {
    await writeFile(join(sb.root, 'f'), 'content');
    const { stream, size } = await vc.readFile('/f');
    assert.equal(size, 7);
    assert.equal(await streamText(stream), 'content');
  });

  test('an empty file', async () => {
    await writeFile(join(sb.root, 'e'), '');
    const { stream, size } = await vc.readFile('e');
    assert.equal(size, 0);
    assert.equal(await streamText(stream), '');
  });

  test('missing is 404; a directory or the root is 400; through a file is 400', async () => {
    await mkdir(join(sb.root, 'd'));
    await writeFile(join(sb.root, 'f'), '');
    await rejectsWith(vc.readFile('/nope'), 404);
    await rejectsWith(vc.readFile('/d'), 400, /is a directory/);
    await rejectsWith(vc.readFile('/'), 400);
    await rejectsWith(vc.readFile('/f/x'), 400);
  });
});

describe('list', () => {
  beforeEach(async () => {
    // E2B's dir_list_test layout.
    await mkdir(join(sb.root, 'dir/deep/deeper'), { recursive: true });
    await writeFile(join(sb.root, 'dir/test.txt'), 'test');
    await writeFile(join(sb.root, 'dir/deep/test.txt'), 'deep test');
    await writeFile(join(sb.root, 'dir/deep/deeper/test.txt'), 'deeper test');
  });

  test('depth 1 (and 0, and the default) lists the directory', async () => {
    for (const depth of [undefined, 0, 1]) {
      const got = await vc.list('dir', depth);
      assert.deepEqual(got.map((e) => e.path), ['/dir/deep', '/dir/test.txt'], String(depth));
    }
  });

  test('depth 2 descends pre-order, names in byte order', async () => {
    const got = await vc.list('/dir', 2);
    assert.deepEqual(got.map((e) => e.path), ['/dir/deep', '/dir/deep/deeper', '/dir/deep/test.txt', '/dir/test.txt']);
    assert.deepEqual(got.map((e) => e.type), ['directory', 'directory', 'file', 'file']);
    assert.equal(got[2].size, 9);
  });

  test('the root', async () => {
    const got = await vc.list('/');
    assert.deepEqual(got.map((e) => [e.name, e.path]), [['dir', '/dir']]);
  });

  test('depth above 10 is 400; a missing path 404; a file 400', async () => {
    assert.equal((await vc.list('/', 10)).length, 6);
    await rejectsWith(vc.list('/dir', 11), 400, /depth must be between 1 and 10/);
    await rejectsWith(vc.list('/dir', -1), 400);
    await rejectsWith(vc.list('/non-existent-dir'), 404);
    await rejectsWith(vc.list('/dir/test.txt'), 400, /is not a directory/);
  });

  test('more entries than the cap is 400', async () => {
    const capped = new VolumeContent(sb.root, { maxListEntries: 3 });
    await rejectsWith(capped.list('/dir', 2), 400, /more than 3 entries/);
    assert.equal((await capped.list('/dir', 1)).length, 2);
  });

  test('special files are type unknown', async () => {
    const { execFileSync } = await import('node:child_process');
    execFileSync('mkfifo', [join(sb.root, 'dir/fifo')]);
    const got = await vc.list('/dir');
    assert.equal(got.find((e) => e.name === 'fifo')?.type, 'unknown');
  });
});

describe('remove', () => {
  test('a file, an empty directory, a tree', async () => {
    await writeFile(join(sb.root, 'f'), 'x');
    await mkdir(join(sb.root, 'e'));
    await mkdir(join(sb.root, 't/a/b/c'), { recursive: true });
    for (let i = 0; i < 1200; i++) await writeFile(join(sb.root, 't/a', `f${i}`), '');
    await writeFile(join(sb.root, 't/a/b/c/deep'), 'x');
    await symlink('/nonexistent', join(sb.root, 't/a/dangling'));
    for (const p of ['/f', '/e', '/t']) await vc.remove(p);
    assert.deepEqual(await names(sb.root), []);
  });

  test('missing is 404; the root is 400 and stays', async () => {
    await rejectsWith(vc.remove('/nope'), 404);
    await rejectsWith(vc.remove('/'), 400, /cannot delete root/);
    await rejectsWith(vc.remove('/../'), 400, /cannot delete root/);
    assert.ok((await stat(sb.root)).isDirectory());
  });
});

describe('updateMetadata', () => {
  beforeEach(async () => {
    await writeFile(join(sb.root, 'f'), 'x');
    await chmod(join(sb.root, 'f'), 0o644);
    await chown(join(sb.root, 'f'), 1000, 2000);
  });

  test('mode only', async () => {
    const e = await vc.updateMetadata('/f', { mode: 0o600 });
    assert.equal(e.mode, 0o600);
    assert.equal((await stat(join(sb.root, 'f'))).mode & 0o7777, 0o600);
  });

  test('uid only keeps gid; gid only keeps uid; all together', async () => {
    assert.deepEqual(((e) => [e.uid, e.gid])(await vc.updateMetadata('/f', { uid: 4321 })), [4321, 2000]);
    assert.deepEqual(((e) => [e.uid, e.gid])(await vc.updateMetadata('/f', { gid: 8765 })), [4321, 8765]);
    const e = await vc.updateMetadata('/f', { uid: 111, gid: 222, mode: 0o640 });
    assert.deepEqual([e.uid, e.gid, e.mode, e.path, e.type], [111, 222, 0o640, '/f', 'file']);
  });

  test('no field only stats', async () => {
    const e = await vc.updateMetadata('/f', {});
    assert.deepEqual([e.mode, e.uid, e.path], [0o644, 1000, '/f']);
  });

  test('a directory and the root', async () => {
    await mkdir(join(sb.root, 'd'));
    assert.equal((await vc.updateMetadata('/d', { mode: 0o700 })).type, 'directory');
    assert.equal((await stat(join(sb.root, 'd'))).mode & 0o777, 0o700);
    assert.equal((await vc.updateMetadata('/', { mode: 0o751 })).mode, 0o751);
    assert.equal((await stat(sb.root)).mode & 0o777, 0o751);
  });

  test('missing is 404; invalid values 400', async () => {
    await rejectsWith(vc.updateMetadata('/nope', { mode: 0o644 }), 404);
    await rejectsWith(vc.updateMetadata('/nope', { uid: 1 }), 404);
    await rejectsWith(vc.updateMetadata('/nope', {}), 404);
    await rejectsWith(vc.updateMetadata('/f', { mode: 0o17777 }), 400);
    await rejectsWith(vc.updateMetadata('/f', { uid: -2 }), 400);
  });
});
