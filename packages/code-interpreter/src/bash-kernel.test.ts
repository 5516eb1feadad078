/**
 * The bash kernel's output for a client that reads slowly: its pipes are not read meanwhile, so
 * the shell's commands wait instead of the service holding what they print.
 */
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { test } from 'node:test';
import type { ExecutionOutput } from '@svc/contracts/code-interpreter';
import { BashKernel } from './bash-kernel.ts';

test('while the client is behind the shell\'s output is not read, and all of it comes after', async () => {
  const kernel = new BashKernel(tmpdir(), () => {});
  let behind = true;
  let wake: () => void = () => {};
  const caughtUp = new Promise<void>((resolve) => { wake = resolve; });
  let printed = 0;
  const emit = Object.assign((line: ExecutionOutput) => {
    if (line.type === 'stdout') printed += line.text.length;
    return !behind;
  }, { drained: () => (behind ? caughtUp : Promise.resolve()) });
  try {
    const running = kernel.execute("head -c 20000000 /dev/zero | tr '\\0' x", emit, new AbortController().signal);
    await new Promise((r) => setTimeout(r, 1_000));
    const whileBehind = printed;
    behind = false;
    wake();
    assert.equal(await running, 'completed');
    assert.ok(whileBehind < 1_000_000, `${whileBehind} bytes were read while the client was behind`);
    assert.equal(printed, 20_000_000);
  } finally {
    await kernel.shutdown();
  }
});
