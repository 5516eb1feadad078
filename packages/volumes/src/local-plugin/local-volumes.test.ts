import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { VOLUME_NAMESPACE } from '@svc/contracts/volumes';
import { removeTempDir, tempDir } from '../testing/host.ts';
import { DEFAULT_LOCAL_VOLUME_ROOT, LocalVolumeError, LocalVolumes } from './local-volumes.ts';
import { mountCount } from './mounts.ts';

describe('local volumes (real bind mounts)', () => {
  let dir: string;
  let root: string;
  let base: string;
  let volumes: LocalVolumes;

  const attachInput = (volumeId: string, refCount: number) => ({
    sandboxId: `sb-${refCount}`,
    namespace: VOLUME_NAMESPACE,
    volumeId,
    refCount,
    volumeBaseDir: base,
    privateData: '',
  });
  const detachInput = (volumeId: string, refCount: number, metadata: Record<string, string>) => ({
    sandboxId: `sb-${refCount}`,
    namespace: VOLUME_NAMESPACE,
    volumeId,
    refCount,
    metadata,
  });

  before(() => {
    dir = tempDir('local');
    root = join(dir, 'data');
    base = join(dir, 'volume');
    volumes = new LocalVolumes({ root });
  });
  after(() => removeTempDir(dir));

  it('create makes a data directory anyone may write and a private token, the same on repeat', async () => {
    const created = await volumes.create({ volumeId: 'vol-1', name: 'one' });
    assert.match(created.token, /^svcvol_[A-Za-z0-9_-]{43}$/);
    assert.equal(created.privateData, '');
    assert.equal(statSync(join(root, 'vol-1')).mode & 0o777, 0o777);
    assert.equal(statSync(join(root, 'vol-1.token')).mode & 0o777, 0o600);
    assert.deepEqual(await volumes.create({ volumeId: 'vol-1', name: 'one' }), created);
    assert.deepEqual(readdirSync(root).sort(), ['vol-1', 'vol-1.token'], 'no temporary files are left');
    const [a, b] = await Promise.all([volumes.create({ volumeId: 'vol-race', name: 'r' }), volumes.create({ volumeId: 'vol-race', name: 'r' })]);
    assert.equal(a.token, b.token, 'concurrent creates agree on one token');
  });

  it('attach bind-mounts the data once, detach unmounts at the last holder and keeps the data', async () => {
    const first = await volumes.attach(attachInput('vol-1', 0));
    const hostPath = join(base, 'local-vol-1');
    assert.deepEqual(first, { hostPath, metadata: { data_dir: join(root, 'vol-1'), host_path: hostPath } });
    assert.equal(await mountCount(hostPath), 1, 'the host path is a mount point');
    const options = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').find((l) => l.split(' ')[4] === hostPath)?.split(' ')[5] ?? '';
    assert.deepEqual(options.split(',').filter((o) => o === 'nosuid' || o === 'nodev').sort(), ['nodev', 'nosuid'], options);
    // A device node a sandbox's root made in the volume opens nothing through the mount.
    execFileSync('mknod', [join(root, 'vol-1', 'a-null-device'), 'c', '1', '3']);
    assert.throws(() => openSync(join(hostPath, 'a-null-device'), 'r'), /EACCES/);
    rmSync(join(root, 'vol-1', 'a-null-device'));
    writeFileSync(join(root, 'vol-1', 'from-data.txt'), 'data side');
    assert.equal(readFileSync(join(hostPath, 'from-data.txt'), 'utf8'), 'data side', 'it shows the data');

    assert.deepEqual(await volumes.attach(attachInput('vol-1', 1)), first);
    assert.equal(await mountCount(hostPath), 1, 'a second holder does not mount again');

    mkdirSync(join(hostPath, 'sub'));
    writeFileSync(join(hostPath, 'sub', 'from-host.txt'), 'host side');
    assert.equal(readFileSync(join(root, 'vol-1', 'sub', 'from-host.txt'), 'utf8'), 'host side', 'writes land in the data dir');

    await volumes.detach(detachInput('vol-1', 1, first.metadata));
    assert.equal(await mountCount(hostPath), 1, 'detach keeps the mount while a holder is left');
    await volumes.detach(detachInput('vol-1', 0, first.metadata));
    assert.equal(await mountCount(hostPath), 0);
    assert.equal(existsSync(hostPath), false, 'the empty host directory is removed');
    assert.equal(readFileSync(join(root, 'vol-1', 'sub', 'from-host.txt'), 'utf8'), 'host side', 'detach never deletes data');
    await volumes.detach(detachInput('vol-1', 0, first.metadata));
  });

  it('attach after a crash that left the mount in place answers it without mounting again', async () => {
    const first = await volumes.attach(attachInput('vol-1', 0));
    assert.deepEqual(await volumes.attach(attachInput('vol-1', 0)), first);
    assert.equal(await mountCount(first.hostPath), 1);
    await volumes.detach(detachInput('vol-1', 0, first.metadata));
    assert.equal(await mountCount(first.hostPath), 0);
  });

  it('detach takes off mounts stacked by earlier crashes, and leaves a directory someone wrote into', async () => {
    const first = await volumes.attach(attachInput('vol-1', 0));
    const { execFileSync } = await import('node:child_process');
    execFileSync('mount', ['--bind', join(root, 'vol-1'), first.hostPath]);
    assert.equal(await mountCount(first.hostPath), 2);
    await volumes.detach(detachInput('vol-1', 0, first.metadata));
    assert.equal(await mountCount(first.hostPath), 0);

    mkdirSync(first.hostPath, { recursive: true });
    writeFileSync(join(first.hostPath, 'stray'), 'x');
    await volumes.detach(detachInput('vol-1', 0, first.metadata));
    assert.equal(readFileSync(join(first.hostPath, 'stray'), 'utf8'), 'x');
  });

  it('concurrent attaches of one volume mount it once', async () => {
    const answers = await Promise.all([0, 0, 0].map((refCount) => volumes.attach(attachInput('vol-1', refCount))));
    assert.equal(new Set(answers.map((a) => a.hostPath)).size, 1);
    assert.equal(await mountCount(answers[0].hostPath), 1);
    await volumes.detach(detachInput('vol-1', 0, answers[0].metadata));
    assert.equal(await mountCount(answers[0].hostPath), 0);
  });

  it('a mount that is busy is detached lazily', async () => {
    const first = await volumes.attach(attachInput('vol-1', 0));
    const { spawn } = await import('node:child_process');
    // a process whose working directory is inside the mount keeps it busy
    const holder = spawn('sleep', ['30'], { cwd: first.hostPath, stdio: 'ignore' });
    try {
      await volumes.detach(detachInput('vol-1', 0, first.metadata));
      assert.equal(await mountCount(first.hostPath), 0);
    } finally {
      holder.kill('SIGKILL');
    }
  });

  it('attach of a volume without data on this host fails', async () => {
    await assert.rejects(volumes.attach(attachInput('vol-none', 0)), (err: unknown) => {
      assert.ok(err instanceof LocalVolumeError);
      assert.equal(err.kind, 'not_found');
      assert.match(err.message, /^volume vol-none has no data on this host/);
      assert.ok(!err.message.includes(root), `no host path in a message that may reach an API caller: ${err.message}`);
      return true;
    });
    assert.equal(existsSync(join(base, 'local-vol-none')), false);
  });

  it('detach without the metadata attach answered is refused', async () => {
    await assert.rejects(volumes.detach(detachInput('vol-1', 0, {})), /detach needs the metadata attach returned/);
    await assert.rejects(volumes.detach(detachInput('vol-1', 0, { host_path: '/etc' })), /ending in local-vol-1/);
    await volumes.detach(detachInput('vol-1', 2, {}));
  });

  it('rejects volume ids that would leave the data root', async () => {
    for (const volumeId of ['../etc', '..', 'a/b', '', 'x'.repeat(129), 'vol.token', 'a b']) {
      await assert.rejects(volumes.create({ volumeId, name: 'n' }), (err: unknown) => err instanceof LocalVolumeError && err.kind === 'invalid', volumeId);
      await assert.rejects(volumes.destroy({ volumeId }), LocalVolumeError);
      await assert.rejects(volumes.attach(attachInput(volumeId, 0)), LocalVolumeError);
      await assert.rejects(volumes.detach(detachInput(volumeId, 0, {})), LocalVolumeError);
    }
    assert.equal(existsSync(join(dir, 'etc')), false);
    await assert.rejects(volumes.attach({ ...attachInput('vol-1', 0), volumeBaseDir: 'relative' }), /must be an absolute path/);
  });

  it('destroy deletes the data and the token, and is idempotent', async () => {
    await volumes.destroy({ volumeId: 'vol-1' });
    assert.equal(existsSync(join(root, 'vol-1')), false);
    assert.equal(existsSync(join(root, 'vol-1.token')), false);
    await volumes.destroy({ volumeId: 'vol-1' });
    const again = await volumes.create({ volumeId: 'vol-1', name: 'one' });
    assert.match(again.token, /^svcvol_/);
    assert.deepEqual(readdirSync(join(root, 'vol-1')), [], 'a new volume starts empty');
  });

  it('makes a root that exists with another mode 0700 at its first hook, and says so', async () => {
    const older = join(dir, 'older-root');
    mkdirSync(older, { mode: 0o755 });
    const notes: string[] = [];
    const lv = new LocalVolumes({ root: older, log: (m) => notes.push(m) });
    await lv.create({ volumeId: 'vol-o', name: 'o' });
    assert.equal(statSync(older).mode & 0o7777, 0o700);
    assert.equal(notes.length, 1);
    assert.match(notes[0], /made the volume data root .* 0700 \(it was 0755/);
    await lv.destroy({ volumeId: 'vol-o' });
    assert.equal(notes.length, 1, 'once a process');
    const again = join(dir, 'older-root-2');
    mkdirSync(again, { mode: 0o777 });
    // vol-x has no data: the attach fails, after the root is made 0700.
    await assert.rejects(new LocalVolumes({ root: again, log: () => undefined }).attach(attachInput('vol-x', 0)), /has no data on this host/);
    assert.equal(statSync(again).mode & 0o7777, 0o700, 'an attach closes it too');
  });

  it('takes its root from SVC_LOCAL_VOLUME_ROOT, else the default', () => {
    const saved = process.env.SVC_LOCAL_VOLUME_ROOT;
    try {
      process.env.SVC_LOCAL_VOLUME_ROOT = '/srv/vols';
      assert.equal(new LocalVolumes().root, '/srv/vols');
      delete process.env.SVC_LOCAL_VOLUME_ROOT;
      assert.equal(new LocalVolumes().root, DEFAULT_LOCAL_VOLUME_ROOT);
      assert.throws(() => new LocalVolumes({ root: 'relative' }), /must be an absolute path/);
    } finally {
      if (saved === undefined) delete process.env.SVC_LOCAL_VOLUME_ROOT;
      else process.env.SVC_LOCAL_VOLUME_ROOT = saved;
    }
  });
});
