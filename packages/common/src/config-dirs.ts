/**
 * Directories the configuration names that svc makes root's alone (0700): the node agent's
 * node_agent.volume_plugin_base_dir and the local volume plugin's data root
 * (SVC_LOCAL_VOLUME_ROOT). Both were chmodded 0700 whatever they were, so a setting of /tmp took
 * /tmp's sticky bit and every other user's access to it, and / or /home locked the host's users
 * out (found by a review, 2026-12). Now the system's own directories are refused by name, and an
 * existing directory is changed only when it looks like one made for svc.
 */
import { mkdir, chmod, realpath, stat } from 'node:fs/promises';
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';

/** Directories of the system that are never svc's to take, whatever a setting says. */
const SYSTEM_DIRS = new Set([
  '/', '/bin', '/boot', '/dev', '/dev/shm', '/etc', '/home', '/lib', '/lib32', '/lib64', '/media', '/mnt', '/opt',
  '/proc', '/root', '/run', '/sbin', '/srv', '/sys', '/tmp', '/usr', '/usr/bin', '/usr/lib', '/usr/local', '/usr/sbin',
  '/usr/share', '/var', '/var/cache', '/var/lib', '/var/log', '/var/run', '/var/tmp',
]);

/**
 * The system directory `dir` is (as written, or through links once it exists), for a
 * ConfigError; undefined for any other directory.
 */
export function systemDirectory(dir: string): string | undefined {
  const named = resolve(dir);
  if (SYSTEM_DIRS.has(named)) return named;
  try {
    const real = realpathSync(named);
    if (SYSTEM_DIRS.has(real)) return real;
  } catch {
    // Not there yet: svc makes it, so it is no system directory.
  }
  return undefined;
}

export interface PrivateDirResult {
  /** The mode it had, when it was made 0700. */
  changedFrom?: number;
  /** Why a chmod that should have run failed (root-squashed NFS). */
  chmodError?: string;
  /** Why an existing directory of another mode was left as it is (for the caller's warning). */
  leftAlone?: string;
}

/**
 * Makes `dir` 0700, or makes an existing one 0700 when it is this user's and neither sticky nor
 * world-writable: such a directory was made for one owner (an operator's mkdir, an older svc's
 * 0755), while a sticky or world-writable one is shared by design (/tmp-like) and another user's is
 * theirs. Those are left as they are and the answer says why, for the caller's warning.
 */
export async function makeDirPrivate(dir: string): Promise<PrivateDirResult> {
  const created = await mkdir(dir, { recursive: true, mode: 0o700 });
  if (created !== undefined) {
    // mkdir's mode passes through the umask; 0700 survives any sane one, and chmod makes sure.
    await chmod(dir, 0o700);
    return {};
  }
  const st = await stat(await realpath(dir));
  const was = st.mode & 0o7777;
  if (was === 0o700) return {};
  const me = process.getuid?.();
  const mode = `0${was.toString(8)}`;
  if (me !== undefined && st.uid !== me) return { leftAlone: `it belongs to uid ${st.uid} (mode ${mode}), not to this user: not changed` };
  if (was & 0o1000) return { leftAlone: `it is sticky (mode ${mode}), a directory shared by design: not changed` };
  if (was & 0o002) return { leftAlone: `it is world-writable (mode ${mode}), a directory shared by design: not changed` };
  try {
    await chmod(dir, 0o700);
  } catch (err) {
    return { chmodError: (err as Error).message };
  }
  return { changedFrom: was };
}
