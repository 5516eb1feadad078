/**
 * One execution's answer against a stand-in kernel: how the kernel learns that its client fell
 * behind and caught up (or left), and how a kernel lost for a known reason ends the answer.
 */
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { after, before, test } from 'node:test';
import type { ExecutionLine } from '@svc/contracts/code-interpreter';
import type { Context } from './contexts.ts';
import { streamExecution } from './execute.ts';
import type { ExecutionEnd, Kernel, OutputSink } from './kernel.ts';
import { Lock } from './lock.ts';
import { SandboxEnv } from './sandbox-env.ts';

type Run = (emit: OutputSink, signal: AbortSignal) => Promise<ExecutionEnd>;
let current: Run;
let server: Server;
let port: number;

function context(): Context {
  const kernel: Kernel = {
    language: 'python',
    cwd: '/',
    start: async () => {},
    execute: (_code, emit, signal) => current(emit, signal),
    setEnv: async () => {},
    interrupt: async () => {},
    restart: async () => {},
    shutdown: async () => {},
  };
  return { id: 'c', language: 'python', cwd: '/', kernel, lock: new Lock(), sandboxEnvApplied: true, madeBy: 'holder', isDefault: false };
}

before(async () => {
  const ctx = context();
  // envd is not there: the process environment stands in, as the service does without it.
  const sandboxEnv = new SandboxEnv(() => {}, 'http://127.0.0.1:9/envs');
  server = createServer((_req, res) => void streamExecution(ctx, { code: '' }, undefined, res, { sandboxEnv, log: () => {}, keepaliveMs: 60_000 }));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as { port: number }).port;
});

after(() => new Promise<void>((r) => server.close(() => r())));

/** Starts a request whose answer is not read until the test reads it. */
function post(): Promise<{ res: IncomingMessage; abort: () => void }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/execute' }, (res) => resolve({ res, abort: () => req.destroy() }));
    req.on('error', (err) => { if ((err as NodeJS.ErrnoException).code !== 'ECONNRESET') reject(err); });
    req.end('{}');
  });
}

async function readLines(res: IncomingMessage): Promise<ExecutionLine[]> {
  let text = '';
  for await (const chunk of res) text += String(chunk);
  return text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as ExecutionLine);
}

const CHUNK = 'x'.repeat(256 * 1024);
const TOTAL = 400; // 100 MiB

/** A kernel that prints TOTAL chunks, waiting whenever its client is behind. */
function printMany(seen: { lines: number; waits: number }): Run {
  return async (emit) => {
    while (seen.lines < TOTAL) {
      seen.lines += 1;
      if (!emit({ type: 'stdout', text: CHUNK, timestamp: '' })) {
        seen.waits += 1;
        await emit.drained();
      }
    }
    return 'completed';
  };
}

/** How many chunks the kernel printed once it has stopped printing (the same count 300 ms apart). */
async function whenWaiting(seen: { lines: number }): Promise<number> {
  for (;;) {
    const before = seen.lines;
    await new Promise((r) => setTimeout(r, 300));
    if (seen.lines === before) return before;
  }
}

test('a client that stops reading holds the kernel back after a few MiB; all of it comes once it reads', async () => {
  const seen = { lines: 0, waits: 0 };
  current = printMany(seen);
  const { res } = await post();
  const printed = await whenWaiting(seen);
  // Past BEHIND_BYTES, what the sockets' buffers take on loopback: far from the 100 MiB printed.
  assert.ok(printed < 100, `the kernel printed ${printed} chunks of 256 KiB to a client that read nothing`);
  const lines = await readLines(res);
  assert.equal(lines.filter((l) => l.type === 'stdout').length, TOTAL);
  assert.deepEqual(lines.at(-1), { type: 'end_of_execution' });
  assert.ok(seen.waits > 0);
});

test('a client that goes away while behind releases the kernel too', async () => {
  const seen = { lines: 0, waits: 0 };
  let interrupted = false;
  current = async (emit, signal) => {
    signal.addEventListener('abort', () => { interrupted = true; });
    return printMany(seen)(emit, signal);
  };
  const { abort } = await post();
  assert.ok((await whenWaiting(seen)) < TOTAL);
  abort();
  const deadline = Date.now() + 5_000;
  while (seen.lines < TOTAL && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.equal(seen.lines, TOTAL, 'the kernel went on once the client was gone');
  assert.ok(interrupted);
});

test('a kernel lost for a known reason ends the answer with that reason', async () => {
  current = async () => ({ died: 'the kernel sent a message of more than 10 bytes' });
  const { res } = await post();
  const lines = await readLines(res);
  const error = lines.find((l) => l.type === 'error');
  assert.ok(error && error.type === 'error');
  assert.equal(error.name, 'UnexpectedEndOfExecution');
  assert.match(error.value, /before the execution finished: the kernel sent a message of more than 10 bytes; the next execution/);
  assert.deepEqual(lines.slice(-2), [{ type: 'unexpected_end_of_execution' }, { type: 'end_of_execution' }]);
});
