import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '@svc/common';
import { LayerStore, LayerTooLarge } from '../artifacts/layer-store.ts';
import { CommandError } from '../host/exec.ts';
import { createCappedTar } from './capped-tar.ts';

const MiB = 1024 * 1024;

test('tar stops at its bound, whatever the files claim to hold; under the bound it writes the whole archive', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-capped-tar-'));
  try {
    const src = join(dir, 'upper');
    mkdirSync(src);
    // Incompressible and not sparse: what a guest's file of shared blocks reads as.
    writeFileSync(join(src, 'big'), randomBytes(3 * MiB));
    const archive = join(dir, 'a.tar');
    await assert.rejects(createCappedTar(archive, ['--sparse', '-C', src, '.'], { maxBytes: MiB, what: 'capturing the sandbox\'s files' }), (e: CommandError) => e instanceof CommandError && e.what === 'capturing the sandbox\'s files');
    assert.equal(statSync(archive).size, MiB, 'not one byte past the bound');
    await createCappedTar(archive, ['--sparse', '-C', src, '.'], { maxBytes: 4 * MiB, what: 'capturing the sandbox\'s files' });
    assert.ok(statSync(archive).size > 3 * MiB);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a capture tar cut at its bound leaves no layer and no part file behind', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-capped-tar-'));
  try {
    const src = join(dir, 'upper');
    mkdirSync(src);
    writeFileSync(join(src, 'big'), randomBytes(2 * MiB));
    const layers = new LayerStore(join(dir, 'layers'), silentLogger());
    await layers.load();
    const meta = { artifactId: 'a1', contents: 'filesystem' as const, createdAt: new Date().toISOString() };
    await assert.rejects(layers.add('snap-1', meta, (p) => createCappedTar(p, ['-C', src, '.'], { maxBytes: MiB, what: 'x' }), { maxBytes: MiB }), LayerTooLarge);
    assert.deepEqual(readdirSync(join(dir, 'layers')), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
