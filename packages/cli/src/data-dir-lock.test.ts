import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataDirLocked, lockDataDir, processIdentity } from './data-dir-lock.ts';

const withDir = (fn: (dir: string) => void) => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-lock-'));
  try { fn(dir); } finally { rmSync(dir, { recursive: true, force: true }); }
};

test('a second svc up on a data directory is refused while the first runs, and starts once it has released', () => {
  withDir((dir) => {
    const first = lockDataDir(dir);
    assert.throws(() => lockDataDir(dir), (err: Error) => err instanceof DataDirLocked && new RegExp(`already running .*pid ${process.pid}`).test(err.message));
    assert.deepEqual(readdirSync(dir), ['svc.lock'], 'nothing else left behind');
    first.release();
    assert.equal(existsSync(join(dir, 'svc.lock')), false);
    lockDataDir(dir).release();
  });
});

test('a lock left by a crashed run, or whose pid another process now has, does not block the next start', () => {
  withDir((dir) => {
    const lock = join(dir, 'svc.lock');
    const gone = spawnSync('true').pid!;
    writeFileSync(lock, JSON.stringify(processIdentity(gone)));
    const a = lockDataDir(dir);
    assert.equal(JSON.parse(readFileSync(lock, 'utf8')).pid, process.pid);
    a.release();
    // This very pid, but another start time: the pid was reused after the holder ended.
    writeFileSync(lock, JSON.stringify({ ...processIdentity(process.pid), start: '1' }));
    lockDataDir(dir).release();
    writeFileSync(lock, 'torn');
    lockDataDir(dir).release();
  });
});

test('a release never removes a lock another start took over', () => {
  withDir((dir) => {
    const a = lockDataDir(dir);
    writeFileSync(join(dir, 'svc.lock'), JSON.stringify({ pid: 1, boot: '', start: '' }));
    a.release();
    assert.ok(existsSync(join(dir, 'svc.lock')));
  });
});
