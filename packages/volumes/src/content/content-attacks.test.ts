/**
 * Attacks by a sandbox that writes the volume: symlinks out of the root, `..`, absolute paths,
 * FIFOs and devices, and races that swap a directory or file between a check and a use (driven
 * deterministically through VolumeContent's onStep hook). The target of every escape is a temp
 * directory outside the root (`outside`), never a real system path; each test checks it is intact.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmod, lstat, mkdir, readFile, readdir, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { VolumeContent } from './content-ops.ts';
import { bodyOf, makeSandbox, names, rejectsWith, streamText, within, type Sandbox } from './test-support.ts';

let sb: Sandbox;
let vc: VolumeContent;
const SECRET = 'root:x:0:0:host secret\n';

/** What `outside` holds before each test; `untouched()` checks it still does, byte for byte. */
async function snapshot(dir: string): Promise<string> {
  const out: string[] = [];
  const walk = async (d: string, rel: string): Promise<void> => {
    for (const name of (await readdir(d)).sort()) {
      const p = join(d, name);
      const st = await lstat(p);
      const line = `${rel}${name} ${st.mode.toString(8)} ${st.uid}:${st.gid}`;
      if (st.isDirectory()) { out.push(line); await walk(p, `${rel}${name}/`); } else if (st.isFile()) out.push(`${line} ${await readFile(p, 'utf8')}`);
      else out.push(line);
    }
  };
  await walk(dir, '');
  return out.join('\n');
}
let outsideBefore: string;
async function untouched(): Promise<void> {
  assert.equal(await snapshot(sb.outside), outsideBefore, 'the directory outside the volume changed');
}

afterEach(() => sb.cleanup());
beforeEach(async () => {
  sb = await makeSandbox();
  vc = new VolumeContent(sb.root);
  // outside: passwd (0o644), sub/inner, and the names a write through a link would create.
  await writeFile(join(sb.outside, 'passwd'), SECRET);
  await chmod(join(sb.outside, 'passwd'), 0o644);
  await mkdir(join(sb.outside, 'sub'));
  await writeFile(join(sb.outside, 'sub/inner'), 'inner');
  // The volume, as a hostile sandbox leaves it.
  await symlink(sb.outside, join(sb.root, 'link')); // `link -> /etc`, with outside for /etc
  await symlink(join(sb.outside, 'passwd'), join(sb.root, 'flink')); // final-component link to a file outside
  await symlink('../outside', join(sb.root, 'rel')); // relative link climbing out
  await symlink('..', join(sb.root, 'up'));
  await mkdir(join(sb.root, 'd'));
  await symlink(sb.outside, join(sb.root, 'd/inner-link'));
  outsideBefore = await snapshot(sb.outside);
});

