import type { Socket } from 'node:net';

/**
 * How long a socket has been quiet when its idle limit (`armed`) fires: `armed`, unless no byte
 * moved since the last time it fired (the limit was armed again for the rest of a longer one),
 * when the quiet goes on from there. One timer serves two limits this way (a short one between
 * requests or in a pool, a longer one during an exchange) without a new timer per request.
 */
export function quietFor(socket: Socket, armed: number, last: { ms: number; moved: number }): number {
  const moved = socket.bytesRead + socket.bytesWritten;
  last.ms = moved === last.moved ? last.ms + armed : armed;
  last.moved = moved;
  return last.ms;
}
