import { ConnectError } from './code.ts';

/** Envelope flags of the Connect streaming protocol. */
export const FLAG_COMPRESSED = 0x01;
export const FLAG_END_STREAM = 0x02;

export interface Envelope {
  flags: number;
  data: Buffer;
}

export function encodeEnvelope(flags: number, data: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + data.length);
  out[0] = flags;
  out.writeUInt32BE(data.length, 1);
  out.set(data, 5);
  return out;
}

/** Byte queue that hands out exact-length slices without re-concatenating on every chunk. */
class ByteQueue {
  private chunks: Buffer[] = [];
  length = 0;

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  take(n: number): Buffer {
    const first = this.chunks[0];
    if (first && first.length >= n) {
      const head = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      this.length -= n;
      return head;
    }
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      const chunk = this.chunks[0]!;
      const used = Math.min(chunk.length, n - filled);
      chunk.copy(out, filled, 0, used);
      filled += used;
      if (used === chunk.length) this.chunks.shift();
      else this.chunks[0] = chunk.subarray(used);
    }
    this.length -= n;
    return out;
  }

  peekHeader(): { flags: number; size: number } {
    const head = this.length >= 5 && this.chunks[0]!.length >= 5 ? this.chunks[0]! : this.copyHead();
    return { flags: head[0]!, size: head.readUInt32BE(1) };
  }

  private copyHead(): Buffer {
    const head = this.take(5);
    this.chunks.unshift(head);
    this.length += 5;
    return head;
  }
}

/**
 * Splits a request body into envelopes as bytes arrive, so that client-streamed messages are
 * handled one by one and a body is never held in memory beyond one message.
 */
export async function* readEnvelopes(body: AsyncIterable<Buffer>, maxMessageBytes: number): AsyncGenerator<Envelope> {
  const queue = new ByteQueue();
  for await (const chunk of body) {
    queue.push(chunk);
    while (queue.length >= 5) {
      const { flags, size } = queue.peekHeader();
      if (size > maxMessageBytes) {
        throw new ConnectError('resource_exhausted', `message size ${size} is larger than the limit of ${maxMessageBytes} bytes`);
      }
      if (queue.length < 5 + size) break;
      queue.take(5);
      yield { flags, data: queue.take(size) };
    }
  }
  if (queue.length > 0) throw new ConnectError('invalid_argument', 'protocol error: incomplete envelope at the end of the request body');
}
