/**
 * One `svc up` per data directory. A second one on the same directory once started halfway: its
 * volume plugin removed the first's socket, its master failed at listen, and its exit unlinked the
 * socket the first still served on; two first starts raced on secrets.json.tmp (found by a review,
 * 2026-12).
 *
 * Node has no flock(2), so the lock is a pid file, `<data_dir>/svc.lock`, made whole under a name
 * of its own and then hard-linked to the lock's name: link(2) fails when the name exists, so of two
 * starts exactly one makes it, and nobody ever reads a half-written lock. The file records the
 * holder's pid, the boot it ran in and its start time (/proc/<pid>/stat): a lock whose process is
 * gone, or whose pid a later process (after a reboot, or a wrap of pids) now has, is stale, and a
 * crashed run never blocks the next start. A stale lock is taken over by renaming it away (atomic)
 * and checking that what was moved is the stale lock that was read; a live lock another start
 * took in between is put back. An abstract Unix socket would free itself at exit, but any user of
 * the host could bind its name first and keep root's svc from starting, and it is per network
 * namespace; the pid file is root's alone, in the 0700 data directory.
 */
import { linkSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface DataDirLock {
  /** Removes the lock if it is still this process's (idempotent; runs at exit too). */
  release(): void;
}

/** `svc up` is already running on the directory: the message names its pid. */
export class DataDirLocked extends Error {}

const TAKEOVER_TRIES = 5;

/** Takes `<dataDir>/svc.lock` for this process, or throws DataDirLocked naming the live holder. */
export function lockDataDir(dataDir: string, self = processIdentity(process.pid)): DataDirLock {
  const lock = join(dataDir, 'svc.lock');
  const mine = `${lock}.${process.pid}`;
  const text = `${JSON.stringify(self)}\n`;
  // Our own name (a leftover of an earlier process of this pid is removed); 'wx' never writes through a link.
  rmSync(mine, { force: true });
  writeFileSync(mine, text, { mode: 0o600, flag: 'wx' });
  try {
    for (let i = 0; i < TAKEOVER_TRIES; i++) {
      try {
        linkSync(mine, lock);
        return held(lock, text);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const seen = readOrEmpty(lock);
      const holder = parse(seen);
      if (holder && alive(holder)) {
        throw new DataDirLocked(`svc up is already running on the data directory ${dataDir} (pid ${holder.pid}; ${lock}): stop it first, or choose another --data-dir`);
      }
      takeOverStale(lock, seen);
    }
  } finally {
    unlinkSync(mine);
  }
  throw new DataDirLocked(`${lock} kept changing while svc up tried to take it: another svc up is starting on ${dataDir}`);
}

function held(lock: string, text: string): DataDirLock {
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    // Only our own: a lock a later start took over (after this process was thought gone) is its.
    if (readOrEmpty(lock) === text) unlinkSync(lock);
  };
  process.once('exit', release);
  return { release };
}

/** Removes the lock if it still is the stale one read (`seen`); puts back a live one taken meanwhile. */
function takeOverStale(lock: string, seen: string): void {
  const aside = `${lock}.stale.${process.pid}`;
  try {
    renameSync(lock, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return; // another start removed it: try again
    throw err;
  }
  const moved = readOrEmpty(aside);
  if (moved !== seen) {
    // A start took the lock between our read and our rename: give it back.
    try {
      linkSync(aside, lock);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  unlinkSync(aside);
}

export interface ProcessIdentity { pid: number; boot: string; start: string }

/** A process as the kernel knows it: a pid alone is reused after a reboot or a wrap. */
export function processIdentity(pid: number): ProcessIdentity {
  return { pid, boot: readOrEmpty('/proc/sys/kernel/random/boot_id').trim(), start: startTime(pid) ?? '' };
}

function alive(holder: ProcessIdentity): boolean {
  try {
    process.kill(holder.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
  }
  // The pid is taken: by the holder only if it is the same boot and the same start.
  const now = processIdentity(holder.pid);
  if (holder.boot && now.boot && holder.boot !== now.boot) return false;
  if (holder.start && now.start && holder.start !== now.start) return false;
  return true;
}

/** Field 22 of /proc/<pid>/stat (clock ticks since boot); the name in field 2 may hold spaces and parentheses. */
function startTime(pid: number): string | undefined {
  const stat = readOrEmpty(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields[19] || undefined;
}

function parse(text: string): ProcessIdentity | undefined {
  try {
    const v = JSON.parse(text) as ProcessIdentity;
    return Number.isInteger(v.pid) && v.pid > 0 ? v : undefined;
  } catch {
    // Empty or torn (written by hand, or a disk full): no live holder can be named, so it is stale.
    return undefined;
  }
}

function readOrEmpty(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    // Gone (or unreadable): treated as no content, which the callers take as no holder.
    return '';
  }
}
