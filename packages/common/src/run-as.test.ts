import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemAccount } from './run-as.ts';

test('systemAccount: an account\'s ids from the passwd file; none of that name, a bad line and root are refused', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-passwd-'));
  try {
    const file = join(dir, 'passwd');
    writeFileSync(file, ['root:x:0:0:root:/root:/bin/bash', 'nobodyish:x:1:1::/:/bin/false', 'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin', 'broken:x:abc:1::/:', ''].join('\n'));
    assert.deepEqual(systemAccount('nobody', file), { name: 'nobody', uid: 65534, gid: 65534 });
    assert.throws(() => systemAccount('nobod', file), /^Error: there is no account nobod in /);
    assert.throws(() => systemAccount('root', file), /root's \(uid 0\): it drops no privilege/);
    assert.throws(() => systemAccount('broken', file), /the account broken has no valid uid and gid/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