describe('a symlink out of the root', () => {
  test('list shows it as a symlink with its target and never lists through it', async () => {
    const root = await vc.list('/', 10);
    const link = root.find((e) => e.name === 'link');
    assert.deepEqual([link?.type, link?.target, link?.size], ['symlink', sb.outside, sb.outside.length]);
    assert.equal(root.find((e) => e.name === 'rel')?.target, '../outside');
    assert.ok(!root.some((e) => e.name === 'passwd' || e.name === 'inner' || e.name === 'sub'), 'listed what is outside');
    assert.deepEqual(root.map((e) => e.path), ['/d', '/d/inner-link', '/flink', '/link', '/rel', '/up']);
    for (const p of ['/link', '/rel', '/up', '/link/sub', '/d/inner-link']) await rejectsWith(vc.list(p), 400, /symlink/);
    await untouched();
  });

  test('read and stat through it are 400, never the file outside', async () => {
    for (const p of ['/link/passwd', '/rel/passwd', '/up/outside/passwd', '/d/inner-link/passwd', '/link/sub/inner']) {
      await rejectsWith(vc.readFile(p), 400, /is a symlink; the volume content API does not follow symlinks/);
      await rejectsWith(vc.stat(p), 400, /symlink/);
    }
  });

  test('a final-component symlink to a file outside: read is 400, stat describes the link', async () => {
    await rejectsWith(vc.readFile('/flink'), 400, /symlink/);
    const e = await vc.stat('/flink');
    assert.deepEqual([e.type, e.target, e.mode], ['symlink', join(sb.outside, 'passwd'), 0o777]);
  });

  test('write through it is refused and creates nothing outside (with and without force)', async () => {
    for (const force of [false, true]) {
      await rejectsWith(vc.writeFile('/link/x', bodyOf('pwned'), { force }), 400, /symlink/);
      await rejectsWith(vc.writeFile('/link/passwd', bodyOf('pwned'), { force }), 400, /symlink/);
      await rejectsWith(vc.writeFile('/link/new/deeper/x', bodyOf('pwned'), { force }), 400, /symlink/);
      await rejectsWith(vc.writeFile('/rel/x', bodyOf('pwned'), { force }), 400);
      await rejectsWith(vc.writeFile('/up/outside/x', bodyOf('pwned'), { force }), 400);
    }
    await untouched();
  });

  test('write over a final-component symlink: 409 without force, with force the link itself is replaced', async () => {
    await rejectsWith(vc.writeFile('/flink', bodyOf('pwned')), 409);
    const e = await vc.writeFile('/flink', bodyOf('mine'), { force: true });
    assert.equal(e.type, 'file');
    assert.ok((await lstat(join(sb.root, 'flink'))).isFile());
    assert.equal(await readFile(join(sb.root, 'flink'), 'utf8'), 'mine');
    await untouched();
  });

  test('makeDir through it is refused and creates nothing outside; over it is 409', async () => {
    await rejectsWith(vc.makeDir('/link/newdir'), 400, /symlink/);
    await rejectsWith(vc.makeDir('/link/newdir/deeper', { force: true }), 400, /symlink/);
    await rejectsWith(vc.makeDir('/link'), 409);
    await rejectsWith(vc.makeDir('/link', { force: true }), 409);
    await untouched();
  });

  test('remove removes only the link; a tree with links out is removed without following them', async () => {
    await vc.remove('/link');
    await vc.remove('/flink');
    await vc.remove('/d');
    await rejectsWith(vc.remove('/rel/passwd'), 400);
    await rejectsWith(vc.remove('/up/outside'), 400);
    assert.deepEqual(await names(sb.root), ['rel', 'up']);
    await untouched();
  });

  test('updateMetadata: a link\'s mode is refused, its owner changes the link only; through it 400', async () => {
    await rejectsWith(vc.updateMetadata('/flink', { mode: 0o777 }), 400, /symlink/);
    await rejectsWith(vc.updateMetadata('/link', { mode: 0o777 }), 400, /symlink/);
    await rejectsWith(vc.updateMetadata('/flink', { uid: 1234, mode: 0o600 }), 400);
    const e = await vc.updateMetadata('/flink', { uid: 1234, gid: 4321 });
    assert.deepEqual([e.type, e.uid, e.gid, e.target], ['symlink', 1234, 4321, join(sb.outside, 'passwd')]);
    const linkSt = await lstat(join(sb.root, 'flink'));
    assert.deepEqual([linkSt.uid, linkSt.gid], [1234, 4321]);
    await rejectsWith(vc.updateMetadata('/link/passwd', { mode: 0o777, uid: 1 }), 400);
    await untouched();
  });
});

describe('paths that try to leave the root', () => {
  test('.. climbing is clamped inside the volume', async () => {
    await rejectsWith(vc.readFile('/../outside/passwd'), 404);
    await rejectsWith(vc.readFile('../../outside/passwd'), 404);
    await rejectsWith(vc.readFile('d/../../outside/passwd'), 404);
    const e = await vc.writeFile('/../../../outside/passwd', bodyOf('pwned'), { force: true });
    assert.equal(e.path, '/outside/passwd');
    assert.equal(await readFile(join(sb.root, 'outside/passwd'), 'utf8'), 'pwned');
    await rejectsWith(vc.remove('/..'), 400, /root/);
    await untouched();
  });

  test('an absolute host path is a path inside the volume', async () => {
    await rejectsWith(vc.readFile(join(sb.outside, 'passwd')), 404);
    await rejectsWith(vc.list(sb.outside), 404);
    await rejectsWith(vc.remove(sb.outside), 404);
    await rejectsWith(vc.updateMetadata(join(sb.outside, 'passwd'), { mode: 0o777 }), 404);
    await untouched();
  });
});

