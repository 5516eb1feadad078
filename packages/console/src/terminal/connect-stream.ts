/**
 * The Connect protocol (https://connectrpc.com/docs/protocol) with the JSON codec, as far as the
 * terminal needs it, for the browser: unary calls are `application/json` POSTs; a server stream's
 * body is a run of envelopes (1 flag byte, 4-byte big-endian length, JSON), the last one flagged
 * end-of-stream and carrying the error if any. The SDK's packages/sdk/src/envd/ is the reference;
 * this copy uses no Node API (no Buffer), so that it runs in a page.
 */

const FLAG_COMPRESSED = 0b01;
const FLAG_END_STREAM = 0b10;

/** An error answered by the server ({code, message}) or made up for a transport failure. */
export class ConnectError extends Error {
  constructor(readonly code: string, message: string, readonly status?: number) {
    super(message);
  }
}

export function encodeEnvelope(message: unknown, flags = 0): Uint8Array<ArrayBuffer> {
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
    if (this.buffer.length === 0) this.buffer = chunk;
    else {
      const joined = new Uint8Array(this.buffer.length + chunk.length);
      joined.set(this.buffer, 0);
      joined.set(chunk, this.buffer.length);
      this.buffer = joined;
    }
    const out: Envelope[] = [];
    let at = 0;
    while (this.buffer.length - at >= 5) {
      const length = new DataView(this.buffer.buffer, this.buffer.byteOffset + at, 5).getUint32(1, false);
      if (this.buffer.length - at < 5 + length) break;
      out.push({ flags: this.buffer[at], data: this.buffer.slice(at + 5, at + 5 + length) });
      at += 5 + length;
    }
    this.buffer = this.buffer.slice(at);
    return out;
  }

  /** Bytes received that do not make a whole envelope yet. */
  get pending(): number {
    return this.buffer.length;
  }
}

export type StreamItem = { kind: 'message'; message: unknown } | { kind: 'end'; error?: ConnectError };

/** Interprets one envelope of a server stream. */
export function decodeStreamEnvelope(env: Envelope): StreamItem {
  if (env.flags & FLAG_COMPRESSED) throw new ConnectError('internal', 'the server sent a compressed message, which was not asked for');
  const text = new TextDecoder().decode(env.data);
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    throw new ConnectError('internal', 'the server sent a message that is not valid JSON');
  }
  if (env.flags & FLAG_END_STREAM) {
    const error = (json as { error?: unknown } | undefined)?.error;
    if (!error) return { kind: 'end' };
    return { kind: 'end', error: errorFromJson(error) ?? new ConnectError('unknown', JSON.stringify(error)) };
  }
  return { kind: 'message', message: json };
}

/** A Connect error body `{code, message}`; undefined when the body is something else. */
function errorFromJson(body: unknown, status?: number): ConnectError | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const { code, message } = body as { code?: unknown; message?: unknown };
  if (typeof code !== 'string') return undefined;
  return new ConnectError(code, typeof message === 'string' && message ? message : code, status);
}

/** The error of a non-2xx answer: envd's Connect error, else the data plane's `{code, message}` or text. */
export function errorFromResponse(status: number, text: string): ConnectError {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON: the text itself is the message.
    body = undefined;
  }
  const connect = errorFromJson(body, status);
  if (connect) return connect;
  const message = (body as { message?: unknown } | undefined)?.message;
  return new ConnectError('http', `HTTP ${status}${typeof message === 'string' ? `: ${message}` : text ? `: ${text.slice(0, 200)}` : ''}`, status);
}

// ------------------------------------------------------------------ base64 (proto3 JSON bytes)

export function bytesToBase64(bytes: Uint8Array): string {
  let binary = '';
  // In slices: String.fromCharCode takes its bytes as arguments, and argument lists are bounded.
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

export function base64ToBytes(b64: string): Uint8Array {
  const binary = atob(b64);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

// ------------------------------------------------------------------ calls over fetch

export interface CallOpts {
  headers: Record<string, string>;
  signal?: AbortSignal;
}

/** A unary call; resolves with the answer's JSON. */
export async function unaryCall<T>(url: string, message: unknown, opts: CallOpts): Promise<T> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { ...opts.headers, 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1' },
    body: JSON.stringify(message ?? {}),
    signal: opts.signal,
  });
  const text = await res.text();
  if (!res.ok) throw errorFromResponse(res.status, text);
  return (text ? JSON.parse(text) : {}) as T;
}

/**
 * A server-streaming call: `onMessage` gets each message as it arrives. Resolves when the server
 * ended the stream (with its error, if any); rejects when the call failed or the connection broke.
 */
export async function serverStream(url: string, message: unknown, opts: CallOpts & { onMessage: (m: unknown) => void }): Promise<{ error?: ConnectError }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { ...opts.headers, 'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1' },
    body: encodeEnvelope(message),
    signal: opts.signal,
  });
  if (!res.ok || !res.body) throw errorFromResponse(res.status, await res.text());
  const reader = res.body.getReader();
  const envelopes = new EnvelopeReader();
  try {
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) throw new ConnectError('unavailable', 'the connection closed before the stream ended');
      for (const env of envelopes.push(chunk.value)) {
        const item = decodeStreamEnvelope(env);
        if (item.kind === 'end') return { error: item.error };
        opts.onMessage(item.message);
      }
    }
  } finally {
    reader.cancel().catch(() => {
      // The body is done with either way (ended, failed or aborted): nothing is left to read.
    });
  }
}
