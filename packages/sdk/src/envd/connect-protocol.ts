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

/** Cuts a byte stream into envelopes, whatever the chunk boundaries. */
export class EnvelopeReader {
  private buffer: Uint8Array = new Uint8Array(0);

  push(chunk: Uint8Array): Envelope[] {
    this.buffer = concat(this.buffer, chunk);
    const out: Envelope[] = [];
    while (this.buffer.length >= 5) {
      const length = new DataView(this.buffer.buffer, this.buffer.byteOffset, 5).getUint32(1, false);
      if (this.buffer.length < 5 + length) break;
      out.push({ flags: this.buffer[0], data: this.buffer.slice(5, 5 + length) });
      this.buffer = this.buffer.slice(5 + length);
    }
    return out;
  }

  /** Bytes left over that do not make a whole envelope. */
  get pending(): number {
    return this.buffer.length;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
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
