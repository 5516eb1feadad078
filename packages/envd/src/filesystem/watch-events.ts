import type { MessageInitShape } from '@bufbuild/protobuf';
import { EventType, type FilesystemEventSchema } from '@svc/contracts/envd/filesystem/filesystem_pb';
import type { ChangeEvent } from './dir-watcher.ts';
import type { EntryReader } from './entry.ts';

export type EventConverter = (changes: ChangeEvent[]) => Promise<MessageInitShape<typeof FilesystemEventSchema>[]>;

/** The change itself is the event: an entry that cannot be read goes without its info, said in the log. */
const withoutEntry = (path: string) => (err: Error) => {
  console.error(`watch: cannot read the entry of ${path}: ${err.message}`);
  return undefined;
};

/**
 * Turns watcher changes into FilesystemEvents, with the entry's info when asked for. Removed or
 * renamed-away entries never carry info (the path may already hold something else).
 */
export function eventConverter(entries: EntryReader, includeEntry: boolean): EventConverter {
  return async (changes) => {
    const out: MessageInitShape<typeof FilesystemEventSchema>[] = [];
    for (const change of changes) {
      const carriesEntry = includeEntry && change.type !== EventType.REMOVE && change.type !== EventType.RENAME;
      const entry = carriesEntry ? await entries.readIfExists(change.path).catch(withoutEntry(change.path)) : undefined;
      out.push({ name: change.name, type: change.type, entry });
    }
    return out;
  };
}
