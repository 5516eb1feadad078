import { boundedMessage } from '@svc/common/errors';
/** Connect protocol error codes (https://connectrpc.com/docs/protocol#error-codes). */
export type Code =
  | 'canceled'
  | 'unknown'
  | 'invalid_argument'
  | 'deadline_exceeded'
  | 'not_found'
  | 'already_exists'
  | 'permission_denied'
  | 'resource_exhausted'
  | 'failed_precondition'
  | 'aborted'
  | 'out_of_range'
  | 'unimplemented'
  | 'internal'
  | 'unavailable'
  | 'data_loss'
  | 'unauthenticated';

const httpStatusByCode: Record<Code, number> = {
  canceled: 499,
  unknown: 500,
  invalid_argument: 400,
  deadline_exceeded: 504,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  resource_exhausted: 429,
  failed_precondition: 400,
  aborted: 409,
  out_of_range: 400,
  unimplemented: 501,
  internal: 500,
  unavailable: 503,
  data_loss: 500,
  unauthenticated: 401,
};

export function httpStatusOf(code: Code): number {
  return httpStatusByCode[code];
}

export class ConnectError extends Error {
  constructor(
    readonly code: Code,
    message: string,
  ) {
    super(boundedMessage(message));
    this.name = 'ConnectError';
  }

  toJSON(): { code: Code; message: string } {
    return { code: this.code, message: this.message };
  }
}

const codeByErrno: Record<string, Code> = {
  ENOENT: 'not_found',
  EEXIST: 'already_exists',
  ENOTEMPTY: 'failed_precondition',
  EACCES: 'permission_denied',
  EPERM: 'permission_denied',
  EROFS: 'permission_denied',
  ENOTDIR: 'invalid_argument',
  EISDIR: 'invalid_argument',
  EINVAL: 'invalid_argument',
  ENAMETOOLONG: 'invalid_argument',
  ELOOP: 'failed_precondition',
  ENOSPC: 'resource_exhausted',
  EDQUOT: 'resource_exhausted',
  EMFILE: 'resource_exhausted',
  ENFILE: 'resource_exhausted',
  EXDEV: 'failed_precondition',
  EBUSY: 'unavailable',
  // node's own argument checks (a NUL inside a command argument, say): the caller's input is wrong
  ERR_INVALID_ARG_VALUE: 'invalid_argument',
  ERR_INVALID_ARG_TYPE: 'invalid_argument',
};

/** Turns anything thrown by a handler into a ConnectError; Node errno errors get a matching code. */
export function toConnectError(err: unknown, context?: string): ConnectError {
  if (err instanceof ConnectError) return err;
  const errno = (err as NodeJS.ErrnoException | undefined)?.code;
  const message = err instanceof Error ? err.message : String(err);
  const code = (errno && codeByErrno[errno]) || 'internal';
  return new ConnectError(code, context ? `${context}: ${message}` : message);
}
