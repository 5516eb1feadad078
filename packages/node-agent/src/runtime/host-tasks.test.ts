import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostTaskLimit, taskCaps } from './host-tasks.ts';

test('the sandboxes together get the host\'s tasks less a quarter kept for the rest of the node', () => {
  // kernel.threads-max of a 24 GiB host, pid_max raised by the agent.
  assert.equal(taskCaps(192_725, 256).allSandboxes, 192_725 - 48_182);
  // The kernel's default pid_max: a quarter is 8,192.
  assert.equal(taskCaps(32_768, 256).allSandboxes, 24_576);
  // A small host keeps at least 4,096, but never more than half.
  assert.equal(taskCaps(10_000, 256).allSandboxes, 5_904);
  assert.equal(taskCaps(1_000, 256).allSandboxes, 500);
});

test('a sandbox gets what its process limit needs, or an eighth of the sandboxes\' budget when that is more', () => {
  // 32768 tasks: the eighth (3,072) is less than 512 + 24 x 256.
  assert.equal(taskCaps(32_768, 256).perSandbox, 512 + 24 * 256);
  // A large host: the eighth, so a churning program runs long before it meets the cap.
  assert.equal(taskCaps(192_725, 256).perSandbox, Math.floor(144_543 / 8));
  assert.equal(taskCaps(192_725, 1024).perSandbox, 512 + 24 * 1024);
  // Never more than all the sandboxes may hold together.
  assert.equal(taskCaps(10_000, 1024).perSandbox, 5_904);
});

test('the host\'s limit is the lower of threads-max and pid_max; an unreadable or empty one is an error, not a cap of 0', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-host-tasks-'));
  try {
    writeFileSync(join(dir, 'threads-max'), '192725\n');
    writeFileSync(join(dir, 'pid_max'), '32768\n');
    assert.equal(await hostTaskLimit(dir), 32_768);
    writeFileSync(join(dir, 'pid_max'), '4194304\n');
    assert.equal(await hostTaskLimit(dir), 192_725);
    writeFileSync(join(dir, 'pid_max'), '\n');
    await assert.rejects(hostTaskLimit(dir), /holds no task count/);
    rmSync(join(dir, 'pid_max'));
    await assert.rejects(hostTaskLimit(dir), /ENOENT/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
