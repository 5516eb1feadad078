/**
 * Reading an answer's body with a bound. `res.text()` takes whatever comes: a sandbox (whose user
 * has sudo, so whose envd or code interpreter may be anything) answering an endless error body grew
 * the reader, in the gateway's /mcp tools the API process itself, until it fell over.
 */
import { SandboxError } from './errors.ts';

/** Bytes of an error answer kept for its message: its head, the rest is cancelled unread. */
export const MAX_ERROR_BODY_BYTES = 64 * 1024;

/**
 * An error answer's body as text: at most `maxBytes` of its head, with a note when it was cut.
 * The status makes the error; the body only explains it, so a body cut off in transit gives what
 * came before the cut instead of failing.
 */
export async function readErrorBody(res: Response, maxBytes = MAX_ERROR_BODY_BYTES): Promise<string> {
  let head: Head;
  try {
    head = await readHead(res.body, maxBytes);
  } catch {
    // Deliberately empty: the body was cut off in transit, and the status alone makes the error.
    return '';
  }
  const text = decode(head.bytes);
  return head.cut ? `${text}… [cut: the answer was longer than ${maxBytes} bytes]` : text;
}

/**
 * A whole (success) answer's body as text; past `maxBytes` the read stops, the rest is cancelled
 * and a SandboxError naming `what` is thrown. A failed read throws as fetch's does.
 */
export async function readBodyText(res: Response, maxBytes: number, what: string): Promise<string> {
  const head = await readHead(res.body, maxBytes);
  if (head.cut) throw new SandboxError(`${what}: the answer is larger than ${maxBytes} bytes; it was not read`, { status: res.status, code: 'too_large' });
  return decode(head.bytes);
}

interface Head {
  bytes: Uint8Array;
  /** More than maxBytes came: `bytes` holds the first maxBytes of them. */
  cut: boolean;
}

/** Up to maxBytes of the body; past that the body is cancelled. */
async function readHead(body: ReadableStream<Uint8Array> | null, maxBytes: number): Promise<Head> {
  if (!body) return { bytes: new Uint8Array(0), cut: false };
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  let cut = false;
  let done = false;
  try {
    while (!done) {
      const r = await reader.read();
      done = r.done;
      if (r.value) {
        chunks.push(r.value);
        total += r.value.length;
      }
      if (total > maxBytes) {
        cut = true;
        break;
      }
    }
  } finally {
    if (!done) {
      await reader.cancel().catch(() => { /* the body is abandoned; an error cancelling it changes nothing */ });
    }
    reader.releaseLock();
  }
  return { bytes: join(chunks, Math.min(total, maxBytes)), cut };
}

/** The chunks' first `length` bytes as one array, copied once. */
function join(chunks: Uint8Array[], length: number): Uint8Array {
  if (chunks.length === 1 && chunks[0].length === length) return chunks[0];
  const out = new Uint8Array(length);
  let at = 0;
  for (const c of chunks) {
    if (at >= length) break;
    const part = c.length <= length - at ? c : c.subarray(0, length - at);
    out.set(part, at);
    at += part.length;
  }
  return out;
}

function decode(bytes: Uint8Array): string {
  return new TextDecoder().decode(bytes);
}
