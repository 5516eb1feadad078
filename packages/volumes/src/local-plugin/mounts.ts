/**
 * Host mounts for the local plugin: whether a directory is a mount point, a bind mount and its
 * undoing, each through mount(8)/umount(8) with a deadline (HOST_BIND_TIMEOUT_MS by default) so
 * that a stuck mount fails instead of blocking the hook.
 */
import { readFile, realpath } from 'node:fs/promises';
import { runCommand, type RunResult } from '../run-command.ts';

/**
 * How many mounts sit on `path` (0: not a mount point). Read from /proc/self/mountinfo: a bind
 * mount of a directory on the same filesystem keeps st_dev, so comparing a path's device with its
 * parent's would miss it.
 */
export async function mountCount(path: string): Promise<number> {
  let real: string;
  try {
    real = await realpath(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
  const table = await readFile('/proc/self/mountinfo', 'utf8');
  let count = 0;
  for (const line of table.split('\n')) {
    // id parent major:minor root mount-point options ...
    const mountPoint = line.split(' ')[4];
    if (mountPoint !== undefined && unescapeMountinfo(mountPoint) === real) count++;
  }
  return count;
}

/** mountinfo writes space, tab, newline and backslash as octal escapes (\040 ...). */
function unescapeMountinfo(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/**
 * nosuid,nodev: root in a sandbox owns the volume's files, and on microvm its writes land on the
 * host as root's. Without them a setuid binary or a device node it made in a volume was a way in
 * for any user of the host who reached the mount (docs/volumes.md, "On the host").
 */
export async function bindMount(source: string, target: string, timeoutMs: number): Promise<void> {
  const r = await runCommand('mount', ['--bind', '-o', 'nosuid,nodev', source, target], { timeoutMs });
  if (!succeeded(r)) throw new Error(`mount --bind -o nosuid,nodev ${source} ${target}: ${failure(r, timeoutMs)}`);
}

/** umount; a busy mount or one that does not answer in time is detached lazily (umount -l). */
export async function unmount(target: string, timeoutMs: number): Promise<void> {
  const r = await runCommand('umount', [target], { timeoutMs });
  if (succeeded(r)) return;
  if (!r.timedOut && !/busy/i.test(r.stderr)) throw new Error(`umount ${target}: ${failure(r, timeoutMs)}`);
  const lazy = await runCommand('umount', ['-l', target], { timeoutMs });
  if (!succeeded(lazy)) throw new Error(`umount -l ${target} (after umount: ${failure(r, timeoutMs)}): ${failure(lazy, timeoutMs)}`);
}

const succeeded = (r: RunResult) => !r.spawnError && !r.timedOut && r.code === 0;

function failure(r: RunResult, timeoutMs: number): string {
  if (r.spawnError) return `cannot run it: ${r.spawnError.code ?? r.spawnError.message}`;
  if (r.timedOut) return `no answer within ${timeoutMs} ms`;
  const said = r.stderr.trim();
  return `${r.signal ? `killed by ${r.signal}` : `exit code ${r.code}`}${said ? `: ${said}` : ''}`;
}
