import { watch, type FSWatcher, type Stats } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { basename, join, relative } from 'node:path';
import { ConnectError, toConnectError } from '../connect/code.ts';
import { EventType } from '@svc/contracts/envd/filesystem/filesystem_pb';
import { whenMissing } from '@svc/common/missing';

export interface ChangeEvent {
  /** Absolute path of the entry. */
  path: string;
  /** Path relative to the watched root ("." for the root itself). */
  name: string;
  type: EventType;
}

export interface WatchListener {
  events(events: ChangeEvent[]): void;
  error(err: ConnectError): void;
}

interface Known {
  ino: number;
  dir: boolean;
  mode: number;
  uid: number;
  gid: number;
}

interface WatchedDir {
  watcher: FSWatcher;
  entries: Map<string, Known>;
}

interface Touched {
  watched: WatchedDir;
  name: string;
  before: Known | undefined;
}

interface Raw {
  dir: string;
  kind: 'rename' | 'change';
  name: string;
}

const maxWatchedDirs = 10_000;

/**
 * Reports changes in a directory (and, when recursive, its subdirectories) as E2B's envd does
 * with fsnotify: create, write, remove, rename, chmod. Node's fs.watch only says "rename" or
 * "change" per name, so each batch of raw events is compared against what was known to exist
 * before it and what exists now (inode numbers pair a rename's two halves, mode and owner
 * separate chmod from write).
 */
export class DirWatcher {
  private readonly dirs = new Map<string, WatchedDir>();
  private pending: Raw[] = [];
  private flushScheduled = false;
  private chain: Promise<void> = Promise.resolve();
  private ready = false;
  private closed = false;
  private rootGone = false;

  private constructor(
    private readonly root: string,
    private readonly recursive: boolean,
    private readonly listener: WatchListener,
  ) {}

  static async open(root: string, recursive: boolean, listener: WatchListener): Promise<DirWatcher> {
    const watcher = new DirWatcher(root, recursive, listener);
    try {
      await watcher.addDir(root, undefined);
    } catch (err) {
      watcher.close();
      throw err;
    }
    watcher.ready = true;
    watcher.scheduleFlush();
    return watcher;
  }

  close(): void {
    this.closed = true;
    for (const dir of this.dirs.values()) dir.watcher.close();
    this.dirs.clear();
    this.pending = [];
  }

  /** Watches `dir`; with `announce`, reports what is already inside as created (a new subtree). */
  private async addDir(dir: string, announce: ChangeEvent[] | undefined): Promise<void> {
    if (this.closed || this.dirs.has(dir)) return;
    if (this.dirs.size >= maxWatchedDirs) {
      throw new ConnectError('resource_exhausted', `cannot watch more than ${maxWatchedDirs} directories under ${this.root}`);
    }
    let watcher: FSWatcher;
    try {
      watcher = watch(dir, { persistent: false }, (kind, name) => {
        if (!name || this.closed) return;
        this.pending.push({ dir, kind: kind === 'change' ? 'change' : 'rename', name: name.toString() });
        this.scheduleFlush();
      });
    } catch (err) {
      if (dir === this.root) throw toWatchError(err, dir);
      return; // a subdirectory that vanished or cannot be read is simply not watched
    }
    watcher.on('error', (err) => {
      if (dir === this.root) this.fail(toWatchError(err, dir));
      else this.removeTree(dir);
    });
    const entries = new Map<string, Known>();
    this.dirs.set(dir, { watcher, entries });

    let names: string[];
    try {
      names = await readdir(dir);
    } catch (err) {
      if (dir === this.root) throw toWatchError(err, dir);
      this.removeTree(dir);
      return;
    }
    for (const name of names) {
      const path = join(dir, name);
      const info = await lstat(path).catch(whenMissing(undefined)); // gone since the listing: not announced
      if (!info) continue;
      entries.set(name, known(info));
      announce?.push({ path, name: this.nameOf(path), type: EventType.CREATE });
      if (this.recursive && info.isDirectory()) await this.addDir(path, announce);
    }
  }

  private removeTree(dir: string): void {
    const prefix = dir.endsWith('/') ? dir : `${dir}/`;
    for (const [path, watched] of this.dirs) {
      if (path === dir || path.startsWith(prefix)) {
        watched.watcher.close();
        this.dirs.delete(path);
      }
    }
  }

  private scheduleFlush(): void {
    if (!this.ready || this.flushScheduled || this.closed || this.pending.length === 0) return;
    this.flushScheduled = true;
    // One inotify read delivers all queued events synchronously; setImmediate groups them.
    setImmediate(() => {
      this.flushScheduled = false;
      const batch = this.pending;
      this.pending = [];
      this.chain = this.chain.then(() => this.process(batch)).catch((err) => this.fail(toWatchError(err, this.root)));
    });
  }

