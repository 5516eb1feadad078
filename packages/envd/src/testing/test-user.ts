import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * Makes sure the E2B-style `user` account (home /home/user) exists for a test, and removes it
 * afterwards only if this test created it.
 */
export function ensureTestUser(): { uid: number; home: string; cleanup: () => void } {
  const find = () => readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('user:'));
  let created = false;
  if (!find()) {
    execFileSync('useradd', ['--create-home', '--shell', '/bin/bash', 'user']);
    created = true;
  }
  const fields = find()!.split(':');
  return {
    uid: Number(fields[2]),
    home: fields[5]!,
    cleanup: () => {
      if (created) execFileSync('userdel', ['--remove', 'user'], { stdio: 'ignore' });
    },
  };
}
