import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Logger } from '@svc/common';
import { placeSandboxFiles } from './rootfs-files.ts';
import { SANDBOX_SUDO } from './runtime-bundle.ts';

function recordingLogger(): { logger: Logger; warnings: string[] } {
  const warnings: string[] = [];
  const logger = { warn: (_o: unknown, msg: string) => warnings.push(msg), info: () => {}, error: () => {}, debug: () => {} } as unknown as Logger;
  return { logger, warnings };
}

test('a parent the image holds as a symlink is made a directory, and the platform file is written in it', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'svc-rootfs-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  // A tenant's snapshot: /etc -> /etc2, which holds their own ld.so.preload.
  await mkdir(join(root, 'etc2'));
  await writeFile(join(root, 'etc2/ld.so.preload'), '/tenant/evil.so\n');
  await symlink('/etc2', join(root, 'etc'));
  // And a parent held as a plain file.
  await mkdir(join(root, 'usr'));
  await writeFile(join(root, 'usr/local'), 'not a directory');
  const { logger, warnings } = recordingLogger();
  await placeSandboxFiles(root, { '/etc/ld.so.preload': '/.svc/lib/shim.so\n', '/etc/hostname': 'sandbox\n' }, logger);
  assert.ok((await lstat(join(root, 'etc'))).isDirectory(), '/etc is a real directory');
  assert.equal(await readFile(join(root, 'etc/ld.so.preload'), 'utf8'), '/.svc/lib/shim.so\n');
  assert.equal(await readFile(join(root, 'etc/hostname'), 'utf8'), 'sandbox\n');
  assert.equal(await readFile(join(root, 'etc2/ld.so.preload'), 'utf8'), '/tenant/evil.so\n', 'what the link pointed at is not touched');
  assert.equal(await readlink(join(root, 'usr/local/bin/sudo')), SANDBOX_SUDO);
  assert.ok(warnings.some((w) => w.includes('replaced by a directory')), 'the replacement is logged');
});

test('a symlink in the file\'s own place is replaced, never followed', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'svc-rootfs-'));
  const outside = await mkdtemp(join(tmpdir(), 'svc-outside-'));
  t.after(() => Promise.all([rm(root, { recursive: true, force: true }), rm(outside, { recursive: true, force: true })]));
  await mkdir(join(root, 'etc'));
  await writeFile(join(outside, 'hosts'), 'host file\n');
  await symlink(join(outside, 'hosts'), join(root, 'etc/resolv.conf'));
  await placeSandboxFiles(root, { '/etc/resolv.conf': 'nameserver 10.0.0.1\n' }, recordingLogger().logger);
  assert.ok((await lstat(join(root, 'etc/resolv.conf'))).isFile());
  assert.equal(await readFile(join(outside, 'hosts'), 'utf8'), 'host file\n');
});
