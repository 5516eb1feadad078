import { readlink } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { ConnectError } from '../connect/code.ts';

/**
 * Throws unless the open file `handle` really is at `expected` (a path whose directories were
 * all resolved). Node has no openat(2): a file is opened by its path after its directories were
 * checked, and a directory on that path swapped for a symlink in between would land the open
 * elsewhere. procfs says where it landed, before anything is written or truncated.
 */
export async function checkOpenedAt(handle: FileHandle, expected: string): Promise<void> {
  let actual: string;
  try {
    actual = await readlink(`/proc/self/fd/${handle.fd}`);
  } catch (err) {
    throw new ConnectError('internal', `cannot tell where ${expected} was opened (procfs: ${(err as Error).message})`);
  }
  if (actual !== expected) throw new ConnectError('aborted', `a directory on the path ${expected} was replaced while it was being opened; nothing was written`);
}
