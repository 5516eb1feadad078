import type { IncomingMessage, ServerResponse } from 'node:http';
import { createGunzip, gunzipSync } from 'node:zlib';
import { ConnectError } from './code.ts';

/** The request body as a byte stream, gunzipped when the client compressed it. */
export function decodedBody(req: IncomingMessage, encoding: string | undefined): AsyncIterable<Buffer> {
  const name = (encoding ?? 'identity').trim().toLowerCase();
  if (name === 'identity' || name === '') return req;
  if (name === 'gzip') return gunzipped(req);
  throw new ConnectError('unimplemented', `unsupported compression "${encoding}", supported: gzip, identity`);
}

/** A body that is not gzip after all is the client's mistake, not an internal error. */
async function* gunzipped(req: IncomingMessage): AsyncIterable<Buffer> {
  try {
    yield* req.pipe(createGunzip());
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code?.startsWith('Z_')) throw new ConnectError('invalid_argument', `cannot decompress the request body: ${(err as Error).message}`);
    throw err;
  }
}

/**
 * Hands each chunk of a body to `consume`. Iterated by hand: leaving a `for await` early (when
 * `consume` throws) would destroy the request, and with it the socket, before the error answer
 * is written, so the client (or the proxy in front) would see a reset instead of the answer; the
 * error answer drains the rest (giveUpOnBody).
 */
export async function forEachChunk(body: AsyncIterable<Buffer>, consume: (chunk: Buffer) => Promise<void> | void): Promise<void> {
  const it = body[Symbol.asyncIterator]();
  for (;;) {
    const next = await it.next();
    if (next.done) return;
    await consume(next.value);
  }
}

/** Reads a whole (small) body, refusing more than maxBytes. */
export async function readAll(body: AsyncIterable<Buffer>, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  await forEachChunk(body, (chunk) => {
    total += chunk.length;
    if (total > maxBytes) throw new ConnectError('resource_exhausted', `request body is larger than the limit of ${maxBytes} bytes`);
    chunks.push(chunk);
  });
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
}

export function gunzipMessage(data: Buffer, maxBytes: number): Buffer {
  try {
    return gunzipSync(data, { maxOutputLength: maxBytes });
  } catch (err) {
    const tooLarge = (err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE';
    throw tooLarge
      ? new ConnectError('resource_exhausted', `decompressed message is larger than the limit of ${maxBytes} bytes`)
      : new ConnectError('invalid_argument', `cannot decompress message: ${(err as Error).message}`);
  }
}

/**
 * Before answering a request whose body was not read to the end (an error mid-upload): let the
 * rest drain after the answer so the client can finish sending and read it. Closing the
 * connection instead would reset the socket under a client still writing (EPIPE), and it gains
 * nothing: the parser knows where the body ends, so the connection can carry the next request.
 */
export function giveUpOnBody(res: ServerResponse): void {
  const req = res.req;
  if (!req || req.complete || req.destroyed) return;
  // A reader left mid-way holds the request back: a pipe into a gunzip, or an async iterator's
  // 'readable' listener (while one is attached, resume() does not make the stream flow).
  req.unpipe();
  req.removeAllListeners('readable');
  req.resume();
}
