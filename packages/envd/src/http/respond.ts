import type { ServerResponse } from 'node:http';
import { giveUpOnBody } from '../connect/body.ts';
import { boundedMessage } from '@svc/common/errors';
import { ConnectError, httpStatusOf, toConnectError } from '../connect/code.ts';

/** JSON error body of envd's plain HTTP routes: `{code: <http status>, message}`. */
export function sendError(res: ServerResponse, status: number, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ code: status, message: boundedMessage(message) });
  giveUpOnBody(res);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'x-content-type-options': 'nosniff',
    'content-length': Buffer.byteLength(body),
  });
  // The answer is written now but ended once the upload is read: ended earlier, node would close
  // a `Connection: close` client's socket under its upload, which then sees a reset, not this.
  const req = res.req;
  if (!req || req.complete || req.destroyed) {
    res.end(body);
    return;
  }
  res.write(body);
  const end = () => { clearTimeout(timer); if (!res.writableEnded) res.end(); };
  const timer = setTimeout(end, UPLOAD_DRAIN_MS);
  req.once('end', end);
  req.once('close', end);
}

/** How long an early error answer waits for the rest of the upload before it ends anyway. */
const UPLOAD_DRAIN_MS = 30_000;

/** An error of a plain HTTP route whose status has no Connect code (406, 507). */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Sends an error thrown while serving a plain HTTP route, picking the status from its code. */
export function sendFailure(res: ServerResponse, err: unknown): void {
  if (err instanceof HttpError) return sendError(res, err.status, err.message);
  const error = toConnectError(err);
  sendError(res, statusOf(error), error.message);
}

function statusOf(error: ConnectError): number {
  if (error.code === 'resource_exhausted') return 507; // disk full: the SDK's NotEnoughSpaceError
  if (error.code === 'internal' || error.code === 'unknown') return 500;
  return httpStatusOf(error.code);
}

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, {
    'content-type': 'application/json',
    'cache-control': 'no-store',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}