describe('special files', () => {
  test('a FIFO: read is 400 at once, no hang; it can be listed, chmod-ed and removed', async () => {
    execFileSync('mkfifo', [join(sb.root, 'fifo')]);
    await rejectsWith(within(vc.readFile('/fifo'), 2000, 'reading a FIFO'), 400, /not a regular file/);
    assert.equal((await vc.stat('/fifo')).type, 'unknown');
    assert.equal((await within(vc.updateMetadata('/fifo', { mode: 0o600, uid: 5 }), 2000, 'chmod of a FIFO')).mode, 0o600);
    await rejectsWith(vc.writeFile('/fifo', bodyOf('x')), 409);
    await within(vc.writeFile('/fifo', bodyOf('x'), { force: true }), 2000, 'replacing a FIFO');
    assert.ok((await lstat(join(sb.root, 'fifo'))).isFile());
  });

  test('a device node is refused before it is opened', async () => {
    // /dev/zero's numbers: reading it would never end.
    execFileSync('mknod', [join(sb.root, 'zero'), 'c', '1', '5']);
    await rejectsWith(within(vc.readFile('/zero'), 2000, 'reading a device'), 400, /not a regular file/);
    await vc.remove('/zero');
  });
});

describe('races (a swap between two steps, through the onStep hook)', () => {
  /** inside: /a/b/f; outside: b/f, where a swapped-in link `a -> outside` would lead. */
  async function layout(): Promise<void> {
    await mkdir(join(sb.root, 'a/b'), { recursive: true });
    await writeFile(join(sb.root, 'a/b/f'), 'inside');
    await mkdir(join(sb.outside, 'b'));
    await writeFile(join(sb.outside, 'b/f'), SECRET);
    outsideBefore = await snapshot(sb.outside);
  }
  /** After the walk opened `/a`: a is renamed to a2 and replaced by a symlink out. */
  function swapAfter(dirPath: string): VolumeContent {
    let swapped = false;
    return new VolumeContent(sb.root, {
      onStep: async (s) => {
        if (s.stage !== 'dir' || s.path !== dirPath || swapped) return;
        swapped = true;
        await rename(join(sb.root, 'a'), join(sb.root, 'a2'));
        await symlink(sb.outside, join(sb.root, 'a'));
      },
    });
  }

  test('read: the walk goes on from the directory it opened, not the name swapped for a link', async () => {
    await layout();
    const { stream } = await swapAfter('/a').readFile('/a/b/f');
    assert.equal(await streamText(stream), 'inside');
    assert.ok((await lstat(join(sb.root, 'a'))).isSymbolicLink(), 'the swap happened');
  });

  test('write: lands in the directory opened (now a2), nothing outside', async () => {
    await layout();
    await swapAfter('/a').writeFile('/a/b/new', bodyOf('data'));
    assert.equal(await readFile(join(sb.root, 'a2/b/new'), 'utf8'), 'data');
    await rm(join(sb.root, 'a'));
    await rename(join(sb.root, 'a2'), join(sb.root, 'a'));
    await swapAfter('/a').writeFile('/a/b/f', bodyOf('over'), { force: true });
    assert.equal(await readFile(join(sb.root, 'a2/b/f'), 'utf8'), 'over');
    await untouched();
  });

  test('makeDir, list, remove, updateMetadata after the swap stay inside', async () => {
    await layout();
    await swapAfter('/a').makeDir('/a/b/c/d', { force: true });
    assert.ok((await stat(join(sb.root, 'a2/b/c/d'))).isDirectory());
    await rm(join(sb.root, 'a'));
    await rename(join(sb.root, 'a2'), join(sb.root, 'a'));

    const listed = await swapAfter('/a').list('/a/b');
    assert.deepEqual(listed.map((e) => e.path), ['/a/b/c', '/a/b/f']);
    await rm(join(sb.root, 'a'));
    await rename(join(sb.root, 'a2'), join(sb.root, 'a'));

    await swapAfter('/a').updateMetadata('/a/b/f', { mode: 0o600, uid: 77 });
    assert.equal((await stat(join(sb.root, 'a2/b/f'))).mode & 0o777, 0o600);
    await rm(join(sb.root, 'a'));
    await rename(join(sb.root, 'a2'), join(sb.root, 'a'));

    await swapAfter('/a').remove('/a/b');
    assert.deepEqual(await names(join(sb.root, 'a2')), []);
    await untouched();
  });

  test('read: a file swapped for a FIFO or a link out after its check is refused', async () => {
    await writeFile(join(sb.root, 'f'), 'inside');
    const swapTo = (make: (p: string) => Promise<void>) => new VolumeContent(sb.root, {
      onStep: async (s) => {
        if (s.stage !== 'final') return;
        await rm(join(sb.root, 'f'));
        await make(join(sb.root, 'f'));
      },
    });
    await rejectsWith(within(swapTo(async (p) => { execFileSync('mkfifo', [p]); }).readFile('/f'), 2000, 'a swapped-in FIFO'), 400, /not a regular file/);
    await rm(join(sb.root, 'f'));
    await writeFile(join(sb.root, 'f'), 'inside');
    await rejectsWith(swapTo((p) => symlink(join(sb.outside, 'passwd'), p)).readFile('/f'), 400, /symlink/);
    await untouched();
  });

  test('updateMetadata: a node swapped for a link after it was opened changes the node, not the target', async () => {
    await writeFile(join(sb.root, 'f'), 'inside');
    await chmod(join(sb.root, 'f'), 0o644);
    const racer = new VolumeContent(sb.root, {
      onStep: async (s) => {
        if (s.stage !== 'final') return;
        await rename(join(sb.root, 'f'), join(sb.root, 'f-moved'));
        await symlink(join(sb.outside, 'passwd'), join(sb.root, 'f'));
      },
    });
    await racer.updateMetadata('/f', { mode: 0o600, uid: 99 });
    const moved = await stat(join(sb.root, 'f-moved'));
    assert.deepEqual([moved.mode & 0o777, moved.uid], [0o600, 99]);
    await untouched();
  });

  test('remove: a subdirectory swapped for a link out before the removal is unlinked, not followed', async () => {
    await mkdir(join(sb.root, 't/sub'), { recursive: true });
    await writeFile(join(sb.root, 't/sub/x'), '');
    const racer = new VolumeContent(sb.root, {
      onStep: async (s) => {
        if (s.stage !== 'final') return;
        await rename(join(sb.root, 't/sub'), join(sb.root, 'sub-moved'));
        await symlink(sb.outside, join(sb.root, 't/sub'));
      },
    });
    await racer.remove('/t');
    assert.deepEqual(await names(sb.root), ['d', 'flink', 'link', 'rel', 'sub-moved', 'up']);
    await untouched();
  });
});

