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
  /**
   * Polled watchers at once; a create past it removes the least recently polled one (said in the
   * log), or is `resource_exhausted` when all places are taken by creates still under way.
   */
  maxWatchers: number;
  now: () => number;
  log: (line: string) => void;
}

const defaultLimits: WatcherLimits = { maxWatchers: 256, now: Date.now, log: console.error };

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
 * would keep them for good: their number is capped, and a create past the cap removes the
 * least recently polled one. No watcher expires with time: E2B's Python SDK's sync
 * `watch_dir()` polls, and its user may poll again only after a long job or a pause and resume.
 */
export class WatcherRegistry {
  private readonly watchers = new Map<string, PolledWatcher>();
  private readonly limits: WatcherLimits;
  /** Creates under way, counted against the cap before their watcher exists. */
  private opening = 0;
  /** Ids of the watchers removed to make room (the latest maxWatchers), so that their polls say why. */
  private readonly evicted = new Set<string>();

  constructor(limits: Partial<WatcherLimits> = {}) {
    this.limits = { ...defaultLimits, ...limits };
  }

  async create(path: string, recursive: boolean, convert: EventConverter): Promise<string> {
    const { maxWatchers } = this.limits;
    if (this.watchers.size + this.opening >= maxWatchers) {
      if (this.watchers.size === 0) {
        throw new ConnectError('resource_exhausted', `at most ${maxWatchers} watchers may exist at once, and as many are being created`);
      }
      this.evictLeastRecentlyPolled();
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

  private evictLeastRecentlyPolled(): void {
    let oldest: [string, PolledWatcher] | undefined;
    for (const pair of this.watchers) if (!oldest || pair[1].lastPolled < oldest[1].lastPolled) oldest = pair;
    const [id, entry] = oldest!;
    entry.watcher.close();
    this.watchers.delete(id);
    this.evicted.add(id);
    if (this.evicted.size > this.limits.maxWatchers) this.evicted.delete(this.evicted.values().next().value!);
    const idle = Math.round((this.limits.now() - entry.lastPolled) / 1000);
    this.limits.log(`envd: watcher ${id} of ${entry.path} removed to make room for a new one: ${this.limits.maxWatchers} watchers exist, and it was polled least recently (${idle} s ago)`);
  }

  private get(id: string): PolledWatcher {
    const entry = this.watchers.get(id);
    if (!entry && this.evicted.has(id)) {
      throw new ConnectError('not_found', `watcher with id ${id} not found: it was removed to make room for a new one (at most ${this.limits.maxWatchers} watchers exist at once; remove watchers that are no longer needed with RemoveWatcher)`);
    }
    if (!entry) throw new ConnectError('not_found', `watcher with id ${id} not found`);
    return entry;
  }
}
