import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { progressKey, type JobProgress } from '@svc/contracts/template-center';
import { startHarness, type Harness } from './test-support/harness.ts';
import { startMiniRegistry } from './test-support/mini-registry.ts';
import { OciLayoutWriter } from './test-support/oci-builder.ts';
import { freePort, pushLayout, startRegistry, type TestRegistry } from './test-support/registry-server.ts';

let h: Harness;
let registry: TestRegistry;
let scratch: string;
let layout: string;
let layerDigest: string;

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'tc-fail-'));
  layout = join(scratch, 'layout');
  const w = new OciLayoutWriter(layout);
  const img = await w.tag({
    layers: [
      { entries: [{ name: 'etc/', type: 'directory' }, { name: 'etc/hostname', content: 'x\n' }] },
      { entries: [{ name: 'payload', content: randomBytes(2 * 1024 * 1024) }] },
    ],
  }, 'v1');
  layerDigest = img.layers[1].digest;
  await w.write();
  registry = await startRegistry();
  await pushLayout(layout, 'v1', `${registry.host}/test/app:v1`);
  await pushLayout(layout, 'v1', `${registry.host}/test/corrupt:v1`);
  h = await startHarness();
});

after(async () => {
  await h?.close();
  await registry?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

async function failed(h: Harness, req: { jobId: string }) {
  const r = await h.master.final(req.jobId, 60_000);
  assert.equal(r.status, 'FAILED', 'expected the build to fail');
  assert.ok(!h.master.reports.get(req.jobId)!.some((x) => x.status === 'BUILT'));
  return r.error!;
}

function withTmpfs<T>(sizeKB: number, fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'tc-tmpfs-'));
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeKB}k`, 'tmpfs', dir], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return fn(dir).finally(() => {
    spawnSync('umount', [dir]);
    rmSync(dir, { recursive: true, force: true });
  });
}

describe('builds that fail say why and leave nothing behind', () => {
  test('missing tag', async () => {
    const req = await h.submit({ kind: 'registry', ref: `${registry.host}/test/app:nope`, insecure: true });
    assert.equal(await failed(h, req), `manifest unknown: tag 'nope' not found in ${registry.host}/test/app`);
    assert.deepEqual(await h.leftovers(), []);
  });

  test('missing repository and unreachable registry', async () => {
    const req = await h.submit({ kind: 'registry', ref: `${registry.host}/test/none:v1`, insecure: true });
    assert.match(await failed(h, req), /not found in|repository .* not found/);
    const port = await freePort();
    const req2 = await h.submit({ kind: 'registry', ref: `127.0.0.1:${port}/test/app:v1`, insecure: true });
    assert.match(await failed(h, req2), new RegExp(`^cannot reach registry 127\\.0\\.0\\.1:${port}: connect ECONNREFUSED`));
  });

  test('a registry on the template center\'s host that template_center.host_registries does not name is refused', async () => {
    const strict = await startHarness({ config: { host_registries: 'localhost:5000' } });
    try {
      const req = await strict.submit({ kind: 'registry', ref: `${registry.host}/test/app:v1`, insecure: true });
      assert.match(await failed(strict, req), /^registry 127\.0\.0\.1:\d+ is on the host the template center runs on \(127\.0\.0\.1 is loopback\); builds pull from a registry there only when the operator names it in template_center\.host_registries/);
      assert.deepEqual(await strict.leftovers(), []);
    } finally {
      await strict.close();
    }
  });

  test('plain-HTTP registry with insecure: false (HTTPS asked for) gets a hint', async () => {
    const req = await h.submit({ kind: 'registry', ref: `${registry.host}/test/app:v1`, insecure: false });
    assert.equal(await failed(h, req), `cannot reach registry ${registry.host}: EPROTO wrong version number (it looks like a plain-HTTP registry: set insecure)`);
  });

  test('corrupt layer: digest mismatch', async () => {
    const hex = layerDigest.slice(7);
    const blob = join(registry.dir, 'data/docker/registry/v2/blobs/sha256', hex.slice(0, 2), hex, 'data');
    const data = readFileSync(blob);
    for (let i = 1000; i < 1100; i++) data[i] ^= 0xff;
    writeFileSync(blob, data);
    try {
      const req = await h.submit({ kind: 'registry', ref: `${registry.host}/test/corrupt:v1`, insecure: true });
      assert.match(await failed(h, req), new RegExp(`^layer ${layerDigest} digest mismatch`));
      assert.deepEqual(await h.leftovers(), []);
      assert.deepEqual(readdirSync(h.artifactDir).filter((n) => !n.startsWith('.')), []);
    } finally {
      for (let i = 1000; i < 1100; i++) data[i] ^= 0xff;
      writeFileSync(blob, data);
    }
  });

  test('full disk while writing the root filesystem', async () => {
    // The 2 MiB random layer cannot fit: the image's data blocks alone overflow 1.5 MiB.
    await withTmpfs(1536, async (small) => {
      const hs = await startHarness({ artifactDir: small });
      try {
        const req = await hs.submit({ kind: 'registry', ref: `${registry.host}/test/app:v1`, insecure: true });
        assert.match(await failed(hs, req), /^no space left on device while writing the root filesystem/);
        assert.deepEqual(await hs.leftovers(), []);
        assert.deepEqual(readdirSync(small).filter((n) => n !== '.tmp'), []);
      } finally {
        await hs.close();
      }
    });
  });

  test('full disk while unpacking', async () => {
    await withTmpfs(1024, async (small) => {
      const hs = await startHarness({ workDir: join(small, 'work') });
      try {
        const req = await hs.submit({ kind: 'registry', ref: `${registry.host}/test/app:v1`, insecure: true });
        assert.match(await failed(hs, req), /^no space left on device while unpacking layer 2\/2 sha256:[a-f0-9]{12}/);
        assert.deepEqual(await hs.leftovers(), []);
      } finally {
        await hs.close();
      }
    });
  });

  test('template center closed mid-build: the job stops and never reports BUILT', async () => {
    const slow = await startMiniRegistry(layout, { slowBytesPerSec: 256 * 1024 });
    const hs = await startHarness();
    try {
      const req = await hs.submit({ kind: 'registry', ref: `${slow.host}/test/app:v1`, insecure: true });
      // Wait until the big layer is half-way through.
      for (let i = 0; ; i++) {
        const raw = await hs.coordination.kvGet(progressKey(req.jobId));
        const p = raw ? (JSON.parse(raw) as JobProgress) : undefined;
        if ((p?.layers[1]?.doneBytes ?? 0) > 256 * 1024) break;
        assert.ok(i < 200, 'the pull did not start');
        await new Promise((r) => setTimeout(r, 50));
      }
      const workDir = hs.workDir;
      assert.equal(readdirSync(workDir).length, 1, 'a staging dir exists during the build');
      await hs.tc.close();
      assert.equal(hs.tc.activeJobs(), 0);
      assert.deepEqual(readdirSync(workDir), [], 'staging removed');
      await new Promise((r) => setTimeout(r, 500));
      const reports = hs.master.reports.get(req.jobId) ?? [];
      assert.ok(!reports.some((r) => r.status === 'BUILT'));
      const last = reports.at(-1);
      if (last?.status === 'FAILED') assert.match(last.error!, /template center stopped during the build/);
      assert.equal(existsSync(join(hs.artifactDir, `${req.artifactId}.ext4`)), false);
    } finally {
      await hs.close();
      await slow.close();
    }
  });

  // Without a deadline a build that hung (a registry trickling its layer) held its slot for good,
  // and with every slot held no build ran at all.
  test('a build past master.build_timeout_sec fails, says so, leaves nothing and frees its slot', async () => {
    const slow = await startMiniRegistry(layout, { slowBytesPerSec: 64 * 1024 });
    const hs = await startHarness({ tc: { buildTimeoutMs: 1000, maxConcurrentBuilds: 1 } });
    try {
      // One slot: the second build runs only once the first has given it back.
      const first = await hs.submit({ kind: 'registry', ref: `${slow.host}/test/app:v1`, insecure: true });
      const second = await hs.submit({ kind: 'registry', ref: `${slow.host}/test/app:v1`, insecure: true }, { specHash: 'another-spec' });
      for (const req of [first, second]) {
        assert.equal(await failed(hs, req), 'the build did not finish within master.build_timeout_sec (1 s) and was stopped');
      }
      for (let i = 0; hs.tc.activeJobs() > 0; i++) {
        assert.ok(i < 100, 'the jobs ended after their reports');
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.deepEqual(await hs.leftovers(), []);
    } finally {
      await hs.close();
      await slow.close();
    }
  });

  test('master down: the callback is retried until it answers', async () => {
    h.master.failing = true;
    const req = await h.submit({ kind: 'registry', ref: `${registry.host}/test/app:v1`, insecure: true });
    await new Promise((r) => setTimeout(r, 2500));
    assert.equal(h.master.reports.get(req.jobId), undefined);
    h.master.failing = false;
    const r = await h.master.final(req.jobId, 30_000);
    assert.equal(r.status, 'BUILT');
  });

  test('source files that are not what they claim', async () => {
    const notTar = join(scratch, 'not-a-tar');
    writeFileSync(notTar, 'hello');
    const r1 = await h.submit({ kind: 'docker-archive', path: notTar });
    assert.match(await failed(h, r1), /docker archive .*not-a-tar/);
    const dir = join(scratch, 'empty-dir');
    mkdirSync(dir, { recursive: true });
    const r2 = await h.submit({ kind: 'oci-layout', path: dir });
    assert.match(await failed(h, r2), /is not an OCI image layout/);
    const r3 = await h.submit({ kind: 'rootfs-tar', path: join(scratch, 'missing.tar') });
    assert.match(await failed(h, r3), /does not exist/);
    assert.deepEqual(await h.leftovers(), []);
  });
});
