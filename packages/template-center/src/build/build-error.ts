import { ImageSourceError } from '../image/resolved-image.ts';
import { DigestMismatchError } from '../layers/layer-blob.ts';
import { UnsafePathError } from '../layers/safe-path.ts';
import { ImageTooLargeError } from '../layers/unpack-budget.ts';
import { RegistryError } from '../registry/registry-error.ts';
import { ImageTooSmallError, NoSpaceError } from '../rootfs/mkfs.ts';

/** A build failure with the message the user will read on the job. */
export class BuildError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BuildError';
  }
}

export class BuildAbortedError extends BuildError {}

/**
 * A job the master cancelled (POST /tc/api/v1/build/:jobId/cancel): it does so when the template
 * the job builds is deleted, so the message says that.
 */
export class BuildCancelledError extends BuildAbortedError {
  constructor() {
    super('the build was cancelled because its template was deleted');
  }
}

const SELF_EXPLAINING = [BuildError, RegistryError, ImageSourceError, DigestMismatchError, UnsafePathError, NoSpaceError, ImageTooSmallError, ImageTooLargeError];

/** Runs one stage of a build and turns whatever it throws into a message a user can act on. */
export async function stage<T>(what: string | (() => string), signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    // The abort's own reason when it has words for the team (the build's deadline, the shutdown).
    if (signal.aborted) throw signal.reason instanceof BuildError ? signal.reason : new BuildAbortedError('the template center stopped during the build; submit it again (redo)', { cause: err });
    throw explain(err, typeof what === 'function' ? what() : what);
  }
}

export function explain(err: unknown, what: string): BuildError {
  if (err instanceof BuildError) return err;
  const e = err as NodeJS.ErrnoException;
  if (SELF_EXPLAINING.some((cls) => err instanceof cls)) return new BuildError(e.message, { cause: err });
  // A system call's own message names the host path it failed on ("EACCES: permission denied,
  // open '/var/lib/svc/artifacts/.work/…'"): the team reads these words, so they say what failed
  // and how; the log has the cause with its path (job-runner.ts).
  switch (e?.code) {
    case 'ENOSPC': return new BuildError(`no space left on device while ${what}`, { cause: err });
    case 'EDQUOT': return new BuildError(`disk quota exceeded while ${what}`, { cause: err });
    case 'EACCES':
    case 'EPERM': return new BuildError(`permission denied while ${what}`, { cause: err });
    case 'EMFILE':
    case 'ENFILE': return new BuildError(`too many open files while ${what}`, { cause: err });
  }
  if (e?.code?.startsWith?.('Z_')) return new BuildError(`corrupt compressed data while ${what}: ${e.message}`, { cause: err });
  if (isSystemError(err)) return new BuildError(`${what} failed: ${e.code} in ${e.syscall}`, { cause: err });
  return new BuildError(`${what} failed: ${e?.message ?? String(err)}`, { cause: err });
}

/** An error of a system call (fs, spawn, sockets): a code and the call's name. */
export function isSystemError(err: unknown): err is NodeJS.ErrnoException {
  const e = err as NodeJS.ErrnoException;
  return typeof e?.code === 'string' && typeof e.syscall === 'string';
}
