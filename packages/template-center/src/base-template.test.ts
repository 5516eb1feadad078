import assert from 'node:assert/strict';
import { lstatSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { BASE_PACKAGES, baseRootfsPath, buildBaseRootfs, CODE_INTERPRETER_PACKAGES, hostDebianSources, ROOTFS_FLAVORS, type BaseProgress } from './base-template.ts';
import { mountReadOnly } from './test-support/ext4-mount.ts';
import { startHarness } from './test-support/harness.ts';

test('Debian deb822 sources become one-line entries for mmdebstrap', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tc-src-'));
  try {
    const file = join(dir, 'debian.sources');
    writeFileSync(file, [
      'Types: deb', 'URIs: http://deb.debian.org/debian', 'Suites: bookworm bookworm-updates', 'Components: main', 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg', '',
      'Types: deb-src', 'URIs: http://deb.debian.org/debian', 'Suites: bookworm', 'Components: main', '',
      'Types: deb', 'URIs: http://deb.debian.org/debian-security', 'Suites: bookworm-security', 'Components: main contrib', '',
    ].join('\n'));
    assert.deepEqual(hostDebianSources(file), [
      'deb http://deb.debian.org/debian bookworm main',
      'deb http://deb.debian.org/debian bookworm-updates main',
      'deb http://deb.debian.org/debian-security bookworm-security main contrib',
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('each root filesystem flavor has its own tarball, named by it and keyed by its packages', () => {
  const sources = ['deb http://deb.debian.org/debian bookworm main'];
  const base = baseRootfsPath({ sources, cacheDir: '/c' });
  const ci = baseRootfsPath({ sources, cacheDir: '/c', flavor: 'code-interpreter' });
  assert.match(base.path, /^\/c\/base-rootfs-bookworm-[0-9a-f]{16}\.tar$/);
  assert.match(ci.path, /^\/c\/code-interpreter-rootfs-bookworm-[0-9a-f]{16}\.tar$/);
  assert.notEqual(base.key, ci.key);
  assert.deepEqual(ROOTFS_FLAVORS['code-interpreter'], [...BASE_PACKAGES, ...CODE_INTERPRETER_PACKAGES]);
});

// Real mmdebstrap against this machine's Debian mirror; the tarball is cached machine-wide, so
// only the first run on a machine pays for it (about 40-120 s here).
test('base rootfs: built once, cached, and through the pipeline it boots as `user` with sudo', { timeout: 15 * 60_000 }, async () => {
  const phases: BaseProgress['phase'][] = [];
  const first = await buildBaseRootfs({ onProgress: (p) => { if (phases.at(-1) !== p.phase) phases.push(p.phase); } });
  assert.ok(statSync(first.path).size > 50 * 1024 * 1024);
  assert.deepEqual(first.packages, [...BASE_PACKAGES]);
  if (first.cached) assert.deepEqual(phases, ['cached']);
  else assert.deepEqual(phases, ['preparing', 'downloading', 'extracting', 'installing', 'configuring', 'packing', 'done']);
  const again = await buildBaseRootfs();
  assert.equal(again.cached, true);
  assert.equal(again.path, first.path);
  assert.ok(again.durationMs < 1000);

  const h = await startHarness();
  try {
    const req = await h.submit({ kind: 'rootfs-tar', path: first.path }, { withSvcCa: false });
    const r = await h.master.final(req.jobId, 10 * 60_000);
    assert.equal(r.status, 'BUILT', r.error);
    const m = mountReadOnly(r.artifact!.location);
    try {
      const root = m.dir;
      assert.match(readFileSync(join(root, 'etc/passwd'), 'utf8'), /^user:x:1000:1000::\/home\/user:\/bin\/bash$/m);
      assert.equal(readFileSync(join(root, 'etc/sudoers.d/user'), 'utf8'), 'user ALL=(ALL:ALL) NOPASSWD: ALL\n');
      assert.equal(statSync(join(root, 'home/user')).uid, 1000);
      for (const bin of ['usr/bin/bash', 'usr/bin/python3', 'usr/bin/curl', 'usr/bin/sudo', 'usr/bin/ps', 'usr/bin/ip', 'usr/bin/git', 'usr/bin/pip3', 'usr/bin/gcc-12', 'usr/bin/make']) {
        assert.ok(statSync(join(root, bin)).isFile(), bin);
      }
      assert.equal(statSync(join(root, 'usr/bin/sudo')).mode & 0o4000, 0o4000, 'sudo keeps its setuid bit');
      for (const link of ['usr/bin/python', 'usr/bin/node', 'usr/bin/npm', 'usr/bin/gcc']) assert.ok(statSync(join(root, link)).isFile(), link);
      assert.ok(lstatSync(join(root, '.svc')).isDirectory());
      assert.ok(readFileSync(join(root, 'etc/ssl/certs/ca-certificates.crt'), 'utf8').includes('BEGIN CERTIFICATE'));
    } finally {
      m.unmount();
    }
  } finally {
    await h.close();
  }
});
