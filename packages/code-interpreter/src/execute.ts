/**
 * One `POST /execute` answer: NDJSON lines as the kernel produces them, a keepalive line while
 * nothing else comes (also while a default context starts or the context's lock is taken), and
 * `end_of_execution` last.
 * A client that goes away interrupts the kernel, so the next execution is not blocked. A client
 * that reads slowly holds its kernel's output back (OutputSink), so the answer's backlog stays
 * about BEHIND_BYTES however much the code prints.
 */
import type { ServerResponse } from 'node:http';
import type { ExecutionLine, ExecutionOutput } from '@svc/contracts/code-interpreter';
import type { Context } from './contexts.ts';
import type { EnvChanges, ExecutionEnd, Log, OutputSink } from './kernel.ts';
import type { SandboxEnv } from './sandbox-env.ts';

/** Unsent output past which the client is behind and the kernel's output is held back. */
const BEHIND_BYTES = 1024 * 1024;

export interface ExecutionDeps {
  sandboxEnv: SandboxEnv;
  log: Log;
  keepaliveMs: number;
}

export async function streamExecution(
  target: Context | Promise<Context>,
  request: { code: string; env_vars?: Record<string, string> | null },
  accessToken: string | undefined,
  res: ServerResponse,
  deps: ExecutionDeps,
): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-store' });
  res.flushHeaders();
  const gone = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  let lastWrite = Date.now();
  const write = (line: ExecutionLine) => {
    if (res.writableEnded || res.destroyed) return;
    res.write(`${JSON.stringify(line)}\n`);
    lastWrite = Date.now();
  };
  const keepalive = setInterval(() => {
    if (Date.now() - lastWrite >= deps.keepaliveMs / 2) write({ type: 'keepalive' });
  }, deps.keepaliveMs);
  const output = outputSink(res, write);

  // A default context may still be starting: the answer has begun (headers, keepalives) meanwhile,
  // so a client sees a live request, as E2B's server answers once it serves at all.
  let context: Context;
  try {
    context = await target;
  } catch (err) {
    deps.log('error', `execution failed: ${(err as Error).message}`);
    write({ type: 'error', name: 'KernelError', value: (err as Error).message, traceback: '' });
    clearInterval(keepalive);
    write({ type: 'end_of_execution' });
    res.end();
    return;
  }
  const release = await context.lock.acquire(gone.signal);
  if (!release) {
    clearInterval(keepalive);
    return; // the client left while waiting its turn
  }
  const { kernel } = context;
  let restore: EnvChanges | undefined;
  try {
    const sandbox = await deps.sandboxEnv.get(accessToken);
    if (sandbox.fromEnvd && !context.sandboxEnvApplied) {
      await kernel.setEnv(sandbox.vars);
      context.sandboxEnvApplied = true;
    }
    if (request.env_vars) {
      restore = Object.fromEntries(Object.keys(request.env_vars).map((k) => [k, sandbox.vars[k] ?? null]));
      await kernel.setEnv(request.env_vars);
    }
    let end: ExecutionEnd;
    try {
      end = await kernel.execute(request.code, output, gone.signal);
    } catch (err) {
      // The kernel could not (re)start: the context stays, a later execution tries again.
      deps.log('error', `execution failed: ${(err as Error).message}`, { context: context.id });
      write({ type: 'error', name: 'KernelError', value: (err as Error).message, traceback: '' });
      end = 'completed';
    }
    if (end === 'died' || typeof end === 'object') {
      const why = typeof end === 'object' ? `: ${end.died}` : '';
      write({ type: 'error', name: 'UnexpectedEndOfExecution', value: `The kernel ended before the execution finished${why}; the next execution starts a new one`, traceback: '' });
      write({ type: 'unexpected_end_of_execution' });
    }
    if (end === 'interrupted') deps.log('info', 'execution interrupted: the client went away', { context: context.id });
  } catch (err) {
    deps.log('error', `execution failed: ${(err as Error).message}`, { context: context.id });
    write({ type: 'error', name: 'ExecutionError', value: (err as Error).message, traceback: '' });
  } finally {
    clearInterval(keepalive);
    write({ type: 'end_of_execution' });
    res.end();
  }
  // The execution's own variables are put back before the next execution may start.
  try {
    if (restore) await kernel.setEnv(restore);
  } catch (err) {
    deps.log('warn', `restoring the environment after an execution failed: ${(err as Error).message}`, { context: context.id });
  } finally {
    release();
  }
}

/**
 * The kernel's side of the answer: a line is written at once, and the call says whether the
 * client keeps up. One wait for 'drain' is shared by every caller, so holding back adds no
 * listeners per line.
 */
function outputSink(res: ServerResponse, write: (line: ExecutionLine) => void): OutputSink {
  let draining: Promise<void> | undefined;
  const gone = () => res.destroyed || res.writableEnded;
  const behind = () => !gone() && res.writableLength > BEHIND_BYTES;
  const drained = (): Promise<void> => {
    if (!behind()) return Promise.resolve();
    draining ??= new Promise<void>((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        draining = undefined;
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
    return draining;
  };
  return Object.assign((line: ExecutionOutput) => {
    write(line);
    return !behind();
  }, { drained });
}
