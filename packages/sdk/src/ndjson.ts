/** Reads a streamed body as lines of text (NDJSON), each as soon as its newline arrives. */

/**
 * Yields every line without its newline, the last one even without a newline; empty lines are
 * skipped. A character split across chunks is decoded whole. Leaving the loop early cancels the body.
 */
export async function* readLines(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  let done = false;
  try {
    while (!done) {
      const chunk = await reader.read();
      done = chunk.done;
      buffered += done ? decoder.decode() : decoder.decode(chunk.value, { stream: true });
      let newline: number;
      while ((newline = buffered.indexOf('\n')) !== -1) {
        const line = buffered.slice(0, newline).replace(/\r$/, '');
        buffered = buffered.slice(newline + 1);
        if (line) yield line;
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
