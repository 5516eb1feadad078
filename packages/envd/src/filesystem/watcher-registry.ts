import type { MessageInitShape } from '@bufbuild/protobuf';
import { ConnectError } from '../connect/code.ts';
import type { FilesystemEventSchema } from '@svc/contracts/envd/filesystem/filesystem_pb';
import { kernelRandomBytes } from '../system/kernel-random.ts';
import { DirWatcher } from './dir-watcher.ts';
import type { EventConverter } from './watch-events.ts';

type FilesystemEventInit = MessageInitShape<typeof FilesystemEventSchema>;

/** Unread events kept per polled watcher before it is marked failed. */
const maxBufferedEvents = 50_000;

interface PolledWatcher {
  watcher: DirWatcher;
  events: FilesystemEventInit[];
  error: ConnectError | undefined;
}

/** Watchers of the polling API (CreateWatcher / GetWatcherEvents / RemoveWatcher). */
export class WatcherRegistry {
  private readonly watchers = new Map<string, PolledWatcher>();

  async create(path: string, recursive: boolean, convert: EventConverter): Promise<string> {
    // From the kernel: clones of one template share envd's generators (system/kernel-random.ts).
    const id = `w${kernelRandomBytes(8).toString('hex')}`;
    const entry: PolledWatcher = { watcher: undefined as unknown as DirWatcher, events: [], error: undefined };
    let converted = Promise.resolve();
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
    this.watchers.set(id, entry);
    return id;
  }

  /** Drains the events collected since the last call. */
  drain(id: string): FilesystemEventInit[] {
    const entry = this.get(id);
    if (entry.error) throw entry.error;
    const events = entry.events;
    entry.events = [];
    return events;
  }

  remove(id: string): void {
    this.get(id).watcher.close();
    this.watchers.delete(id);
  }

  private get(id: string): PolledWatcher {
    const entry = this.watchers.get(id);
    if (!entry) throw new ConnectError('not_found', `watcher with id ${id} not found`);
    return entry;
  }
}
