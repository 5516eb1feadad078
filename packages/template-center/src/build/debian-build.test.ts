/**
 * Builds of a `debian_rootfs` source (svc up's own templates) through a real template center:
 * the machine-wide image is copied, the build's egress CA written into the copy, the cached
 * image never touched; a size and a recipe the request names are honoured or refused. The
 * image is a small one made here as debian-image.ts makes it (mmdebstrap itself is
 * base-template.test.ts's).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { JobStatusReport } from '@svc/contracts/template-center';
import { baseRootfsPath } from '../base-template.ts';
import { debianImagePath } from '../debian-image.ts';
import { imageInfo } from '../image/resolved-image.ts';
import { injectSandboxEssentials } from '../rootfs/inject.ts';
import { measureTree } from '../rootfs/measure.ts';
import { makeExt4 } from '../rootfs/mkfs.ts';
import { mountReadOnly } from '../test-support/ext4-mount.ts';
import { startHarness, type Harness } from '../test-support/harness.ts';

const FAKE_CA = '-----BEGIN CERTIFICATE-----\nZGViaWFuLWJ1aWxk\n-----END CERTIFICATE-----\n';
const ROOTS = '-----BEGIN CERTIFICATE-----\nUk9PVFM=\n-----END CERTIFICATE-----\n';

let h: Harness;
let scratch: string;
let cached: string;
const sha = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'tc-debian-'));
  const cacheDir = join(scratch, 'cache');
  const tree = join(scratch, 'tree');
  for (const d of ['etc/ssl/certs', 'usr/local/share/ca-certificates', 'bin']) mkdirSync(join(tree, d), { recursive: true });
  writeFileSync(join(tree, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  writeFileSync(join(tree, 'etc/ssl/certs/ca-certificates.crt'), ROOTS);
  writeFileSync(join(tree, 'bin/hello'), 'hello\n');
  await injectSandboxEssentials(tree, {});
  mkdirSync(cacheDir);
  cached = debianImagePath('base', cacheDir).path;
  const size = await measureTree(tree);
  await makeExt4({ staging: tree, image: cached, sizeMB: 32, tree: size });
  writeFileSync(`${cached}.json`, JSON.stringify({ imageInfo: imageInfo(undefined, { layers: 1, sizeBytes: size.dataBytes }) }));
  const caCertPath = join(scratch, 'ca.pem');
  writeFileSync(caCertPath, FAKE_CA);
  h = await startHarness({ tc: { caCertPath, debianImageDir: cacheDir } });
});

after(async () => {
  await h?.close();
  rmSync(scratch, { recursive: true, force: true });
});

async function final(jobId: string): Promise<JobStatusReport> {
  return h.master.final(jobId, 60_000);
}

test('the cached image is copied and the egress CA written into the copy; the cache stays as it was', async () => {
  const before = sha(cached);
  const req = await h.submit({ kind: 'debian-rootfs', flavor: 'base', recipe: baseRootfsPath({ flavor: 'base' }).key }, { withSvcCa: true });
  const done = await final(req.jobId);
  assert.equal(done.status, 'BUILT', done.error);
  const reports = h.master.reports.get(req.jobId)!;
  assert.deepEqual(reports.map((r) => `${r.status}${r.phase ? `/${r.phase}` : ''}`).filter((s) => s.startsWith('RUNNING')),
    ['RUNNING/PULLING', 'RUNNING/BUILDING', 'RUNNING/UPLOADING']);
  const art = done.artifact!;
  assert.equal(sha(art.location), art.sha256);
  assert.equal(statSync(art.location).size, statSync(cached).size, 'the fitted size of the cached image');
  assert.match(done.imageInfo!.env!.join(' '), /SVC_EGRESS_CA_SHA256=[a-f0-9]{64}/);
  const m = mountReadOnly(art.location);
  try {
    assert.equal(readFileSync(join(m.dir, 'usr/local/share/ca-certificates/svc-egress.crt'), 'utf8'), FAKE_CA);
    const bundle = readFileSync(join(m.dir, 'etc/ssl/certs/ca-certificates.crt'), 'utf8');
    assert.ok(bundle.startsWith(ROOTS) && bundle.endsWith(FAKE_CA), bundle);
    assert.match(readFileSync(join(m.dir, 'etc/passwd'), 'utf8'), /^user:x:1000:/m, 'the essentials the image had stay');
    assert.equal(readFileSync(join(m.dir, 'bin/hello'), 'utf8'), 'hello\n');
    assert.equal(statSync(join(m.dir, 'tmp')).mode & 0o7777, 0o1777);
  } finally {
    m.unmount();
  }
  assert.equal(sha(cached), before, 'the machine-wide image is never written');
  assert.deepEqual(await h.leftovers(), []);
});

test('without the CA, and at a disk size the request names', async () => {
  const req = await h.submit({ kind: 'debian-rootfs', flavor: 'base' }, { withSvcCa: false, diskSizeMB: 48 });
  const done = await final(req.jobId);
  assert.equal(done.status, 'BUILT', done.error);
  assert.equal(statSync(done.artifact!.location).size, 48 * 1024 * 1024);
  assert.ok(!done.imageInfo!.env?.some((e) => e.startsWith('SVC_EGRESS_CA_SHA256=')));
  const m = mountReadOnly(done.artifact!.location);
  try {
    assert.equal(readFileSync(join(m.dir, 'etc/ssl/certs/ca-certificates.crt'), 'utf8'), ROOTS);
  } finally {
    m.unmount();
  }
});

test('a recipe that is not this template center\'s, or a size the files do not fit, fails the build with the reason', async () => {
  const stale = await final((await h.submit({ kind: 'debian-rootfs', flavor: 'base', recipe: '0123456789abcdef' })).jobId);
  assert.equal(stale.status, 'FAILED');
  assert.match(stale.error!, /base@0123456789abcdef: this template center makes recipe [0-9a-f]{16} of base/);
  const small = await final((await h.submit({ kind: 'debian-rootfs', flavor: 'base' }, { diskSizeMB: 1 })).jobId);
  assert.equal(small.status, 'FAILED');
  assert.match(small.error!, /does not fit in diskSizeMB 1|resize2fs/);
  assert.deepEqual(await h.leftovers(), []);
});
