import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repositoryScripts } from './microvm-setup.ts';

/** A checkout: <root>/scripts/*.sh and <root>/packages/cli/src, where the search starts. */
function checkout(): { root: string; from: string } {
  const root = mkdtempSync(join(tmpdir(), 'svc-checkout-'));
  chmodSync(root, 0o755);
  const from = join(root, 'packages', 'cli', 'src');
  mkdirSync(from, { recursive: true });
  mkdirSync(join(root, 'scripts'), { mode: 0o755 });
  for (const s of ['install-system-deps.sh', 'guest-kernel.sh', 'guest-kernel-build.sh']) writeFileSync(join(root, 'scripts', s), '#!/bin/sh\n', { mode: 0o755 });
  return { root, from };
}

test('as root, scripts another user owns or may change are not run; root\'s own are', { skip: process.getuid?.() !== 0 && 'needs root' }, () => {
  const { root, from } = checkout();
  try {
    assert.equal(repositoryScripts(from, 0), join(root, 'scripts'));
    const reasons: string[] = [];
    chmodSync(join(root, 'scripts', 'guest-kernel.sh'), 0o757);
    assert.equal(repositoryScripts(from, 0, (why) => reasons.push(why)), undefined);
    assert.match(reasons[0]!, /guest-kernel\.sh may be changed by other users \(mode 0757\): svc up runs these scripts as root/);
    chmodSync(join(root, 'scripts', 'guest-kernel.sh'), 0o755);
    chownSync(join(root, 'scripts'), 1000, 1000);
    assert.equal(repositoryScripts(from, 0, (why) => reasons.push(why)), undefined);
    assert.match(reasons[1]!, /scripts belongs to uid 1000, not root/);
    assert.equal(repositoryScripts(from, 1000), join(root, 'scripts'), 'a user\'s own svc runs nothing as root');
    chownSync(join(root, 'scripts'), 0, 0);
    chmodSync(root, 0o777);
    assert.equal(repositoryScripts(from, 0), undefined, 'nor from a checkout others may rearrange');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  assert.ok(repositoryScripts(undefined, 0)?.endsWith('/scripts'), 'this checkout (root\'s) keeps working');
});
