/**
 * Running a process as an unprivileged system account once it holds what needed root (the
 * data-plane proxy's workers: docs/security.md, "The data-plane proxy's workers").
 */
import { readFileSync } from 'node:fs';

export interface SystemAccount {
  name: string;
  uid: number;
  gid: number;
}

/**
 * The account's ids from the passwd file (Node has no getpwnam). Throws, naming the account, when
 * there is none of that name or it is root's (uid 0 would drop nothing).
 */
export function systemAccount(name: string, passwdFile = '/etc/passwd'): SystemAccount {
  for (const line of readFileSync(passwdFile, 'utf8').split('\n')) {
    const [user, , uid, gid] = line.split(':');
    if (user !== name) continue;
    const ids = { uid: Number(uid), gid: Number(gid) };
    if (!Number.isInteger(ids.uid) || !Number.isInteger(ids.gid) || ids.uid < 0 || ids.gid < 0) throw new Error(`the account ${name} has no valid uid and gid in ${passwdFile}`);
    if (ids.uid === 0) throw new Error(`the account ${name} is root's (uid 0): it drops no privilege`);
    return { name, ...ids };
  }
  throw new Error(`there is no account ${name} in ${passwdFile}`);
}

/**
 * Becomes the account for good: no supplementary groups, its group, then its user (in that
 * order: once the user is not root, the groups can no longer be changed), and checks that the
 * process cannot go back.
 */
export function dropPrivileges(account: SystemAccount): void {
  process.setgroups!([]);
  process.setgid!(account.gid);
  process.setuid!(account.uid);
  if (process.getuid!() !== account.uid || process.geteuid!() !== account.uid || process.getgid!() !== account.gid || process.getegid!() !== account.gid) {
    throw new Error(`the process did not become ${account.name} (${account.uid}:${account.gid})`);
  }
}
