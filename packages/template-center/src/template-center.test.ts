import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, lstatSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConfigError, defaultConfig, MemoryCoordination, silentLogger } from '@svc/common';
import { progressKey, type JobProgress, type JobStatusReport } from '@svc/contracts/template-center';
import { compress, OciLayoutWriter, tarOf, type ImageSpec } from './test-support/oci-builder.ts';
import { mountReadOnly } from './test-support/ext4-mount.ts';
import { startHarness, TOKEN, type Harness } from './test-support/harness.ts';
import { startTemplateCenter } from './template-center.ts';
import { pushLayout, startRegistry, type TestRegistry } from './test-support/registry-server.ts';

const FAKE_CA = '-----BEGIN CERTIFICATE-----\nTUlJQ0ZBS0VDQQ==\n-----END CERTIFICATE-----\n';

/** Three layers exercising whiteouts, an opaque directory, links, a device node and ownership. */
const LAYERED: ImageSpec = {
  config: { Env: ['PATH=/usr/bin:/bin', 'FOO=bar'], Cmd: ['/bin/sh', '-c', 'echo hi'], WorkingDir: '/srv', User: 'root' },
  layers: [
    {
      compression: 'gzip',
      entries: [
        { name: 'etc/', type: 'directory' },
        { name: 'etc/passwd', content: 'root:x:0:0:root:/root:/bin/sh\n' },
        { name: 'etc/group', content: 'root:x:0:\n' },
        { name: 'etc/os-release', content: 'ID=svctest\n' },
        { name: 'etc/ssl/certs/', type: 'directory' },
        { name: 'etc/ssl/certs/ca-certificates.crt', content: '-----BEGIN CERTIFICATE-----\nUk9PVA==\n-----END CERTIFICATE-----\n' },
        { name: 'bin/', type: 'directory' },
        { name: 'bin/tool', content: '#!/bin/sh\necho tool\n', mode: 0o4755, uid: 0, gid: 0 },
        { name: 'bin/sh', type: 'symlink', linkname: 'tool' },
        { name: 'bin/tool-hardlink', type: 'link', linkname: 'bin/tool' },
        { name: 'data/', type: 'directory', uid: 1234, gid: 4321, mode: 0o750 },
        { name: 'data/owned', content: 'x', uid: 1234, gid: 4321, mode: 0o640 },
        { name: 'del/', type: 'directory' },
        { name: 'del/gone', content: 'remove me' },
        { name: 'del/stays', content: 'stay' },
        { name: 'opq/', type: 'directory' },
        { name: 'opq/lower', content: 'lower' },
        { name: 'dev/', type: 'directory' },
        { name: 'dev/null', type: 'character-device', devmajor: 1, devminor: 3, mode: 0o666 },
      ],
    },
    {
      compression: 'zstd',
      entries: [
        { name: 'del/.wh.gone', content: '' },
        { name: 'opq/', type: 'directory' },
        { name: 'opq/.wh..wh..opq', content: '' },
        { name: 'opq/upper', content: 'upper' },
        { name: 'usr/share/big/', type: 'directory' },
        { name: 'usr/share/big/blob', content: Buffer.alloc(3 * 1024 * 1024, 7) },
      ],
    },
    {
      compression: 'none',
      entries: [
        { name: 'etc/resolv.conf', type: 'symlink', linkname: '../run/systemd/resolve/stub-resolv.conf' },
        { name: 'srv/', type: 'directory' },
        { name: 'srv/app.txt', content: 'app' },
      ],
    },
  ],
};

const arch = (a: string): ImageSpec => ({ platform: { os: 'linux', architecture: a }, layers: [{ entries: [{ name: 'arch', content: a }] }] });

