/**
 * The file an upload writes, opened as root for a user (envd's uploads run as root, as E2B's
 * do) but only where the user could have written it itself: a symlink, FIFO or device planted by
 * the user must not have root truncate, chown or block on whatever it leads to.
 */
import { constants as fsConstants, type Stats } from 'node:fs';
import { lstat, open, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { whenMissing } from '@svc/common/missing';
import { ConnectError, toConnectError } from '../connect/code.ts';
import { identityOf } from '../filesystem/entry.ts';
import type { MetadataStore } from '../filesystem/metadata-store.ts';
import { checkOpenedAt } from '../system/fd-location.ts';
import { MAY_SEARCH, MAY_WRITE, mayReplace, permits, type Caller } from '../system/user-access.ts';
import { denied, directoryFor } from '../system/user-dirs.ts';
import { HttpError } from './respond.ts';

export interface Uploaded {
  path: string;
  name: string;
  type: 'file';
  metadata?: { [key: string]: string };
}

export interface UploadContext {
  who: Caller;
  metadata: { [key: string]: string } | undefined;
  store: MetadataStore;
  contentLength: number | undefined;
}

export interface TargetFile {
  write(data: Buffer): Promise<void>;
  end(): Promise<Uploaded>;
}

// O_NOFOLLOW: a symlink as the last component fails the open (ELOOP) instead of being followed.
// O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of holding one of libuv's few
// threads for good (four such uploads once stopped every file operation of envd).
const CREATE = fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK | fsConstants.O_NOCTTY;
const EXISTING = fsConstants.O_WRONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK | fsConstants.O_NOCTTY;

const writeBatchBytes = 256 * 1024;

/** Opens (creating or truncating) the upload's file at `path`; its bytes are written as they come. */
export async function createTarget(path: string, ctx: UploadContext): Promise<TargetFile> {
  let handle: FileHandle;
  try {
    handle = await openTarget(path, ctx.who);
  } catch (err) {
    throw diskError(err, ctx, `error opening file '${path}'`);
  }
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await handle.close();
  };
  // Network chunks are small; gather them so the disk sees fewer, larger writes.
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const flush = async () => {
    if (pendingBytes === 0) return;
    const buffers = pending;
    pending = [];
    pendingBytes = 0;
    try {
      await handle.writev(buffers);
    } catch (err) {
      await close().catch(() => { /* the upload has failed already; that failure is the answer */ });
      throw diskError(err, ctx, `error writing file '${path}'`);
    }
  };
  return {
    async write(data) {
      pending.push(data);
      pendingBytes += data.length;
      if (pendingBytes >= writeBatchBytes) await flush();
    },
    async end() {
      await flush();
      try {
        ctx.store.set(identityOf(await handle.stat({ bigint: true })), ctx.metadata);
      } finally {
        await close();
      }
      return { path, name: basename(path), type: 'file', ...(ctx.metadata ? { metadata: ctx.metadata } : {}) };
    },
  };
}

/**
 * The checks, in order: the directories (user-dirs.ts); what is at the name now (no symlink, no
 * directory, nothing but a regular file, and one the user may write or replace); the open itself,
 * which refuses a symlink or FIFO put there since; the opened file, by its descriptor: a regular
 * file, where it was checked to be, and still one the user may write. Only then is it truncated
 * and, when the user could have made it its own, chowned (through the descriptor).
 */
async function openTarget(path: string, who: Caller): Promise<FileHandle> {
  // Lexically clean first: a raw `/a/b/..` would split into the directory `/a/b` and the name `..`.
  const clean = resolve(path);
  const dir = await directoryFor(dirname(clean), who);
  const target = join(dir.path, basename(clean));
  const found = await lstat(target).catch(whenMissing(undefined));
  if (found) mayOverwrite(found, dir.stat, who, path);
  else if (!permits(dir.stat, who, MAY_WRITE | MAY_SEARCH)) throw denied(who, `create files in ${dir.path}`);

  let handle: FileHandle;
  let created = true;
  try {
    handle = await open(target, CREATE, 0o666);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw openError(err, path);
    created = false;
    handle = await open(target, EXISTING).catch((e: unknown) => { throw openError(e, path); });
  }
  try {
    const opened = await handle.stat();
    if (!opened.isFile()) throw notRegular(path);
    await checkOpenedAt(handle, target);
    const own = created || mayOverwrite(opened, dir.stat, who, path);
    if (!created) await handle.truncate(0);
    if (own) await handle.chown(who.uid, who.gid);
    return handle;
  } catch (err) {
    await handle.close().catch(() => { /* the check's failure is the answer */ });
    throw err;
  }
}

/**
 * Throws unless `file` is a regular file that `who` may write, or could replace (then the
 * answer is true: the upload makes it the user's, as E2B's envd does). Replacing is what the
 * user could do with the name, so a file with other hard links is never taken that way.
 */
function mayOverwrite(file: Stats, dir: Stats, who: Caller, path: string): boolean {
  if (file.isSymbolicLink()) {
    throw new ConnectError('invalid_argument', `path is a symbolic link: ${path}; uploads do not follow a link in the last component, write to its target instead`);
  }
  if (file.isDirectory()) throw new ConnectError('invalid_argument', `path is a directory: ${path}`);
  if (!file.isFile()) throw notRegular(path);
  const replaceable = mayReplace(dir, file, who) && (file.nlink === 1 || who.uid === 0);
  if (!replaceable && !permits(file, who, MAY_WRITE)) throw denied(who, `write ${path}`);
  return replaceable;
}

function notRegular(path: string): ConnectError {
  return new ConnectError('invalid_argument', `path is not a regular file: ${path}`);
}

function openError(err: unknown, path: string): Error {
  switch ((err as NodeJS.ErrnoException).code) {
    case 'ELOOP':
      return new ConnectError('invalid_argument', `path is a symbolic link: ${path}`);
    case 'ENXIO':
      return notRegular(path); // a FIFO without a reader, or a socket
    case 'EISDIR':
      return new ConnectError('invalid_argument', `path is a directory: ${path}`);
    default:
      return err as Error;
  }
}

/** ENOSPC and quota errors become 507 (the SDK's NotEnoughSpaceError). */
function diskError(err: unknown, ctx: UploadContext, context: string): Error {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOSPC' || code === 'EDQUOT') {
    const attempted = ctx.contentLength ? `attempted to write ${ctx.contentLength} bytes: ` : '';
    return new HttpError(507, `${attempted}not enough disk space available`);
  }
  return toConnectError(err, context);
}