test('no operation leaks a descriptor, whether it succeeds or is refused', async () => {
  const fds = async () => (await readdir('/proc/self/fd')).length;
  execFileSync('mkfifo', [join(sb.root, 'fifo')]);
  await writeFile(join(sb.root, 'd/f'), 'x');
  const before = await fds();
  const ops: (() => Promise<unknown>)[] = [];
  for (const p of ['/', '/d', '/d/f', '/nope', '/d/missing', '/d/nope/x', '/link', '/link/passwd', '/flink', '/fifo', '/d/f/x']) {
    ops.push(() => vc.list(p, 3), () => vc.stat(p), () => vc.updateMetadata(p, { uid: 0 }), () => vc.updateMetadata(p, { mode: 0o700 }),
      () => vc.readFile(p).then(({ stream }) => streamText(stream)), () => vc.makeDir(`${p}/m`), () => vc.writeFile(`${p}/w`, bodyOf('w')));
  }
  for (const op of ops) await op().catch(() => { /* outcomes are checked elsewhere; only descriptors here */ });
  assert.equal(await fds(), before);
  await untouched();
});

test('the root must itself be a directory, not a symlink', async () => {
  const linked = join(sb.base, 'root-link');
  await symlink(sb.outside, linked);
  await assert.rejects(new VolumeContent(linked).list('/'), (err: NodeJS.ErrnoException) => err.code === 'ENOTDIR' || err.code === 'ELOOP');
});