let h: Harness;
let registry: TestRegistry;
let layoutDir: string;
let scratch: string;

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'tc-it-'));
  layoutDir = join(scratch, 'layout');
  const w = new OciLayoutWriter(layoutDir);
  await w.tag(LAYERED, 'layers');
  // docker archives cannot hold zstd layers: the same image with gzip only.
  await w.tag({ ...LAYERED, layers: LAYERED.layers.map((l) => ({ ...l, compression: l.compression === 'zstd' ? 'gzip' : l.compression })) }, 'layers-gzip');
  await w.tagIndex([arch('amd64'), arch('arm64')], 'multi');
  await w.write();
  registry = await startRegistry();
  await pushLayout(layoutDir, 'layers', `${registry.host}/test/layered:v1`);
  await pushLayout(layoutDir, 'multi', `${registry.host}/test/multi:v1`);
  const caPath = join(scratch, 'ca.pem');
  writeFileSync(caPath, FAKE_CA);
  h = await startHarness({ tc: { caCertPath: caPath } });
});

after(async () => {
  await h?.close();
  await registry?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

async function built(jobId: string): Promise<JobStatusReport> {
  const r = await h.master.final(jobId, 120_000);
  assert.equal(r.status, 'BUILT', `job failed: ${r.error}`);
  return r;
}

function withMounted<T>(path: string, fn: (root: string) => T): T {
  const m = mountReadOnly(path);
  try { return fn(m.dir); } finally { m.unmount(); }
}

describe('authentication', () => {
  test('token required on every /tc/api/v1 route; /health open', async () => {
    const health = await fetch(`${h.tc.url}/health`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { ok: true, store: 'local' });
    const noToken = await fetch(`${h.tc.url}/tc/api/v1/build`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(noToken.status, 401);
    const wrong = await fetch(`${h.tc.url}/tc/api/v1/artifact/x`, { headers: { 'x-svc-template-callback-token': 'nope' } });
    assert.equal(wrong.status, 401);
    const bad = await fetch(`${h.tc.url}/tc/api/v1/build`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-svc-template-callback-token': TOKEN }, body: '{"jobId":"j"}' });
    assert.equal(bad.status, 400);
  });

  test('insecure_no_token without a token beyond loopback is a configuration error, as for the other components', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tc-insecure-'));
    try {
      const cfg = defaultConfig(dir);
      Object.assign(cfg.template_center, { listen: '0.0.0.0:0', callback_token: '', insecure_no_token: true });
      const started = await startTemplateCenter(cfg, { logger: silentLogger(), coordination: new MemoryCoordination(), workDir: join(dir, 'work') }).catch((err: Error) => err);
      if (!(started instanceof Error)) await started.close();
      assert.ok(started instanceof ConfigError, String(started));
      assert.match(started.message, /template_center\.insecure_no_token: .*0\.0\.0\.0:0 is not a loopback address/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('no token configured: 503 (fail closed) unless insecure_no_token', async () => {
    const closed = await startHarness({ token: '' });
    const open = await startHarness({ token: '', insecure: true });
    try {
      const r1 = await fetch(`${closed.tc.url}/tc/api/v1/artifact/x`);
      assert.equal(r1.status, 503);
      const r2 = await fetch(`${open.tc.url}/tc/api/v1/artifact/x`);
      assert.equal(r2.status, 404);
    } finally {
      await closed.close();
      await open.close();
    }
  });
});

describe('registry builds', () => {
  test('a 3-layer image (gzip, zstd, plain) becomes an ext4 with the union, the user, /.svc and the CA', async () => {
    const req = await h.submit({ kind: 'registry', ref: `${registry.host}/test/layered:v1`, insecure: true }, { withSvcCa: true });
    const progressSeen: JobProgress[] = [];
    const poll = setInterval(async () => {
      const raw = await h.coordination.kvGet(progressKey(req.jobId));
      if (raw) progressSeen.push(JSON.parse(raw));
    }, 50);
    const done = await built(req.jobId).finally(() => clearInterval(poll));
    const reports = h.master.reports.get(req.jobId)!;
    assert.deepEqual(reports.map((r) => `${r.status}${r.phase ? `/${r.phase}` : ''}`).filter((s) => s.startsWith('RUNNING')),
      ['RUNNING/PULLING', 'RUNNING/BUILDING', 'RUNNING/UPLOADING']);

    const info = done.imageInfo!;
    assert.equal(info.layers, 3);
    assert.match(info.digest!, /^sha256:[a-f0-9]{64}$/);
    assert.equal(info.architecture, 'amd64');
    // The image's own environment, then what makes its programs trust the egress CA baked in.
    assert.deepEqual(info.env!.slice(0, 2), ['PATH=/usr/bin:/bin', 'FOO=bar']);
    assert.match(info.env![2], /^SVC_EGRESS_CA_SHA256=[a-f0-9]{64}$/);
    assert.deepEqual(info.env!.slice(3), [
      'NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/svc-egress.crt', 'SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt', 'REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt',
    ]);
    assert.deepEqual(info.cmd, ['/bin/sh', '-c', 'echo hi']);
    assert.equal(info.workingDir, '/srv');

    const last = progressSeen.filter((p) => p.layers.length === 3).pop()!;
    assert.ok(last, 'progress with layers was written');
    for (const l of last.layers) assert.equal(l.doneBytes, l.totalBytes);

    const art = done.artifact!;
    assert.equal(art.artifactId, req.artifactId);
    assert.equal(art.storage, 'local');
    assert.equal(createHash('sha256').update(readFileSync(art.location)).digest('hex'), art.sha256);
    assert.equal(statSync(art.location).size, art.sizeBytes);
    assert.equal(spawnSync('e2label', [art.location], { encoding: 'utf8' }).stdout.trim(), 'svc-rootfs');

    withMounted(art.location, (root) => {
      assert.ok(lstatSync(join(root, '.svc')).isDirectory());
      assert.ok(!existsSync(join(root, 'del/gone')), 'whiteout applied');
      assert.ok(!existsSync(join(root, 'del/.wh.gone')));
      assert.equal(readFileSync(join(root, 'del/stays'), 'utf8'), 'stay');
      assert.ok(!existsSync(join(root, 'opq/lower')), 'opaque dir hides the lower layer');
      assert.equal(readFileSync(join(root, 'opq/upper'), 'utf8'), 'upper');
      assert.equal(statSync(join(root, 'bin/tool')).ino, statSync(join(root, 'bin/tool-hardlink')).ino);
      assert.equal(statSync(join(root, 'bin/tool')).mode & 0o7777, 0o4755);
      assert.equal(readlinkSync(join(root, 'bin/sh')), 'tool');
      assert.ok(lstatSync(join(root, 'dev/null')).isCharacterDevice());
      const owned = statSync(join(root, 'data/owned'));
      assert.deepEqual([owned.uid, owned.gid, owned.mode & 0o777], [1234, 4321, 0o640]);
      assert.equal(statSync(join(root, 'usr/share/big/blob')).size, 3 * 1024 * 1024);
      assert.match(readFileSync(join(root, 'etc/passwd'), 'utf8'), /^user:x:1000:1000::\/home\/user:\/bin\/sh$/m);
      assert.match(readFileSync(join(root, 'etc/group'), 'utf8'), /^user:x:1000:$/m);
      const home = statSync(join(root, 'home/user'));
      assert.deepEqual([home.uid, home.gid], [1000, 1000]);
      assert.ok(lstatSync(join(root, 'etc/resolv.conf')).isFile(), 'dangling resolv.conf link replaced');
      assert.match(readFileSync(join(root, 'etc/resolv.conf'), 'utf8'), /^nameserver /m);
      assert.match(readFileSync(join(root, 'etc/hosts'), 'utf8'), /localhost/);
      assert.equal(readFileSync(join(root, 'usr/local/share/ca-certificates/svc-egress.crt'), 'utf8'), FAKE_CA);
      const bundle = readFileSync(join(root, 'etc/ssl/certs/ca-certificates.crt'), 'utf8');
      assert.ok(bundle.includes('Uk9PVA==') && bundle.endsWith(FAKE_CA), 'CA appended to the bundle');
    });
    assert.deepEqual(await h.leftovers(), []);
    assert.equal(h.master.refused, 0, 'every callback carried the right token');
  });

  test('manifest lists: the host platform by default, another on request', async () => {
    const amd = await h.submit({ kind: 'registry', ref: `${registry.host}/test/multi:v1`, insecure: true });
    const arm = await h.submit({ kind: 'registry', ref: `${registry.host}/test/multi:v1`, insecure: true, platform: { os: 'linux', architecture: 'arm64' } });
    const [a, b] = await Promise.all([built(amd.jobId), built(arm.jobId)]);
    assert.equal(a.imageInfo!.architecture, 'amd64');
    assert.equal(b.imageInfo!.architecture, 'arm64');
    withMounted(a.artifact!.location, (root) => assert.equal(readFileSync(join(root, 'arch'), 'utf8'), 'amd64'));
    withMounted(b.artifact!.location, (root) => assert.equal(readFileSync(join(root, 'arch'), 'utf8'), 'arm64'));
    const byDigest = await h.submit({ kind: 'registry', ref: `${registry.host}/test/multi@${a.imageInfo!.digest}`, insecure: true });
    assert.equal((await built(byDigest.jobId)).imageInfo!.digest, a.imageInfo!.digest, 'pull by manifest digest');
    const missing = await h.submit({ kind: 'registry', ref: `${registry.host}/test/multi:v1`, insecure: true, platform: { os: 'linux', architecture: 's390x' } });
    const f = await h.master.final(missing.jobId);
    assert.equal(f.status, 'FAILED');
    assert.match(f.error!, /no image for platform linux\/s390x .*available: linux\/amd64, linux\/arm64/);
  });

  test('two builds of one spec at once: the second reuses the first artifact', async () => {
    const source = { kind: 'registry' as const, ref: `${registry.host}/test/layered:v1`, insecure: true };
    const first = await h.submit(source, { specHash: 'same-spec' });
    const second = await h.submit(source, { specHash: 'same-spec' });
    const [a, b] = await Promise.all([built(first.jobId), built(second.jobId)]);
    assert.equal(a.artifact!.artifactId, first.artifactId);
    assert.deepEqual(b.artifact, a.artifact);
    assert.deepEqual(b.imageInfo, a.imageInfo);
    const down = await h.client.download(second.artifactId, 'HEAD');
    assert.equal(down.status, 404, 'the loser stored nothing of its own');
  });

  test('diskSizeMB sets the image size', async () => {
    const req = await h.submit({ kind: 'registry', ref: `${registry.host}/test/multi:v1`, insecure: true }, { diskSizeMB: 96 });
    const r = await built(req.jobId);
    assert.equal(r.artifact!.sizeBytes, 96 * 1024 * 1024);
  });
});

describe('local sources', () => {
  test('OCI layout directory, tag chosen by ref.name', async () => {
    const req = await h.submit({ kind: 'oci-layout', path: layoutDir, ref: 'layers' });
    const r = await built(req.jobId);
    withMounted(r.artifact!.location, (root) => {
      assert.equal(readFileSync(join(root, 'opq/upper'), 'utf8'), 'upper');
      assert.ok(!existsSync(join(root, 'del/gone')));
    });
    const several = await h.submit({ kind: 'oci-layout', path: layoutDir });
    assert.match((await h.master.final(several.jobId)).error!, /several images \(tags: layers, layers-gzip, multi\); choose one with ref/);
  });

  test('docker-archive tarball (docker save format)', async () => {
    const archive = join(scratch, 'image.tar');
    const r0 = spawnSync('skopeo', ['copy', '--quiet', `oci:${layoutDir}:layers-gzip`, `docker-archive:${archive}:test/layered:v1`], { encoding: 'utf8' });
    assert.equal(r0.status, 0, r0.stderr);
    const req = await h.submit({ kind: 'docker-archive', path: archive });
    const r = await built(req.jobId);
    assert.equal(r.imageInfo!.layers, 3);
    withMounted(r.artifact!.location, (root) => {
      assert.equal(readFileSync(join(root, 'srv/app.txt'), 'utf8'), 'app');
      assert.ok(!existsSync(join(root, 'opq/lower')));
    });
  });

  test('root filesystem tarball (gzip)', async () => {
    const tarball = join(scratch, 'rootfs.tar.gz');
    writeFileSync(tarball, compress(await tarOf([
      { name: './', type: 'directory' },
      { name: './bin/', type: 'directory' },
      { name: './bin/bash', content: '#!fake', mode: 0o755 },
      { name: './etc/', type: 'directory' },
      { name: './etc/passwd', content: 'root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\n' },
      { name: './home/user/', type: 'directory', uid: 1000, gid: 1000 },
    ]), 'gzip'));
    const req = await h.submit({ kind: 'rootfs-tar', path: tarball });
    const r = await built(req.jobId);
    withMounted(r.artifact!.location, (root) => {
      const passwd = readFileSync(join(root, 'etc/passwd'), 'utf8');
      assert.equal(passwd.match(/^user:/gm)?.length, 1, 'an existing user account is kept as is');
      assert.ok(existsSync(join(root, '.svc')));
    });
  });
});

describe('artifact routes', () => {
  let artifactId: string;
  let sha: string;
  let size: number;
  let location: string;

  before(async () => {
    const req = await h.submit({ kind: 'registry', ref: `${registry.host}/test/multi:v1`, insecure: true });
    const r = await built(req.jobId);
    ({ artifactId, sha256: sha, sizeBytes: size, location } = r.artifact!);
  });

  test('GET, HEAD, Range, ETag', async () => {
    const full = await h.client.download(artifactId);
    assert.equal(full.status, 200);
    assert.equal(full.headers.get('etag'), `"${sha}"`);
    assert.equal(Number(full.headers.get('content-length')), size);
    assert.equal(createHash('sha256').update(Buffer.from(await full.arrayBuffer())).digest('hex'), sha);

    const head = await h.client.download(artifactId, 'HEAD');
    assert.equal(head.status, 200);
    assert.equal(Number(head.headers.get('content-length')), size);

    const part = await fetch(`${h.tc.url}/tc/api/v1/artifact/${artifactId}`, { headers: { 'x-svc-template-callback-token': TOKEN, range: 'bytes=1024-2047' } });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get('content-range'), `bytes 1024-2047/${size}`);
    const bytes = Buffer.from(await part.arrayBuffer());
    assert.deepEqual(bytes, readFileSync(location).subarray(1024, 2048));
    assert.equal(bytes.readUInt16LE(1080 - 1024), 0xef53, 'ext4 superblock magic');

    const unchanged = await fetch(`${h.tc.url}/tc/api/v1/artifact/${artifactId}`, { headers: { 'x-svc-template-callback-token': TOKEN, 'if-none-match': `"${sha}"` } });
    assert.equal(unchanged.status, 304);
    const beyond = await fetch(`${h.tc.url}/tc/api/v1/artifact/${artifactId}`, { headers: { 'x-svc-template-callback-token': TOKEN, range: `bytes=${size}-` } });
    assert.equal(beyond.status, 416);
  });

  test('migrate a legacy ext4 file, then delete (idempotent)', async () => {
    const legacy = join(scratch, 'legacy.ext4');
    copyFileSync(location, legacy);
    const stored = await h.client.migrate('art-legacy', legacy);
    assert.equal(stored.artifactId, 'art-legacy');
    assert.equal(stored.sha256, sha);
    assert.equal(stored.storage, 'local');
    assert.ok(existsSync(legacy), 'the legacy file is copied, not taken');
    assert.equal((await h.client.download('art-legacy', 'HEAD')).status, 200);

    const notExt4 = join(scratch, 'not-ext4');
    writeFileSync(notExt4, Buffer.alloc(4096));
    await assert.rejects(h.client.migrate('art-bad', notExt4), (e: { status: number }) => e.status === 422);
    await assert.rejects(h.client.migrate('art-bad', '/nonexistent/file'), (e: { status: number }) => e.status === 404);

    assert.deepEqual(await h.client.deleteArtifact('art-legacy'), { deleted: true });
    assert.deepEqual(await h.client.deleteArtifact('art-legacy'), { deleted: false });
    assert.equal((await h.client.download('art-legacy', 'HEAD')).status, 404);
    assert.deepEqual(await h.client.deleteArtifact(artifactId), { deleted: true });
    assert.ok(!existsSync(location));
  });
});
