/** Reads a streamed body as lines of text (NDJSON), each as soon as its newline arrives. */

import { SandboxError } from './errors.ts';

/** The longest line taken by default (a result may carry a large image, base64): past it the read fails. */
export const MAX_LINE_CHARS = 64 * 1024 * 1024;

/**
 * Yields every line without its newline, the last one even without a newline; empty lines are
 * skipped. A character split across chunks is decoded whole. Leaving the loop early cancels the body.
 * A line past `maxLineChars` is an error: an answer that never ends its line grew one string until
 * the process fell over (in the gateway's /mcp tools, the whole platform), and each chunk is
 * searched for the newline from where the last search stopped, not from the line's start again.
 */
export async function* readLines(body: ReadableStream<Uint8Array>, maxLineChars = MAX_LINE_CHARS): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  let searched = 0;
  let done = false;
  try {
    while (!done) {
      const chunk = await reader.read();
      done = chunk.done;
      buffered += done ? decoder.decode() : decoder.decode(chunk.value, { stream: true });
      let newline: number;
      while ((newline = buffered.indexOf('\n', searched)) !== -1) {
        const line = buffered.slice(0, newline).replace(/\r$/, '');
        buffered = buffered.slice(newline + 1);
        searched = 0;
        if (line) yield line;
      }
      searched = buffered.length;
      if (buffered.length > maxLineChars) {
        throw new SandboxError(`a line of the answer passed ${maxLineChars} characters: the read was stopped`, { code: 'too_large' });
      }
    }
    if (buffered) yield buffered;
  } finally {
    if (!done) {
      await reader.cancel().catch(() => { /* the body is abandoned; an error cancelling it changes nothing */ });
    }
    reader.releaseLock();
  }
}
