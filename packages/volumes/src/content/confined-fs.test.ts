import assert from 'node:assert/strict';
import { mkdir, readdir, rename, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';
import { SvcError } from '@svc/common';
import { ConfinedDir, MAX_PATH_BYTES, normalizeVolumePath, pathComponents, walkDirs } from './confined-fs.ts';
import { makeSandbox, type Sandbox } from './test-support.ts';

let sb: Sandbox;
afterEach(() => sb.cleanup());
beforeEach(async () => {
  sb = await makeSandbox();
});

async function openFds(): Promise<number> {
  return (await readdir('/proc/self/fd')).length;
}

test('normalizeVolumePath: as Go filepath.Clean("/" + path), .. clamped at the root', () => {
  const cases: [string, string][] = [
    ['/', '/'], ['.', '/'], ['a', '/a'], ['/a/b/', '/a/b'], ['a//b', '/a/b'], ['./a/./b', '/a/b'],
    ['..', '/'], ['/../..', '/'], ['/a/../../b', '/b'], ['a/b/../c', '/a/c'], ['/etc/passwd', '/etc/passwd'],
    ['...', '/...'], ['a/..b', '/a/..b'], ['\\..\\', '/\\..\\'],
  ];
  for (const [input, want] of cases) assert.equal(normalizeVolumePath(input), want, input);
  assert.deepEqual(pathComponents('/'), []);
  assert.deepEqual(pathComponents('/a/b'), ['a', 'b']);
});

test('normalizeVolumePath: missing, empty, NUL and over-long paths are 400', () => {
  for (const bad of [undefined, '', 'a\0b', 42, `/${'x'.repeat(MAX_PATH_BYTES)}`, '/' + 'é'.repeat(2048)]) {
    assert.throws(() => normalizeVolumePath(bad), (e: unknown) => e instanceof SvcError && e.status === 400, String(bad).slice(0, 20));
  }
  assert.equal(normalizeVolumePath(`/${'x'.repeat(MAX_PATH_BYTES - 1)}`).length, MAX_PATH_BYTES);
});

test('ConfinedDir.at refuses anything but one plain component', async () => {
  const root = await ConfinedDir.openRoot(sb.root);
  try {
    for (const bad of ['', '.', '..', 'a/b', '/a', 'a\0']) assert.throws(() => root.at(bad), /single path component/, bad);
    assert.equal(root.at('ok'), `/proc/self/fd/${root.fd}/ok`);
  } finally {
    await root.close();
  }
});

test('walkDirs follows the descriptors it opened, not names swapped since', async () => {
  await mkdir(join(sb.root, 'a/b/c'), { recursive: true });
  await writeFile(join(sb.root, 'a/b/c/marker'), 'inside');
  await mkdir(join(sb.outside, 'b/c'), { recursive: true });
  const root = await ConfinedDir.openRoot(sb.root);
  try {
    const seen: string[] = [];
    const dir = await walkDirs(root, ['a', 'b', 'c'], {
      onStep: async ({ path }) => {
        seen.push(path);
        if (path === '/a') {
          // The parent is renamed and a link out put in its place, between two steps.
          await rename(join(sb.root, 'a'), join(sb.root, 'moved'));
          await symlink(sb.outside, join(sb.root, 'a'));
        }
      },
    });
    try {
      assert.deepEqual(seen, ['/a', '/a/b', '/a/b/c']);
      assert.equal(dir.volumePath, '/a/b/c');
      assert.deepEqual(await readdir(`/proc/self/fd/${dir.fd}`), ['marker']);
    } finally {
      await dir.close();
    }
  } finally {
    await root.close();
  }
});

test('walkDirs refuses a symlink or a file in any component (ENOTDIR), and a missing one (ENOENT)', async () => {
  await mkdir(join(sb.root, 'd'));
  await symlink(sb.outside, join(sb.root, 'd/link'));
  await symlink('.', join(sb.root, 'self'));
  await writeFile(join(sb.root, 'f'), '');
  const root = await ConfinedDir.openRoot(sb.root);
  try {
    for (const parts of [['d', 'link'], ['self'], ['self', 'd'], ['f'], ['f', 'x']]) {
      await assert.rejects(walkDirs(root, parts), (e: NodeJS.ErrnoException) => e.code === 'ENOTDIR', parts.join('/'));
    }
    await assert.rejects(walkDirs(root, ['d', 'nope']), (e: NodeJS.ErrnoException) => e.code === 'ENOENT');
  } finally {
    await root.close();
  }
});

test('walkDirs: createMissing makes missing components; descriptors are not leaked', async () => {
  const before = await openFds();
  const root = await ConfinedDir.openRoot(sb.root);
  const made: string[] = [];
  const dir = await walkDirs(root, ['x', 'y', 'z'], {
    createMissing: async (parent, name) => {
      made.push(`${parent.volumePath}:${name}`);
      await parent.mkdir(name, 0o755);
    },
  });
  assert.deepEqual(made, ['/:x', '/x:y', '/x/y:z']);
  assert.equal(await openFds(), before + 2, 'the root and the last directory only');
  await dir.close();
  await assert.rejects(walkDirs(root, ['x', 'nope', 'deeper']));
  await root.close();
  assert.equal(await openFds(), before);
  // An empty walk is the root itself.
  const r2 = await ConfinedDir.openRoot(sb.root);
  assert.equal(await walkDirs(r2, []), r2);
  await r2.close();
});
