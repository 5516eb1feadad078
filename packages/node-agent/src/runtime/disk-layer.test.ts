import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../host/exec.ts';
import { assertLayerDirs, DiskLayer, LAYER_MOUNT_OPTIONS } from './disk-layer.ts';

const asRoot = process.getuid?.() === 0 ? false : 'mounts need root';

/**
 * A microvm guest writes its layer's image raw, so what the host finds there on the next mount
 * is the guest's: links to host paths where the host expects its directories. Before 2026-11-30
 * the host wrote its boot files through them (into /etc) and tarred a host directory into a
 * snapshot.
 */
test('a layer image a guest filled with links to host paths: the mount follows none, and the host refuses the layer', { skip: asRoot }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-layer-'));
  const victim = join(dir, 'host-etc');
  mkdirSync(victim);
  writeFileSync(join(victim, 'shadow'), 'root:secret\n');
  const layer = new DiskLayer(join(dir, 'sbx'));
  try {
    await layer.create(64 * 1024 * 1024);
    // What guest root does to /dev/vdb while it runs.
    rmSync(layer.upper, { recursive: true });
    symlinkSync(victim, layer.upper);
    symlinkSync(victim, join(layer.mountDir, 'boot'));
    await layer.unmount();

    assert.equal(await layer.ensureMounted(), true);
    const options = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').find((l) => l.split(' ')[4] === layer.mountDir)?.split(' ')[5] ?? '';
    for (const o of ['nosymfollow', 'nosuid', 'nodev']) assert.ok(options.split(',').includes(o), options);
    assert.throws(() => readFileSync(join(layer.upper, 'shadow')), /ELOOP/, 'no path through the mount follows the link');
    assert.throws(() => writeFileSync(join(layer.mountDir, 'boot', 'volumes'), 'x'), /ELOOP/);
    assert.throws(() => assertLayerDirs(layer), /holds .*upper as something other than a directory/);
    await assert.rejects(run('tar', ['--create', '--file=/dev/null', '-C', layer.upper, '.']), 'tar cannot change into it either');
    assert.equal(readFileSync(join(victim, 'shadow'), 'utf8'), 'root:secret\n');
    assert.equal(existsSync(join(victim, 'volumes')), false);
  } finally {
    await layer.unmount().catch(() => { /* not mounted: nothing to undo */ });
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a layer the host made passes', { skip: asRoot }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-layer-'));
  const layer = new DiskLayer(join(dir, 'sbx'));
  try {
    await layer.create(64 * 1024 * 1024);
    assertLayerDirs(layer);
    assert.ok(lstatSync(layer.upper).isDirectory());
    assert.match(LAYER_MOUNT_OPTIONS, /nosymfollow/);
  } finally {
    await layer.unmount();
    rmSync(dir, { recursive: true, force: true });
  }
});
