import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, renameSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { removeTempDir, tempDir } from '../testing/host.ts';
import { prepareDataRoot, removeVolumeData } from './data-root.ts';

const DIRS = 200;
const FILES = 50;

/**
 * The racing sandbox, in a child process: it holds the volume's directory (its working
 * directory, as a sandbox holds its mount: it stays on the directory whatever it is renamed to)
 * and swaps each subdirectory for a symlink to the victim directory outside the volume.
 */
if (process.argv[2] === 'swapper') {
  const [volume, victim] = process.argv.slice(3);
  process.chdir(volume);
  process.send!('ready');
  await new Promise((r) => process.once('message', r));
  for (let i = 0; i < DIRS; i++) {
    try {
      renameSync(`d${i}`, `moved${i}`);
      symlinkSync(victim, `d${i}`);
    } catch {
      // The walker got there first (or removed the directory): the next one.
    }
  }
  process.exit(0);
}

describe('the local plugin\'s data root', () => {
  let dir: string;
  before(() => {
    dir = tempDir('data-root');
  });
  after(() => removeTempDir(dir));

  it('a root that exists with another mode is made 0700, and the change is reported', async () => {
    const root = join(dir, 'preexisting');
    mkdirSync(root, { mode: 0o755 });
    assert.deepEqual(await prepareDataRoot(root), { changedFrom: 0o755 });
    assert.equal(statSync(root).mode & 0o7777, 0o700);
    assert.deepEqual(await prepareDataRoot(root), {}, 'nothing to change the second time');
    const fresh = join(dir, 'fresh', 'root');
    assert.deepEqual(await prepareDataRoot(fresh), {});
    assert.equal(statSync(fresh).mode & 0o7777, 0o700);
  });

  it('a root shared by design (sticky, /tmp-like) is never chmodded, and the system\'s directories are refused', async () => {
    const shared = join(dir, 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    assert.match((await prepareDataRoot(shared)).leftAlone ?? '', /sticky/);
    assert.equal(statSync(shared).mode & 0o7777, 0o1777, 'its sticky bit and its users kept');
    for (const system of ['/tmp', '/', '/home']) {
      await assert.rejects(prepareDataRoot(system), /is the system directory .*SVC_LOCAL_VOLUME_ROOT/);
    }
    assert.equal(statSync('/tmp').mode & 0o7777, 0o1777);
  });

  it('removing a volume\'s data never follows a directory a holder swaps for a symlink mid-walk', async () => {
    const root = join(dir, 'race', 'root');
    const victim = join(dir, 'race', 'victim');
    mkdirSync(victim, { recursive: true });
    for (let j = 0; j < FILES; j++) writeFileSync(join(victim, `secret${j}`), 'host file');
    const volume = join(root, 'vol1');
    mkdirSync(volume, { recursive: true });
    for (let i = 0; i < DIRS; i++) {
      mkdirSync(join(volume, `d${i}`));
      for (let j = 0; j < FILES; j++) writeFileSync(join(volume, `d${i}`, `secret${j}`), 'y');
    }
    const child = fork(fileURLToPath(import.meta.url), ['swapper', volume, victim], { execArgv: ['--import', 'tsx'] });
    const exited = new Promise((r) => child.once('exit', r));
    await new Promise((r) => child.once('message', r));
    child.send('go');
    // The holder may keep changing the tree until the walker gives up on it (409): that is fine,
    // a Destroy again finishes it. What matters is what is left outside.
    const first = await removeVolumeData(root, 'vol1').then(() => undefined, (err: Error) => err);
    await exited;
    assert.equal(readdirSync(victim).length, FILES, `every file outside the volume is left (${first?.message ?? 'the first removal finished'})`);
    await removeVolumeData(root, 'vol1');
    assert.deepEqual(readdirSync(root), [], 'the data and its tomb are gone');
    assert.equal(readdirSync(victim).length, FILES);
  });

  it('a link to outside the volume is removed as the link; a tree deeper than the walk descends is removed too', async () => {
    const root = join(dir, 'deep', 'root');
    const outside = join(dir, 'deep', 'outside');
    mkdirSync(outside, { recursive: true });
    writeFileSync(join(outside, 'keep'), 'x');
    const volume = join(root, 'vol2');
    mkdirSync(join(volume, ...Array<string>(1030).fill('d')), { recursive: true });
    writeFileSync(join(volume, ...Array<string>(1030).fill('d'), 'bottom'), 'x');
    symlinkSync(outside, join(volume, 'link'));
    symlinkSync(outside, join(volume, ...Array<string>(600).fill('d'), 'link'));
    await removeVolumeData(root, 'vol2');
    assert.deepEqual(readdirSync(root), []);
    assert.deepEqual(readdirSync(outside), ['keep']);
  });

  it('finishes what an interrupted removal left, and a volume without data (or root) is success', async () => {
    const root = join(dir, 'left', 'root');
    mkdirSync(join(root, '.destroying-vol3', 'a'), { recursive: true });
    mkdirSync(join(root, '.destroying-vol3.1', 'b'), { recursive: true });
    mkdirSync(join(root, 'vol3', 'c'), { recursive: true });
    mkdirSync(join(root, 'vol4'), { recursive: true });
    await removeVolumeData(root, 'vol3');
    assert.deepEqual(readdirSync(root), ['vol4'], 'another volume\'s data stays');
    await removeVolumeData(root, 'vol3');
    await removeVolumeData(join(dir, 'no-such-root'), 'vol3');
    assert.equal(existsSync(join(dir, 'no-such-root')), false);
  });

  it('a deep tree in a tomb an interrupted removal left is cut into tombs of new numbers, never onto a left one', async () => {
    const root = join(dir, 'left-deep', 'root');
    mkdirSync(join(root, '.destroying-vol5.1', ...Array<string>(1030).fill('d')), { recursive: true });
    mkdirSync(join(root, '.destroying-vol5', 'e'), { recursive: true });
    mkdirSync(join(root, 'vol5'), { recursive: true });
    await removeVolumeData(root, 'vol5');
    assert.deepEqual(readdirSync(root), []);
  });

  it('a root the operator made a link (to a mount elsewhere) works as before', async () => {
    const real = join(dir, 'linked', 'real');
    mkdirSync(join(real, 'vol5', 'a'), { recursive: true });
    symlinkSync(real, join(dir, 'linked', 'root'));
    await removeVolumeData(join(dir, 'linked', 'root'), 'vol5');
    assert.deepEqual(readdirSync(real), []);
  });
});
