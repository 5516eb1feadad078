import { chmodSync, existsSync, mkdirSync, statSync } from 'node:fs';

/**
 * Makes `svc up`'s data directory, root's alone (0700): the SQLite database (every sandbox's
 * access tokens), the log and the templates' root filesystems (images pulled with a team's
 * registry credentials) are written below it with the umask's modes. Before 2026-11-30 a data
 * directory outside a private home (the documented /var/lib/svc) let any local user read them
 * (found by a helper reading the CLI as an attacker). One that exists keeps its mode (it may be a
 * directory of the operator's: /tmp must never be chmodded); answers a warning when others may
 * read it. One another user owns is refused (an Error): root would write its secrets and log into
 * a directory where that user can swap the files for links (`svc.log` to /etc/passwd), as with
 * `sudo -E svc up` and a HOME left the user's.
 */
export function prepareDataDir(dir: string): string | undefined {
  if (!existsSync(dir)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
    return undefined;
  }
  const st = statSync(dir);
  const me = process.getuid?.();
  if (me !== undefined && st.uid !== me) {
    throw new Error(`the data directory ${dir} belongs to uid ${st.uid}, not to this user (uid ${me}): whoever owns it could turn the files svc writes there into links to any file; chown it, or choose another --data-dir (SVC_DATA_DIR)`);
  }
  if ((st.mode & 0o077) === 0) return undefined;
  return `the data directory ${dir} may be read by other users of this host, and it holds every sandbox's access tokens: chmod 700 it`;
}
