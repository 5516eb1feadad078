/**
 * Permission checks made for a user while envd, as root, acts on its behalf: a write the user
 * could not have made itself is refused, so root's rights never reach further than the user's.
 * Mode bits only, as the kernel reads them (owner bits for the owner, else group bits for a
 * member, else the others'); ACLs and capabilities other than root's are not looked at.
 */
import type { Stats } from 'node:fs';
import type { User, UserDatabase } from './users.ts';

/** Whom a check is for: the user and every group it is in. */
export interface Caller {
  name: string;
  uid: number;
  /** Primary group, which new files and directories get. */
  gid: number;
  gids: readonly number[];
}

export const MAY_WRITE = 0o2;
export const MAY_SEARCH = 0o1;

type Owned = Pick<Stats, 'mode' | 'uid' | 'gid'>;

export function callerOf(user: User, users: UserDatabase): Caller {
  return { name: user.name, uid: user.uid, gid: user.gid, gids: users.groupIds(user) };
}

/** Whether the mode bits let `who` do `want` (MAY_* bits) on `entry`; root may do anything. */
export function permits(entry: Owned, who: Caller, want: number): boolean {
  if (who.uid === 0) return true;
  const bits = entry.uid === who.uid ? entry.mode >> 6 : who.gids.includes(entry.gid) ? entry.mode >> 3 : entry.mode;
  return (bits & want) === want;
}

/**
 * Whether `who` could unlink `file` from `dir` and create it anew: write and search on the
 * directory, and in a sticky one (/tmp) only its own files or in its own directory.
 */
export function mayReplace(dir: Owned, file: Owned, who: Caller): boolean {
  if (!permits(dir, who, MAY_WRITE | MAY_SEARCH)) return false;
  const sticky = (dir.mode & 0o1000) !== 0;
  return who.uid === 0 || !sticky || file.uid === who.uid || dir.uid === who.uid;
}
