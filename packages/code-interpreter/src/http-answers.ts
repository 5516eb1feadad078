/**
 * How the service answers: JSON, an empty 204, or svc's error body `{code, message}` (the SDK
 * shows a 404's body and only the status line of other errors).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { boundedMessage } from '@svc/common/errors';
import type { HttpProblem } from './requests.ts';

export function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export function sendEmpty(res: ServerResponse): void {
  res.writeHead(204);
  res.end();
}

export function sendProblem(res: ServerResponse, p: HttpProblem): void {
  // The rest of a body past the limit is not read: the connection closes after the answer,
  // instead of Node reading (and dropping) whatever more the client sends.
  if (p.status === 413 && !res.headersSent) res.setHeader('connection', 'close');
  sendError(res, p.status, p.message);
}

export function sendError(res: ServerResponse, status: number, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, status, { code: status, message: boundedMessage(message) });
}
