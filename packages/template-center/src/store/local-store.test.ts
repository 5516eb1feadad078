/** The local artifact store finds what it holds, misses what it does not, and does not read a broken record as a miss. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalArtifactStore } from './local-store.ts';

test('a stored artifact is found; a missing one is null; a record that is not JSON is an error naming it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-local-store-'));
  try {
    const store = new LocalArtifactStore(join(dir, 'store'));
    mkdirSync(join(dir, 'store'), { mode: 0o755 });
    await store.init();
    assert.equal(statSync(join(dir, 'store')).mode & 0o777, 0o700, 'pause packages and private images are no other user\'s to read');
    const file = join(dir, 'image.ext4');
    writeFileSync(file, 'bytes');
    await store.put('a1', file, { sha256: 'a'.repeat(64), sizeBytes: 5 }, { move: false });
    assert.equal((await store.get('a1'))?.sha256, 'a'.repeat(64));
    assert.equal(await store.get('missing'), null);
    writeFileSync(join(dir, 'store', 'a1.json'), '{"sha256": "tor');
    await assert.rejects(store.get('a1'), /record of a1 .* is not valid JSON/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
