import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { BuildError } from './build-error.ts';
import { writeRootfs } from './write-rootfs.ts';

const dir = mkdtempSync(join(tmpdir(), 'tc-write-rootfs-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * An image sized to fit its tree is held to svclet_conf.max_disk_size_mb, the largest disk a
 * sandbox may have: before 2026-12-01 a tree of millions of small files asked mkfs for an image
 * of whatever size it needed. Within it the image is made as before, readable by its owner alone.
 */
test('an image sized to its tree is held to svclet_conf.max_disk_size_mb; within it, it is made 0600', async () => {
  const staging = join(dir, 'rootfs');
  mkdirSync(join(staging, 'etc'), { recursive: true });
  writeFileSync(join(staging, 'etc/hostname'), 'x\n');
  const base = { staging, diskSizeMB: 0, scratchDir: join(dir, 'scratch'), signal: new AbortController().signal };
  const refused = join(dir, 'refused.ext4');
  await assert.rejects(writeRootfs({ ...base, imagePath: refused, maxDiskSizeMB: 16 }),
    (e: Error) => e instanceof BuildError && /^the root filesystem needs about \d+ MB, more than svclet_conf\.max_disk_size_mb \(16 MB\), the largest disk a sandbox may have$/.test(e.message));
  assert.equal(existsSync(refused), false, 'no image was made');
  const made = join(dir, 'made.ext4');
  const size = await writeRootfs({ ...base, imagePath: made, maxDiskSizeMB: 65_536 });
  assert.equal(statSync(made).size, size);
  assert.equal(statSync(made).mode & 0o777, 0o600);
  assert.equal(statSync(base.scratchDir).mode & 0o777, 0o700);
});
