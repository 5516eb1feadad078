import type { MessageInitShape } from '@bufbuild/protobuf';
import { ConnectError } from '../connect/code.ts';
import type { FilesystemEventSchema } from '@svc/contracts/envd/filesystem/filesystem_pb';
import { kernelRandomBytes } from '../system/kernel-random.ts';
import { DirWatcher } from './dir-watcher.ts';
import type { EventConverter } from './watch-events.ts';

type FilesystemEventInit = MessageInitShape<typeof FilesystemEventSchema>;

/** Unread events kept per polled watcher before it is marked failed. */
const maxBufferedEvents = 50_000;

export interface WatcherLimits {
  /** Polled watchers at once; more are `resource_exhausted` until some are removed. */
  maxWatchers: number;
  /** A watcher not polled (GetWatcherEvents) for this long is removed: its client is gone. */
  idleMs: number;
  now: () => number;
  log: (line: string) => void;
}

const defaultLimits: WatcherLimits = { maxWatchers: 256, idleMs: 10 * 60_000, now: Date.now, log: console.error };

interface PolledWatcher {
  path: string;
  watcher: DirWatcher;
  events: FilesystemEventInit[];
  error: ConnectError | undefined;
  lastPolled: number;
}

/**
 * Watchers of the polling API (CreateWatcher / GetWatcherEvents / RemoveWatcher). Each holds
 * inotify watches and up to maxBufferedEvents events, and a client that forgets RemoveWatcher
 * would keep them for good: their number is capped, and idle ones are removed.
 */
export class WatcherRegistry {
  private readonly watchers = new Map<string, PolledWatcher>();
  private readonly limits: WatcherLimits;
  /** Creates under way, counted against the cap before their watcher exists. */
  private opening = 0;

  constructor(limits: Partial<WatcherLimits> = {}) {
    this.limits = { ...defaultLimits, ...limits };
    // Removes idle watchers even when nobody calls; unref'd, it never keeps envd alive.
    setInterval(() => this.sweep(), Math.min(60_000, this.limits.idleMs)).unref();
  }

  async create(path: string, recursive: boolean, convert: EventConverter): Promise<string> {
    this.sweep();
    const { maxWatchers } = this.limits;
    if (this.watchers.size + this.opening >= maxWatchers) {
      throw new ConnectError('resource_exhausted', `at most ${maxWatchers} watchers may exist at once; remove watchers that are no longer needed (RemoveWatcher)`);
    }
    // From the kernel: clones of one template share envd's generators (system/kernel-random.ts).
    const id = `w${kernelRandomBytes(8).toString('hex')}`;
    const entry: PolledWatcher = { path, watcher: undefined as unknown as DirWatcher, events: [], error: undefined, lastPolled: this.limits.now() };
    let converted = Promise.resolve();
    this.opening++;
    try {
      entry.watcher = await DirWatcher.open(path, recursive, {
        events: (changes) => {
          converted = converted.then(() => convert(changes)).then((events) => {
            if (entry.error) return;
            entry.events.push(...events);
            if (entry.events.length > maxBufferedEvents) {
              entry.error = new ConnectError('resource_exhausted', `more than ${maxBufferedEvents} unread events, the watcher was stopped`);
              entry.events = [];
              entry.watcher.close();
            }
          });
        },
        error: (err) => {
          entry.error = err;
        },
      });
    } finally {
      this.opening--;
    }
    this.watchers.set(id, entry);
    return id;
  }

  /** Drains the events collected since the last call. */
  drain(id: string): FilesystemEventInit[] {
    this.sweep();
    const entry = this.get(id);
    entry.lastPolled = this.limits.now();
    if (entry.error) throw entry.error;
    const events = entry.events;
    entry.events = [];
    return events;
  }

  remove(id: string): void {
    this.get(id).watcher.close();
    this.watchers.delete(id);
  }

  private sweep(): void {
    const now = this.limits.now();
    for (const [id, entry] of this.watchers) {
      if (now - entry.lastPolled <= this.limits.idleMs) continue;
      entry.watcher.close();
      this.watchers.delete(id);
      this.limits.log(`envd: watcher ${id} of ${entry.path} removed: not polled for ${Math.round(this.limits.idleMs / 60_000)} minutes`);
    }
  }

  private get(id: string): PolledWatcher {
    const entry = this.watchers.get(id);
    if (!entry) throw new ConnectError('not_found', `watcher with id ${id} not found`);
    return entry;
  }
}
