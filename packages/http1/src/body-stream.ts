import { chunkedTail } from './request-head.ts';
import type { ServerReply } from './server-reply.ts';
import type { ServerRequest } from './server-request.ts';
import type { UpstreamConnection } from './upstream-pool.ts';

/**
 * Streams a client's request body to the upstream connection as it comes, with backpressure:
 * raw after a Content-Length, framed as chunked again when it came chunked (the parser decoded
 * it; its trailers follow the last chunk). `current` says whether the exchange still uses `conn`
 * (a retry or a failure moved on, and then nothing more goes to it); `onChunk` sees each chunk's
 * size before it is written. A client that left mid-body ends nothing: the
 * upstream connection is destroyed, so a truncated body is never taken for a whole one.
 */
export function streamServerBody(req: ServerRequest, conn: UpstreamConnection, chunked: boolean, current: () => boolean, onChunk?: (bytes: number) => void): void {
  const resumeReq = () => req.resume();
  req.read((chunk) => {
    if (!current()) return;
    onChunk?.(chunk.length);
    const ok = chunked ? conn.writeChunk(chunk) : conn.writeBody(chunk);
    if (!ok) { req.pause(); conn.onceDrain(resumeReq); }
  }, () => {
    if (!current()) return;
    if (req.aborted) { conn.destroy(); return; }
    if (chunked) conn.writeBody(chunkedTail(req.trailers));
    conn.endBody();
  });
}

/**
 * Writes a chunk of the upstream's answer to the client; when the client's socket is full, stops
 * reading the upstream until it drains, unless the answer is `complete` by then (the connection
 * may already serve another exchange).
 */
export function relayReplyChunk(reply: ServerReply, chunk: Buffer, conn: UpstreamConnection | undefined, complete: () => boolean): void {
  if (reply.write(chunk) || conn === undefined) return;
  conn.pause();
  reply.onceDrain(() => { if (!complete()) conn.resume(); });
}
