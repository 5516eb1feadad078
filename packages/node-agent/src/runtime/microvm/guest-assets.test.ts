import assert from 'node:assert/strict';
import { watch } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ensureRuntimeDisk } from './guest-assets.ts';

let dir: string;
before(async () => { dir = await mkdtemp(join(tmpdir(), 'runtime-disk-')); });
after(() => rm(dir, { recursive: true, force: true }));

async function bundle(name: string): Promise<{ dir: string; initArgs: string[] }> {
  const b = join(dir, name);
  await mkdir(join(b, 'envd'), { recursive: true });
  await writeFile(join(b, 'envd', 'envd.mjs'), 'console.log("envd")\n');
  return { dir: b, initArgs: [] };
}

// Two mkfs runs of one tree are two filesystems with different checksum seeds: a disk must never
// be replaced once a guest may have booted on it (guest-assets.ts ensureRuntimeDisk).
test('concurrent boots share one runtime disk, and the first one made is never replaced', async () => {
  const b = await bundle('node-a');
  const made = new Set<string>();
  const watcher = watch(dir, (_event, name) => { if (name?.startsWith('node-a.ext4.tmp-')) made.add(name); });
  const calls = [ensureRuntimeDisk(b), ensureRuntimeDisk(b), ensureRuntimeDisk(b)];
  const all = await Promise.all(calls);
  watcher.close();
  const first = all[0]!;
  assert.deepEqual(all, [first, first, first]);
  assert.equal(made.size, 1, `one mkfs for three boots: ${[...made].join(', ')}`);
  const inode = (await stat(first)).ino;
  assert.equal(await ensureRuntimeDisk(b), first);
  assert.equal((await stat(first)).ino, inode);
  assert.deepEqual((await readdir(dir)).filter((n) => n.includes('.tmp-')), [], 'no half-made disk is left');
});

test('a disk another process made first is kept', async () => {
  const b = await bundle('node-b');
  const made = await ensureRuntimeDisk(b);
  const inode = (await stat(made)).ino;
  // Another bundle of the same path, as a second process would find it: nothing rebuilt.
  assert.equal(await ensureRuntimeDisk({ ...b }), made);
  assert.equal((await stat(made)).ino, inode);
});
