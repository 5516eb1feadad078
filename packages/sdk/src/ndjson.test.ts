import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readLines } from './ndjson.ts';
import { SandboxError } from './errors.ts';

const streamOf = (chunks: string[]) => new ReadableStream<Uint8Array>({
  start(c) { for (const s of chunks) c.enqueue(new TextEncoder().encode(s)); c.close(); },
});

test('lines split across chunks, the last without a newline, empty ones skipped', async () => {
  const out: string[] = [];
  for await (const l of readLines(streamOf(['{"a":', '1}\r\n\n{"b"', ':2}\n{"c":3}']))) out.push(l);
  assert.deepEqual(out, ['{"a":1}', '{"b":2}', '{"c":3}']);
});

test('a line past the limit stops the read with a SandboxError: an answer that never ends its line no longer grows without end', async () => {
  const chunks = Array.from({ length: 64 }, () => 'x'.repeat(1024));
  const read = async () => { for await (const l of readLines(streamOf(['{"ok":1}\n', ...chunks]), 16 * 1024)) void l; };
  await assert.rejects(read(), (e: unknown) => e instanceof SandboxError && /passed 16384 characters/.test((e as Error).message));
});
