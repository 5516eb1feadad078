import type { Duplex } from 'node:stream';
import { SvcError, writeErrorOnSocket } from '@svc/common';
import type { ServerReply } from '@svc/http1';

/**
 * The proxy's own answers: opaque statuses with a uniform `{code, message}` JSON body,
 * and no internal retcode header. Readable by any origin (they carry no credentials), so a page
 * calling a sandbox from the browser (envd allows every origin) sees why, not a bare network error.
 */
export function sendProxyError(res: ServerReply, err: SvcError): void {
  if (res.headersSent) { res.destroy(); return; }
  const req = res.req;
  // An early answer (no sandbox, refused, gone) while the client still uploads: let it finish
  // first. One that uploads too much or too long is answered, and the connection closes.
  if (!req.complete && !req.aborted) {
    void req.drain().then((whole) => {
      if (res.destroyed || res.headersSent) return;
      if (!whole) res.closeAfter();
      writeProxyError(res, err);
    });
    return;
  }
  writeProxyError(res, err);
}

/** The answer at once, without reading the rest of an upload first; the connection closes after it. */
export function sendProxyErrorAndClose(res: ServerReply, err: SvcError): void {
  if (res.headersSent) { res.destroy(); return; }
  res.closeAfter();
  writeProxyError(res, err);
}

function writeProxyError(res: ServerReply, err: SvcError): void {
  const body = JSON.stringify(err.toBody());
  const headers = [
    'Content-Type', 'application/json',
    'Content-Length', String(Buffer.byteLength(body)),
    'Cache-Control', 'no-store',
    'Access-Control-Allow-Origin', '*',
  ];
  for (const [name, value] of Object.entries(err.headers)) headers.push(name, String(value));
  res.writeHead(err.status, undefined, headers);
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
