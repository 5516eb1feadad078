/**
 * The Connect protocol's wire format with the JSON codec
 * (https://connectrpc.com/docs/protocol): unary calls are plain `application/json`
 * POSTs; streams are `application/connect+json` bodies made of envelopes
 * (1 flag byte, 4-byte big-endian length, payload), the last one flagged end-of-stream.
 */
import { ConnectError, type ConnectCode } from '../errors.ts';

export const PROTOCOL_VERSION_HEADER = 'Connect-Protocol-Version';
export const TIMEOUT_HEADER = 'Connect-Timeout-Ms';
export const UNARY_CONTENT_TYPE = 'application/json';
export const STREAM_CONTENT_TYPE = 'application/connect+json';

const FLAG_COMPRESSED = 0b01;
const FLAG_END_STREAM = 0b10;

const CONNECT_CODES = new Set<ConnectCode>([
  'canceled', 'unknown', 'invalid_argument', 'deadline_exceeded', 'not_found', 'already_exists',
  'permission_denied', 'resource_exhausted', 'failed_precondition', 'aborted', 'out_of_range',
  'unimplemented', 'internal', 'unavailable', 'data_loss', 'unauthenticated',
]);

export function encodeEnvelope(message: unknown, flags = 0): Uint8Array {
  const payload = new TextEncoder().encode(JSON.stringify(message));
  const out = new Uint8Array(5 + payload.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, payload.length, false);
  out.set(payload, 5);
  return out;
}

export interface Envelope {
  flags: number;
  data: Uint8Array;
}

/**
 * The largest message taken, envd's own limit on the messages it receives (envd's server.ts,
 * `maxMessageBytes`). A larger announced length is refused before anything of it is buffered:
 * a sandbox (whose user has sudo, so whose envd may be anything) announcing 4 GiB grew the
 * reader, in the gateway's /mcp tools the API process, until it fell over.
 */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/** The least room the buffer is given when it grows, and what it may keep between envelopes. */
const MIN_ROOM = 64 * 1024;

/**
 * Cuts a byte stream into envelopes, whatever the chunk boundaries. Bytes wait in one buffer that
 * doubles when full, so each byte is copied a bounded number of times: joining every chunk to all
 * that was buffered copied a large envelope once per chunk, quadratic in its size. (A list of the
 * chunks as they came would copy less, but costs an object per chunk: a sender trickling one byte
 * per packet made that a hundredfold of the bytes.)
 */
export class EnvelopeReader {
  private buf = new Uint8Array(0);
  private start = 0;
  private end = 0;

  constructor(private readonly maxMessageBytes = MAX_MESSAGE_BYTES) {}

  /** The envelopes `chunk` completes; an announced length past the limit throws a ConnectError. */
  push(chunk: Uint8Array): Envelope[] {
    this.append(chunk);
    const out: Envelope[] = [];
    while (this.end - this.start >= 5) {
      const b = this.buf;
      const s = this.start;
      const length = b[s + 1] * 2 ** 24 + (b[s + 2] << 16) + (b[s + 3] << 8) + b[s + 4];
      if (length > this.maxMessageBytes) {
        throw new ConnectError('internal', `envd announced a message of ${length} bytes, more than the limit of ${this.maxMessageBytes}: the stream was stopped`);
      }
      if (this.end - s < 5 + length) break;
      out.push({ flags: b[s], data: b.slice(s + 5, s + 5 + length) });
      this.start = s + 5 + length;
    }
    if (this.start === this.end) {
      this.start = this.end = 0;
      // a large envelope's room is not kept for the rest of a long stream
      if (this.buf.length > MIN_ROOM) this.buf = new Uint8Array(0);
    }
    return out;
  }

  /** Bytes left over that do not make a whole envelope. */
  get pending(): number {
    return this.end - this.start;
  }

  private append(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    if (this.buf.length - this.end < chunk.length) {
      const pending = this.end - this.start;
      const needed = pending + chunk.length;
      const grown = new Uint8Array(Math.max(needed, 2 * pending, MIN_ROOM));
      grown.set(this.buf.subarray(this.start, this.end), 0);
      this.buf = grown;
      this.start = 0;
      this.end = pending;
    }
    this.buf.set(chunk, this.end);
    this.end += chunk.length;
  }
}

export type StreamItem<T> = { kind: 'message'; message: T } | { kind: 'end'; error?: ConnectError };

/** Interprets one envelope of a server stream. */
export function decodeStreamEnvelope<T>(env: Envelope): StreamItem<T> {
  if (env.flags & FLAG_COMPRESSED) throw new ConnectError('internal', 'received a compressed message, which was not requested');
  const json = parseJson(env.data);
  if (env.flags & FLAG_END_STREAM) {
    const end = json as { error?: unknown } | undefined;
    if (!end?.error) return { kind: 'end' };
    return { kind: 'end', error: connectErrorFromJson(end.error) ?? new ConnectError('unknown', JSON.stringify(end.error)) };
  }
  return { kind: 'message', message: json as T };
}

function parseJson(data: Uint8Array): unknown {
  const text = new TextDecoder().decode(data);
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new ConnectError('internal', 'received a message that is not valid JSON');
  }
}

/** A Connect error body `{code, message}`, or undefined when the body is something else. */
export function connectErrorFromJson(body: unknown, status?: number): ConnectError | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const { code, message } = body as { code?: unknown; message?: unknown };
  if (typeof code !== 'string' || !CONNECT_CODES.has(code as ConnectCode)) return undefined;
  return new ConnectError(code as ConnectCode, typeof message === 'string' ? message : code, status);
}
