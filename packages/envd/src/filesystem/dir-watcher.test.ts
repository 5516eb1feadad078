import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { EventType } from '@svc/contracts/envd/filesystem/filesystem_pb';
import { DirWatcher, type ChangeEvent } from './dir-watcher.ts';

let root: string;
before(async () => {
  root = await mkdtemp(join(tmpdir(), 'envd-watch-'));
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Runs `act` in a fresh directory and returns what the watcher reported. */
async function observe(recursive: boolean, setup: (dir: string) => Promise<void>, act: (dir: string) => Promise<void>) {
  const dir = await mkdtemp(join(root, 'case-'));
  await setup(dir);
  const events: ChangeEvent[] = [];
  const watcher = await DirWatcher.open(dir, recursive, { events: (e) => events.push(...e), error: (e) => assert.fail(e) });
  await act(dir);
  await new Promise((r) => setTimeout(r, 300));
  watcher.close();
  return events.map((e) => `${EventType[e.type]} ${e.name}`);
}

const none = async () => {};

test('creating and writing a file', async () => {
  const events = await observe(false, none, (d) => writeFile(join(d, 'a.txt'), 'hello'));
  assert.equal(events[0], 'CREATE a.txt');
  assert.ok(events.includes('WRITE a.txt'), events.join(', '));
});

test('removing a file', async () => {
  const events = await observe(false, (d) => writeFile(join(d, 'a.txt'), 'x'), (d) => rm(join(d, 'a.txt')));
  assert.deepEqual(events, ['REMOVE a.txt']);
});

test('renaming a file reports rename then create', async () => {
  const events = await observe(false, (d) => writeFile(join(d, 'a.txt'), 'x'), (d) => rename(join(d, 'a.txt'), join(d, 'b.txt')));
  assert.deepEqual(events, ['RENAME a.txt', 'CREATE b.txt']);
});

test('renaming over an existing file', async () => {
  const events = await observe(
    false,
    async (d) => {
      await writeFile(join(d, 'a.txt'), 'x');
      await writeFile(join(d, 'b.txt'), 'y');
    },
    (d) => rename(join(d, 'a.txt'), join(d, 'b.txt')),
  );
  assert.deepEqual(events, ['RENAME a.txt', 'CREATE b.txt']);
});

test('chmod is not a write', async () => {
  const events = await observe(false, (d) => writeFile(join(d, 'a.txt'), 'x'), (d) => chmod(join(d, 'a.txt'), 0o600));
  assert.deepEqual(events, ['CHMOD a.txt']);
});

test('a file created and removed at once is reported as both', async () => {
  const events = await observe(false, none, async (d) => {
    await writeFile(join(d, 'tmp'), 'x');
    await rm(join(d, 'tmp'));
  });
  assert.equal(events[0], 'CREATE tmp');
  assert.equal(events.at(-1), 'REMOVE tmp');
});

test('recursive watching follows new subdirectories', async () => {
  const events = await observe(true, (d) => mkdir(join(d, 'sub')), async (d) => {
    await writeFile(join(d, 'sub', 'x.txt'), '1');
    await mkdir(join(d, 'new', 'deep'), { recursive: true });
    await new Promise((r) => setTimeout(r, 100));
    await writeFile(join(d, 'new', 'deep', 'y.txt'), '2');
  });
  for (const expected of ['CREATE sub/x.txt', 'CREATE new', 'CREATE new/deep', 'CREATE new/deep/y.txt']) {
    assert.ok(events.includes(expected), `${expected} missing from ${events.join(', ')}`);
  }
});

test('without recursion, changes in subdirectories are not reported', async () => {
  const events = await observe(false, (d) => mkdir(join(d, 'sub')), (d) => writeFile(join(d, 'sub', 'x.txt'), '1'));
  assert.ok(!events.some((e) => e.includes('x.txt')), events.join(', '));
});

test('removing the watched directory is reported once', async () => {
  const events = await observe(false, none, (d) => rm(d, { recursive: true }));
  assert.deepEqual(events, ['REMOVE .']);
});

test('a root that cannot be read answers with the errno\'s code, as every envd route does (a file: invalid_argument, not internal)', async () => {
  const file = join(root, 'plain-file');
  await writeFile(file, 'x');
  await assert.rejects(DirWatcher.open(file, false, { events: () => {}, error: () => {} }), (e: Error & { code?: unknown }) => {
    assert.match(e.message, /error watching .*plain-file/);
    assert.equal(String(e.code), 'invalid_argument');
    return true;
  });
  await assert.rejects(DirWatcher.open(join(root, 'missing'), false, { events: () => {}, error: () => {} }), (e: Error & { code?: unknown }) => String(e.code) === 'not_found');
});
