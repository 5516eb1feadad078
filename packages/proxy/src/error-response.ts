import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { drainRequest, SvcError, writeErrorOnSocket } from '@svc/common';

/**
 * The proxy's own answers: opaque statuses with a uniform `{code, message}` JSON body,
 * and no internal retcode header. Readable by any origin (they carry no credentials), so a page
 * calling a sandbox from the browser (envd allows every origin) sees why, not a bare network error.
 */
export function sendProxyError(res: ServerResponse, err: SvcError): void {
  if (res.headersSent) { res.destroy(); return; }
  const req = res.req;
  // An early answer (no sandbox, refused, gone) while the client still uploads: let it finish first.
  if (req && !req.complete && !req.destroyed) {
    drainRequest(req).then(() => { if (!res.destroyed && !res.headersSent) writeProxyError(res, err); }, () => res.destroy());
    return;
  }
  writeProxyError(res, err);
}

function writeProxyError(res: ServerResponse, err: SvcError): void {
  const body = JSON.stringify(err.toBody());
  const headers: Record<string, string | number> = {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
    'Access-Control-Allow-Origin': '*',
    ...err.headers,
  };
  res.writeHead(err.status, headers);
  res.end(body);
}

/** The same answer written on a raw socket (a WebSocket upgrade that never reached the backend). */
export function sendProxyErrorOnSocket(socket: Duplex, err: SvcError): void {
  if (socket.destroyed) return;
  writeErrorOnSocket(socket, err, { 'Cache-Control': 'no-store' });
  // A client that never closes its side would keep the socket, and the server's close, forever.
  setTimeout(() => socket.destroy(), 5_000).unref();
}

export function asSvcError(err: unknown): SvcError {
  return err instanceof SvcError ? err : new SvcError(502, 'the sandbox could not be reached');
}