  private async process(batch: Raw[]): Promise<void> {
    if (this.closed) return;
    // What exists now, once per path touched by the batch.
    const now = new Map<string, Stats | undefined>();
    await Promise.all(
      [...new Set(batch.map((r) => join(r.dir, r.name)))].map(async (path) => now.set(path, await lstat(path).catch(whenMissing(undefined)))),
    );
    const renames = countBy(batch, 'rename');
    const changes = countBy(batch, 'change');

    type Planned = ChangeEvent & { goneIno?: number; newIno?: number };
    const planned: Planned[] = [];
    const seen = new Map<string, number>();
    const touched = new Map<string, Touched>();

    for (const raw of batch) {
      const watched = this.dirs.get(raw.dir);
      if (!watched) continue;
      const path = join(raw.dir, raw.name);
      const current = now.get(path);
      const before = touched.has(path) ? touched.get(path)!.before : watched.entries.get(raw.name);
      if (!touched.has(path)) touched.set(path, { watched, name: raw.name, before });
      if (raw.name === basename(raw.dir) && !before && !current) {
        if (raw.dir === this.root && raw.kind === 'rename' && !this.rootGone && !(await lstat(this.root).catch(whenMissing(undefined)))) {
          this.rootGone = true;
          planned.push({ path: raw.dir, name: '.', type: EventType.REMOVE });
        }
        continue; // an event about a watched directory itself
      }
      const name = this.nameOf(path);
      const key = `${raw.kind}:${path}`;
      const i = seen.get(key) ?? 0;
      seen.set(key, i + 1);
      if (raw.kind === 'rename') {
        const type = existenceSequence(!!before, !!current, renames.get(path)!)[i]!;
        planned.push({
          path,
          name,
          type,
          goneIno: type === EventType.REMOVE && i === 0 && before && before.ino >= 0 ? before.ino : undefined,
          newIno: type === EventType.CREATE ? current?.ino : undefined,
        });
      } else {
        if (!before && !renames.has(path) && current && i === 0) planned.push({ path, name, type: EventType.CREATE, newIno: current.ino });
        const last = i === changes.get(path)! - 1;
        const chmod = last && before && current && (before.mode !== (current.mode & 0o7777) || before.uid !== current.uid || before.gid !== current.gid);
        planned.push({ path, name, type: chmod ? EventType.CHMOD : EventType.WRITE });
      }
    }

    // A disappearance whose inode reappeared elsewhere in the same batch was a rename.
    const appeared = new Set(planned.filter((p) => p.newIno !== undefined).map((p) => p.newIno));
    for (const p of planned) if (p.goneIno !== undefined && appeared.has(p.goneIno)) p.type = EventType.RENAME;

    const newDirs = this.updateKnown(touched, now, renames);
    const events: ChangeEvent[] = planned.map(({ path, name, type }) => ({ path, name, type }));
    for (const dir of newDirs) await this.addDir(dir, events);
    if (events.length > 0 && !this.closed) this.listener.events(events);
  }

  /**
   * Records what each touched name is now believed to be. The belief follows the events, not
   * only the disk: an entry created and already deleted again stays "present" until its removal
   * event arrives, so that event is read as a removal. Returns directories to start watching.
   */
  private updateKnown(touched: Map<string, Touched>, now: Map<string, Stats | undefined>, renames: Map<string, number>): string[] {
    const newDirs: string[] = [];
    for (const [path, { watched, name, before }] of touched) {
      const current = now.get(path);
      const count = renames.get(path);
      const believed = count === undefined ? !!before || !!current : existenceSequence(!!before, !!current, count).at(-1) === EventType.CREATE;
      if (believed && current) watched.entries.set(name, known(current));
      else if (believed) watched.entries.set(name, before && count === undefined ? before : ghost);
      else watched.entries.delete(name);
      if (!this.recursive) continue;
      const replaced = before && current && before.ino !== current.ino;
      if (before?.dir && (!current || replaced)) this.removeTree(path);
      if (current?.isDirectory() && (!this.dirs.has(path) || replaced)) newDirs.push(path);
    }
    return newDirs;
  }

  private nameOf(path: string): string {
    return relative(this.root, path) || '.';
  }

  private fail(err: ConnectError): void {
    if (this.closed) return;
    this.close();
    this.listener.error(err);
  }
}

/**
 * The create/remove events a run of `count` rename notifications on one name stands for, given
 * whether it existed before the run and exists after it. A rename onto an existing name counts
 * once but replaces the entry, hence the odd present-to-present case.
 */
function existenceSequence(before: boolean, after: boolean, count: number): EventType[] {
  const out: EventType[] = [];
  if (before && after && count % 2 === 1) {
    for (let i = 0; i < count - 1; i++) out.push(i % 2 === 0 ? EventType.REMOVE : EventType.CREATE);
    out.push(EventType.CREATE);
    return out;
  }
  let exists = before;
  for (let i = 0; i < count; i++) {
    out.push(exists ? EventType.REMOVE : EventType.CREATE);
    exists = !exists;
  }
  return out;
}

/** Stands for an entry whose creation was seen but which is already gone from disk. */
const ghost: Known = { ino: -1, dir: false, mode: -1, uid: -1, gid: -1 };

function countBy(batch: Raw[], kind: Raw['kind']): Map<string, number> {
  const counts = new Map<string, number>();
  for (const raw of batch) {
    if (raw.kind !== kind) continue;
    const path = join(raw.dir, raw.name);
    counts.set(path, (counts.get(path) ?? 0) + 1);
  }
  return counts;
}

function known(info: Stats): Known {
  return { ino: info.ino, dir: info.isDirectory(), mode: info.mode & 0o7777, uid: info.uid, gid: info.gid };
}

/** The errno mapping every envd route uses (connect/code.ts), with the inotify limits named. */
function toWatchError(err: unknown, dir: string): ConnectError {
  if (err instanceof ConnectError) return err;
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOSPC' || code === 'EMFILE') return new ConnectError('resource_exhausted', `error watching ${dir}: ${(err as Error).message} (inotify limits reached)`);
  return toConnectError(err, `error watching ${dir}`);
}
