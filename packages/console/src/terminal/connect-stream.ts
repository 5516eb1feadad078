/**
 * The Connect protocol (https://connectrpc.com/docs/protocol) with the JSON codec, as far as the
 * terminal needs it, for the browser: unary calls are `application/json` POSTs; a server stream's
 * body is a run of envelopes (1 flag byte, 4-byte big-endian length, JSON), the last one flagged
 * end-of-stream and carrying the error if any. The framing is the SDK's (it uses no Node API);
 * the calls here run over the page's fetch, with errors shaped for the terminal.
 */
import { EnvelopeReader, encodeEnvelope, type Envelope } from '@svc/sdk/envd/connect-protocol';

export { EnvelopeReader, encodeEnvelope };

const FLAG_COMPRESSED = 0b01;
const FLAG_END_STREAM = 0b10;

/** An error answered by the server ({code, message}) or made up for a transport failure. */
export class ConnectError extends Error {
  constructor(readonly code: string, message: string, readonly status?: number) {
    super(message);
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
    body: encodeEnvelope(message) as Uint8Array<ArrayBuffer>,
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
