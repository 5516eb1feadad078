import type { IncomingMessage, ServerResponse } from 'node:http';
import type { UpstreamConnection } from './upstream-pool.ts';

/**
 * Streams a client's request body to the upstream connection as it comes, with backpressure:
 * raw after a Content-Length, chunked again after a Transfer-Encoding (node's server de-chunked
 * it). `current` says whether the exchange still uses `conn` (a retry or a failure moved on, and
 * then nothing more goes to it); `onChunk` sees each chunk's size before it is written.
 */
export function streamRequestBody(req: IncomingMessage, conn: UpstreamConnection, chunked: boolean, current: () => boolean, onChunk?: (bytes: number) => void): void {
  const resumeReq = () => req.resume();
  req.on('data', (chunk: Buffer) => {
    if (!current()) return;
    onChunk?.(chunk.length);
    const ok = chunked ? conn.writeChunk(chunk) : conn.writeBody(chunk);
    if (!ok) { req.pause(); conn.onceDrain(resumeReq); }
  });
  req.once('end', () => {
    if (!current()) return;
    if (chunked) conn.writeBody('0\r\n\r\n');
    conn.endBody();
  });
}

/** Trailers as the parser gives them (flat [name, value, ...]) in the pairs node's addTrailers takes. */
export function trailerPairs(raw: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < raw.length; i += 2) out.push([raw[i], raw[i + 1]]);
  return out;
}

/**
 * Writes a chunk of the upstream's answer to the client; when the client's socket is full, stops
 * reading the upstream until it drains, unless the answer is `complete` by then (the connection
 * may already serve another exchange).
 */
export function relayResponseChunk(res: ServerResponse, chunk: Buffer, conn: UpstreamConnection | undefined, complete: () => boolean): void {
  if (res.write(chunk) || conn === undefined) return;
  conn.pause();
  res.once('drain', () => { if (!complete()) conn.resume(); });
}
