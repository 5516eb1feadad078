import assert from 'node:assert/strict';
import { test } from 'node:test';
import { asUser } from './privileges.ts';

const user = { name: 'user', uid: 1000, gid: 1000, home: '/home/user', shell: '/bin/bash' };

test('a user with no group but its own runs without setpriv when the spawn clears groups itself', { skip: process.getuid?.() !== 0 && 'needs root' }, () => {
  assert.deepEqual(asUser(user, [1000], '/bin/bash', ['-c', 'id'], { spawnClearsGroups: true }), { file: '/bin/bash', args: ['-c', 'id'], uid: 1000, gid: 1000 });
  assert.deepEqual(asUser(user, [], '/bin/true', [], { spawnClearsGroups: true }), { file: '/bin/true', args: [], uid: 1000, gid: 1000 });
});

test('supplementary groups, or a spawn that keeps envd\'s groups (a PTY), go through setpriv', { skip: process.getuid?.() !== 0 && 'needs root' }, () => {
  const withGroups = asUser(user, [1000, 27], '/bin/bash', ['-c', 'id'], { spawnClearsGroups: true });
  const pty = asUser(user, [1000], '/bin/bash', [], {});
  for (const e of [withGroups, pty]) {
    if (e.uid !== undefined) continue; // no setpriv on this host: the spawn switches, groups lost
    assert.match(e.file, /setpriv$/);
    assert.ok(e.args.includes('--reuid=1000'));
  }
  assert.ok(withGroups.args.includes('--groups=1000,27') || withGroups.uid === 1000);
  // root stays root, with no switch at all.
  assert.deepEqual(asUser({ ...user, name: 'root', uid: 0, gid: 0 }, [0], '/bin/sh', [], { spawnClearsGroups: true }), { file: '/bin/sh', args: [] });
});
