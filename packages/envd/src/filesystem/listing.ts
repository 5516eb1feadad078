import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { FileType } from '@svc/contracts/envd/filesystem/filesystem_pb';
import type { EntryInit, EntryReader } from './entry.ts';

/**
 * Entries under `dir` down to `depth` levels, in the order Go's filepath.WalkDir visits them
 * (lexical, parents before children, symlinked directories not followed). Paths are reported
 * under `shownAs`, the path the client asked for, even when `dir` is its resolved symlink target.
 */
export async function listTree(dir: string, shownAs: string, depth: number, entries: EntryReader): Promise<EntryInit[]> {
  const out: EntryInit[] = [];
  const visit = async (realDir: string, shownDir: string, level: number): Promise<void> => {
    let names: string[];
    try {
      names = (await readdir(realDir)).sort();
    } catch (err) {
      if (level === 1) throw err;
      return; // a subdirectory that vanished or is unreadable is listed without its contents
    }
    for (const name of names) {
      const entry = await entries.readIfExists(join(realDir, name));
      if (!entry) continue;
      const shown = join(shownDir, name);
      out.push({ ...entry, path: shown });
      if (level < depth && entry.type === FileType.DIRECTORY && entry.symlinkTarget === undefined) {
        await visit(join(realDir, name), shown, level + 1);
      }
    }
  };
  await visit(dir, shownAs, 1);
  return out;
}
