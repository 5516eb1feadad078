import { chmod, open, readdir, rename, stat, unlink } from 'node:fs/promises';
import { createWriteStream, type WriteStream } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/**
 * The file-system side of audit log rotation (docs/egress.md "Audit log"): opening the live file,
 * shifting access.jsonl → .1 → .2 …, and ending a stream. The AuditLog decides when.
 */

/** The calls rotation makes, injectable so tests can make one fail. */
export interface RotationFs {
  rename(from: string, to: string): Promise<void>;
  unlink(path: string): Promise<void>;
  readdir(dir: string): Promise<string[]>;
}

export const realRotationFs: RotationFs = { rename, unlink, readdir: (dir) => readdir(dir) };

export interface OpenedAuditFile {
  stream: WriteStream;
  /** Bytes already in the file: they count towards the size limit. */
  size: number;
  /** When the file's first record was written; undefined for an empty file. */
  firstRecordAt?: Date;
}

/** Opens `path` for appending, mode 0640, and reads what rotation needs to know about what is already there. */
export async function openAuditFile(path: string): Promise<OpenedAuditFile> {
  const stream = createWriteStream(path, { flags: 'a', mode: 0o640 });
  await new Promise<void>((resolve, reject) => {
    stream.once('open', () => resolve());
    stream.once('error', reject);
  });
  try {
    // An older file keeps its mode on open; the log is not for every local user.
    await chmod(path, 0o640);
    const st = await stat(path);
    if (st.size === 0) return { stream, size: 0 };
    return { stream, size: st.size, firstRecordAt: (await firstRecordTime(path)) ?? st.mtime };
  } catch (err) {
    // The caller gets no stream to close: close this one before passing the error on.
    stream.destroy();
    throw err;
  }
}

/** The `ts` of the file's first line, if it is a record with a readable one. */
async function firstRecordTime(path: string): Promise<Date | undefined> {
  const fh = await open(path, 'r');
  try {
    const buf = Buffer.alloc(64 * 1024);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    const text = buf.subarray(0, bytesRead).toString('utf8');
    const end = text.indexOf('\n');
    if (end < 0) return undefined;
    const ts = (JSON.parse(text.slice(0, end)) as { ts?: unknown }).ts;
    const ms = typeof ts === 'string' ? Date.parse(ts) : NaN;
    return Number.isNaN(ms) ? undefined : new Date(ms);
  } catch (err) {
    // A first line that is not JSON (a file someone else wrote, a torn line after a crash): the caller falls back to the mtime.
    if (err instanceof SyntaxError) return undefined;
    throw err;
  } finally {
    await fh.close();
  }
}

/**
 * Makes room for a new live file: `path.N` for N ≥ keep is deleted (also ones left by a larger
 * `keep` earlier), every other `path.N` becomes `path.N+1`, and `path` becomes `path.1`.
 * Renames run from the highest N down, so none overwrites a file still to be moved. A failure
 * stops before `path` is moved, so the live file is never renamed over a rotated one that could
 * not be shifted; the error is thrown for the caller to log.
 */
export async function shiftRotated(path: string, keep: number, fs: RotationFs = realRotationFs): Promise<void> {
  const base = basename(path);
  const dir = dirname(path);
  const numbers = (await fs.readdir(dir))
    .map((name) => (name.startsWith(`${base}.`) ? name.slice(base.length + 1) : ''))
    .filter((suffix) => /^[1-9][0-9]*$/.test(suffix))
    .map(Number)
    .sort((a, b) => b - a);
  for (const n of numbers) {
    if (n >= keep) await fs.unlink(join(dir, `${base}.${n}`)).catch(ignoreMissing);
    else await fs.rename(join(dir, `${base}.${n}`), join(dir, `${base}.${n + 1}`));
  }
  // A live file that is gone (deleted by hand, or left at path.1 by a failed rotation) has nothing to move.
  await fs.rename(path, `${path}.1`).catch(ignoreMissing);
}

function ignoreMissing(err: NodeJS.ErrnoException): void {
  // Already gone (someone cleaned up by hand): that is the outcome we wanted.
  if (err.code !== 'ENOENT') throw err;
}

/**
 * Ends a stream and resolves once its file is closed. 'close' comes after 'finish' (every line
 * handed to the file) or after an error, which the stream's own 'error' listener reports.
 */
export function endStream(stream: WriteStream): Promise<void> {
  return new Promise((resolve) => {
    if (stream.closed) return resolve();
    stream.once('close', () => resolve());
    if (!stream.writableEnded && !stream.destroyed) stream.end();
  });
}

/** The first instant of the local calendar day after the one `d` falls on (DST-safe: built from fields). */
export function nextLocalMidnight(d: Date): number {
  return new Date(d.getFullYear(), d.getMonth(), d.getDate() + 1).getTime();
}
