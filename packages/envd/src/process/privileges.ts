import { accessSync, constants } from 'node:fs';
import { ConnectError } from '../connect/code.ts';
import type { User } from '../system/users.ts';

export interface Exec {
  file: string;
  args: string[];
  uid?: number;
  gid?: number;
}

let setprivPath: string | null | undefined;

function findSetpriv(): string | null {
  if (setprivPath === undefined) {
    setprivPath = null;
    for (const candidate of ['/usr/bin/setpriv', '/bin/setpriv', '/usr/sbin/setpriv', '/sbin/setpriv']) {
      try {
        accessSync(candidate, constants.X_OK);
        setprivPath = candidate;
        break;
      } catch {
        // try the next one
      }
    }
  }
  return setprivPath;
}

/**
 * How to exec `file` as `user`. Node's own uid/gid switch drops every supplementary group (and
 * node-pty's keeps envd's), so where util-linux's setpriv exists it does the switch with the
 * user's groups from /etc/group, as E2B's envd does (sudo rules for a group keep working).
 * A user with no group but its own needs none of that when the spawn clears the groups itself
 * (Node's child_process does): then setpriv is left out, which saves an exec per command (about
 * 30 ms of `commands.run` under gVisor's ptrace, docs/benchmarks.md).
 */
export function asUser(user: User, groups: number[], file: string, args: string[], opts: { spawnClearsGroups?: boolean; spawnSetsGroups?: boolean } = {}): Exec {
  const myUid = process.getuid?.() ?? 0;
  if (myUid !== 0) {
    if (user.uid !== myUid) {
      throw new ConnectError('permission_denied', `envd runs as uid ${myUid} and cannot start processes as '${user.name}'`);
    }
    return { file, args };
  }
  if (user.uid === 0 && user.gid === 0) return { file, args };
  // envd's spawner sets the user's groups itself (spawner.ts).
  if (opts.spawnSetsGroups) return { file, args, uid: user.uid, gid: user.gid };
  if (opts.spawnClearsGroups && groups.every((g) => g === user.gid)) return { file, args, uid: user.uid, gid: user.gid };
  const setpriv = findSetpriv();
  if (!setpriv) return { file, args, uid: user.uid, gid: user.gid };
  return {
    file: setpriv,
    args: [`--reuid=${user.uid}`, `--regid=${user.gid}`, `--groups=${groups.join(',')}`, '--', file, ...args],
  };
}
