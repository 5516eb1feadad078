import assert from 'node:assert/strict';
import { open } from 'node:fs/promises';
import { test } from 'node:test';
import { explain } from './build-error.ts';

/**
 * A job's error is the team's to read; a system call's own message names the host path it failed
 * on ("ENOENT: no such file or directory, open '/var/lib/svc/artifacts/.work/…'"), which the
 * team read before 2026-12-01. The path stays in the cause, for the log.
 */
test('errors of system calls are told without the paths they name', async () => {
  const path = '/nonexistent/svc-host-path/staging/rootfs/etc';
  const enoent = await open(path).then(() => assert.fail('opened'), (e: unknown) => e);
  const told = explain(enoent, 'unpacking layer 1/1');
  assert.equal(told.message, 'unpacking layer 1/1 failed: ENOENT in open');
  assert.ok((told.cause as Error).message.includes(path), 'the cause keeps it, for the log');
  const eacces = Object.assign(new Error(`EACCES: permission denied, open '${path}'`), { code: 'EACCES', syscall: 'open', path });
  assert.equal(explain(eacces, 'writing the root filesystem').message, 'permission denied while writing the root filesystem');
});
