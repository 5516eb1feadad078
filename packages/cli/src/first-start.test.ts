/**
 * What `svc up` decides before it starts anything on a fresh machine or data directory
 * (docs/quickstart.md): which microvm set-up a runtime setting needs, how long the minimal
 * kernel is said to take, whether the disk holds a fresh data directory; and a full disk refused
 * by the real `svc up` at once, with the space it needs.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { dataDirShortOfSpace, FRESH_DATA_DIR_BYTES } from './disk-space.ts';
import { kernelBuildMinutes, microvmNeed, minimalKernelCurrent, repositoryScripts } from './microvm-setup.ts';

const GB = 1024 ** 3;

test('microvm set-up: only where the runtime setting can use it', () => {
  assert.equal(microvmNeed('gvisor', true), 'none');
  assert.equal(microvmNeed('auto', false), 'none', 'no /dev/kvm: auto takes gVisor without a probe');
  assert.equal(microvmNeed('auto', true), 'probe');
  assert.equal(microvmNeed('microvm', false), 'run', 'TCG where there is no KVM');
  assert.equal(microvmNeed('gvisor,microvm', false), 'run');
  assert.equal(microvmNeed('bogus', true), 'none', 'a bad setting is the configuration check\'s to refuse');
});

test('the minimal kernel\'s announced build time follows the cores', () => {
  assert.equal(kernelBuildMinutes(2), 8);
  assert.equal(kernelBuildMinutes(16), 2);
  assert.equal(kernelBuildMinutes(128), 1);
  assert.equal(kernelBuildMinutes(0), 15, 'nonsense core counts count as one');
});

test('which guest kernel is current: the minimal one is a custom-* directory', () => {
  const root = mkdtempSync(join(tmpdir(), 'svc-kernels-'));
  try {
    mkdirSync(join(root, 'custom-6.1.1-abc'));
    mkdirSync(join(root, '6.1.0-56-cloud-amd64'));
    assert.equal(minimalKernelCurrent(join(root, 'current')), false, 'no link yet');
    symlinkSync('6.1.0-56-cloud-amd64', join(root, 'current'));
    assert.equal(minimalKernelCurrent(join(root, 'current')), false);
    rmSync(join(root, 'current'));
    symlinkSync('custom-6.1.1-abc', join(root, 'current'));
    assert.equal(minimalKernelCurrent(join(root, 'current')), true);
    assert.equal(minimalKernelCurrent(join(root, 'custom-6.1.1-abc')), false, 'a directory the operator named is not judged');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  assert.ok(repositoryScripts()?.endsWith('/scripts'), 'the checkout\'s scripts are found from here');
});

test('a fresh data directory needs room for its templates; the message says how much and what helps', () => {
  const need = FRESH_DATA_DIR_BYTES.base + FRESH_DATA_DIR_BYTES.codeInterpreter;
  assert.equal(dataDirShortOfSpace('/d', true, need), undefined);
  assert.equal(dataDirShortOfSpace('/d', false, FRESH_DATA_DIR_BYTES.base), undefined, 'base alone fits');
  const short = dataDirShortOfSpace('/d', true, 1.5 * GB);
  assert.match(short!, /\/d has 1\.5 GB free; a fresh one needs about 5\.0 GB/);
  assert.match(short!, /2\.0 GB with --no-code-interpreter/);
  assert.match(dataDirShortOfSpace('/d', false, 0.5 * GB)!, /needs about 2\.0 GB for its templates: free some space/);
  assert.equal(dataDirShortOfSpace('/d', true, undefined), undefined, 'a filesystem that cannot be asked is not refused');
});

test('svc up on a data directory with too little room refuses at once with the space it needs (exit 2)', { skip: process.getuid?.() !== 0 && 'needs root to mount a small tmpfs' }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-full-'));
  const run = (cmd: string, args: string[]) => new Promise<{ code: number; stdout: string; stderr: string }>((res) => {
    execFile(cmd, args, { timeout: 60_000 }, (err, stdout, stderr) => res({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
  assert.equal((await run('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'svc-full-test', dir])).code, 0);
  try {
    const t0 = Date.now();
    const r = await run(process.execPath, [resolve(import.meta.dirname, '../bin/svc.mjs'), 'up', '--data-dir', join(dir, 'data')]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /svc up: the data directory .*data has 0\.1 GB free; a fresh one needs about 5\.0 GB/);
    assert.ok(Date.now() - t0 < 30_000, 'refused before anything starts');
  } finally {
    await run('umount', [dir]);
    rmSync(dir, { recursive: true, force: true });
  }
});
