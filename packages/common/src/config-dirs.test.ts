import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeDirPrivate, systemDirectory } from './config-dirs.ts';

const modeOf = (p: string) => statSync(p).mode & 0o7777;

test('a directory shared by design, or another user\'s, is never chmodded; one made for svc is made 0700', async () => {
  const base = mkdtempSync(join(tmpdir(), 'svc-private-dir-'));
  try {
    const fresh = join(base, 'a', 'b');
    assert.deepEqual(await makeDirPrivate(fresh), {});
    assert.equal(modeOf(fresh), 0o700);

    const tmpLike = join(base, 'tmp-like');
    mkdirSync(tmpLike);
    chmodSync(tmpLike, 0o1777);
    assert.match((await makeDirPrivate(tmpLike)).leftAlone ?? '', /sticky \(mode 01777\)/);
    assert.equal(modeOf(tmpLike), 0o1777, '/tmp keeps its sticky bit and its users');

    const open = join(base, 'open');
    mkdirSync(open);
    chmodSync(open, 0o777);
    assert.match((await makeDirPrivate(open)).leftAlone ?? '', /world-writable/);
    assert.equal(modeOf(open), 0o777);

    if (process.getuid?.() === 0) {
      const theirs = join(base, 'theirs');
      mkdirSync(theirs, { mode: 0o755 });
      chownSync(theirs, 4321, 4321);
      assert.match((await makeDirPrivate(theirs)).leftAlone ?? '', /belongs to uid 4321/);
      assert.equal(modeOf(theirs), 0o755);
    }

    const mine = join(base, 'mine');
    mkdirSync(mine);
    chmodSync(mine, 0o755);
    assert.deepEqual(await makeDirPrivate(mine), { changedFrom: 0o755 });
    assert.equal(modeOf(mine), 0o700);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});

test('the system\'s own directories are recognised as written and through a link', () => {
  for (const d of ['/', '/tmp', '/tmp/', '/var/tmp', '/home', '/usr', '/etc', '/var', '/root', '/var/lib']) assert.ok(systemDirectory(d), d);
  assert.equal(systemDirectory('/var/lib/svc/volumes'), undefined);
  const base = mkdtempSync(join(tmpdir(), 'svc-system-dir-'));
  try {
    symlinkSync('/tmp', join(base, 'link'));
    assert.equal(systemDirectory(join(base, 'link')), '/tmp');
    assert.equal(systemDirectory(join(base, 'not-yet')), undefined);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});
