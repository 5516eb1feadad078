import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareDataDir } from './data-dir.ts';

test('a new data directory is made 0700; an existing one keeps its mode, with a warning when others may read it', () => {
  const base = mkdtempSync(join(tmpdir(), 'svc-data-dir-'));
  try {
    const fresh = join(base, 'var', 'lib', 'svc');
    assert.equal(prepareDataDir(fresh), undefined);
    assert.equal(statSync(fresh).mode & 0o777, 0o700);
    const shared = join(base, 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o755);
    assert.match(prepareDataDir(shared) ?? '', /may be read by other users of this host.*chmod 700 it/);
    assert.equal(statSync(shared).mode & 0o777, 0o755, 'never chmodded: it may be the operator\'s');
    chmodSync(shared, 0o700);
    assert.equal(prepareDataDir(shared), undefined);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});

test('a data directory another user owns is refused, naming its owner', { skip: process.getuid?.() !== 0 ? 'needs root to chown' : false }, () => {
  const base = mkdtempSync(join(tmpdir(), 'svc-data-dir-'));
  try {
    const theirs = join(base, 'alice');
    mkdirSync(theirs, { mode: 0o700 });
    chownSync(theirs, 1000, 1000);
    assert.throws(() => prepareDataDir(theirs), /belongs to uid 1000, not to this user \(uid 0\).*chown it, or choose another --data-dir/);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});
