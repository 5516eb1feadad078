/**
 * The code interpreter inside a sandbox (port 49999, E2B's): `runCode` and the code contexts,
 * reached through the data plane as envd is (sandbox-port.ts). `POST /execute` answers NDJSON;
 * each line is applied, and its callback called, as it arrives.
 */
import {
  CODE_INTERPRETER_PORT, type CodeContext, type CreateContextRequest, type ExecuteRequest, type ExecutionLine,
} from '@svc/contracts/code-interpreter';
import { transportError } from './api-client.ts';
import { readBodyText, readErrorBody } from './bounded-body.ts';
import { InvalidArgumentError, SandboxError, TimeoutError, errorFromHttp } from './errors.ts';
import { Execution, applyLine, type ExecutionCallbacks, type ExecutionKeeping } from './execution.ts';
import { MAX_LINE_CHARS, readLines } from './ndjson.ts';
import { sandboxPortHeaders, sandboxPortUrl, type SandboxTarget } from './sandbox-port.ts';
import type { RequestOpts } from './types.ts';

/** How long a run may take unless `timeoutMs` says otherwise, as in the e2b SDK. */
export const DEFAULT_RUN_CODE_TIMEOUT_MS = 60_000;
/**
 * The largest answer of the contexts' routes (a context, a list of them): read with a bound, as a
 * sandbox's answers are (bounded-body.ts).
 */
const MAX_JSON_ANSWER_BYTES = 4 * 1024 * 1024;

export interface RunCodeOpts extends ExecutionCallbacks, ExecutionKeeping, RequestOpts {
  /** python (default), javascript, typescript or bash (js and ts too); not with `context`. */
  language?: string;
  /** The context (or its id) to run in; not with `language`. */
  context?: CodeContext | string;
  /** Environment variables for this run only. */
  envs?: Record<string, string>;
  /**
   * Deadline of the whole run in ms; past it the request is cut, which makes the code interpreter
   * interrupt the code, and the run rejects with a TimeoutError. 0 (or less): none. Default 60 000.
   */
  timeoutMs?: number;
  /**
   * svc's own (the e2b SDK has none): the longest line of the answer taken, in characters; each
   * line (an output chunk, a result with its images) is buffered whole and parsed before any
   * callback sees it. A longer one ends the run with a SandboxError of code 'too_large'.
   * Default 64 Mi characters.
   */
  maxLineChars?: number;
}

export interface CreateCodeContextOpts extends RequestOpts {
  /** Default python. */
  language?: string;
  /** An existing directory; default /home/user. */
  cwd?: string;
}

export class CodeInterpreter {
  constructor(private readonly target: SandboxTarget) {}

  async runCode(code: string, opts: RunCodeOpts = {}): Promise<Execution> {
    if (opts.language !== undefined && opts.context !== undefined) {
      throw new InvalidArgumentError('runCode takes a language or a context, not both (a context has its language)');
    }
    const maxLineChars = opts.maxLineChars ?? MAX_LINE_CHARS;
    if (!Number.isSafeInteger(maxLineChars) || maxLineChars < 1) {
      throw new InvalidArgumentError(`maxLineChars must be a positive whole number of characters, not ${opts.maxLineChars}`);
    }
    const request: ExecuteRequest = { code, context_id: opts.context === undefined ? undefined : contextId(opts.context), language: opts.language, env_vars: opts.envs };
    const clocks = new RunClocks(opts.timeoutMs ?? DEFAULT_RUN_CODE_TIMEOUT_MS, opts.requestTimeoutMs ?? this.target.requestTimeoutMs, opts.signal);
    const url = sandboxPortUrl(this.target, '/execute');
    try {
      let res: Response;
      try {
        // A redirect is the sandbox's answer, not followed: in the gateway's /mcp tools it sent the
        // gateway's host anywhere (metadata, loopback), and the answer came back in the error.
        res = await fetch(url, { method: 'POST', headers: this.headers(), body: JSON.stringify(request), signal: clocks.signal, redirect: 'manual' });
      } catch (err) {
        throw clocks.interrupted(err, `POST ${url}`);
      }
      clocks.answered();
      if (!res.ok) throw await httpError(res, 'POST /execute');
      if (!res.body) throw new SandboxError('POST /execute: the answer has no body', { status: res.status });
      const execution = new Execution();
      const lines = readLines(res.body, maxLineChars);
      try {
        for (;;) {
          let next: IteratorResult<string>;
          try {
            next = await lines.next();
          } catch (err) {
            throw clocks.interrupted(err, `POST ${url}`);
          }
          if (next.done) break;
          // a callback that throws ends the run with its error (the request is cut below)
          if (await applyLine(execution, parseLine(next.value), opts)) return execution;
        }
      } finally {
        await lines.return(undefined);
      }
      throw new SandboxError('POST /execute: the connection closed before the execution ended (was the sandbox paused or killed?)', { code: 'unavailable' });
    } finally {
      clocks.stop();
    }
  }

  async createContext(opts: CreateCodeContextOpts = {}): Promise<CodeContext> {
    const body: CreateContextRequest = { language: opts.language, cwd: opts.cwd };
    return (await this.request('POST', '/contexts', opts, body)) as CodeContext;
  }

  async listContexts(opts: RequestOpts = {}): Promise<CodeContext[]> {
    return ((await this.request('GET', '/contexts', opts)) ?? []) as CodeContext[];
  }

  async removeContext(context: CodeContext | string, opts: RequestOpts = {}): Promise<void> {
    await this.request('DELETE', `/contexts/${encodeURIComponent(contextId(context))}`, opts);
  }

  /** Starts the context's kernel again: its variables are gone, its id, language and cwd stay. */
  async restartContext(context: CodeContext | string, opts: RequestOpts = {}): Promise<void> {
    await this.request('POST', `/contexts/${encodeURIComponent(contextId(context))}/restart`, opts);
  }

  private headers(): Record<string, string> {
    return sandboxPortHeaders(this.target, CODE_INTERPRETER_PORT, { 'Content-Type': 'application/json' });
  }

  /** One JSON request; the parsed answer, undefined when it has no body. */
  private async request(method: string, path: string, opts: RequestOpts, body?: unknown): Promise<unknown> {
    const url = sandboxPortUrl(this.target, path);
    const ms = opts.requestTimeoutMs ?? this.target.requestTimeoutMs;
    const signals = [ms > 0 ? AbortSignal.timeout(ms) : undefined, opts.signal].filter((s): s is AbortSignal => !!s);
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, {
        method,
        headers: this.headers(),
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: signals.length ? AbortSignal.any(signals) : undefined,
        redirect: 'manual', // the sandbox's answer, never followed (above)
      });
      if (!res.ok) throw await httpError(res, `${method} ${path}`);
      text = await readBodyText(res, MAX_JSON_ANSWER_BYTES, `${method} ${path}`);
    } catch (err) {
      if (err instanceof SandboxError) throw err;
      throw transportError(err, `${method} ${url}`);
    }
    if (!text) return undefined;
    try {
      return JSON.parse(text);
    } catch {
      throw new SandboxError(`${method} ${path}: the code interpreter answered with invalid JSON`, { status: res.status });
    }
  }
}

/**
 * The three clocks of a run: the request deadline until the answer's headers come, the run's
 * deadline and the caller's signal. Whichever fires first cuts the request and names the error.
 */
class RunClocks {
  readonly signal: AbortSignal;
  private readonly controller = new AbortController();
  private reason?: 'request' | 'run' | 'caller';
  private requestTimer?: ReturnType<typeof setTimeout>;
  private runTimer?: ReturnType<typeof setTimeout>;
  private readonly onCallerAbort = () => this.fire('caller');

  constructor(
    private readonly runTimeoutMs: number,
    private readonly requestTimeoutMs: number,
    private readonly callerSignal?: AbortSignal,
  ) {
    this.signal = this.controller.signal;
    if (runTimeoutMs > 0) this.runTimer = setTimeout(() => this.fire('run'), runTimeoutMs);
    if (requestTimeoutMs > 0) this.requestTimer = setTimeout(() => this.fire('request'), requestTimeoutMs);
    if (callerSignal?.aborted) this.fire('caller');
    else callerSignal?.addEventListener('abort', this.onCallerAbort, { once: true });
  }

  /** The answer's headers came: only the run's deadline and the caller remain. */
  answered(): void {
    clearTimeout(this.requestTimer);
  }

  /** The run is over, however it ended; an unfinished request is cut. */
  stop(): void {
    clearTimeout(this.requestTimer);
    clearTimeout(this.runTimer);
    this.callerSignal?.removeEventListener('abort', this.onCallerAbort);
    this.controller.abort();
  }

  /** The error for a failed fetch or read: the clock that cut it, else the failure itself. */
  interrupted(err: unknown, what: string): Error {
    switch (this.reason) {
      case 'run':
        return new TimeoutError(`${what}: the execution ran longer than ${this.runTimeoutMs} ms ('timeoutMs'); it was interrupted`, { code: 'deadline_exceeded' });
      case 'request':
        return new TimeoutError(`${what}: no answer within ${this.requestTimeoutMs} ms ('requestTimeoutMs')`, { code: 'timeout' });
      case 'caller':
        return new SandboxError(`${what}: aborted`, { code: 'aborted' });
      default:
        // the SDK's own refusals (a line past maxLineChars) are not a failed connection
        return err instanceof SandboxError ? err : transportError(err, what);
    }
  }

  private fire(reason: 'request' | 'run' | 'caller'): void {
    if (this.reason) return;
    this.reason = reason;
    this.controller.abort();
  }
}

function contextId(context: CodeContext | string): string {
  const id = typeof context === 'string' ? context : context?.id;
  if (!id) throw new InvalidArgumentError('a code context or its id is needed');
  return id;
}

function parseLine(text: string): ExecutionLine {
  let line: unknown;
  try {
    line = JSON.parse(text);
  } catch {
    throw new SandboxError(`POST /execute: a line of the answer is not JSON: ${text.slice(0, 200)}`);
  }
  if (typeof line !== 'object' || line === null || typeof (line as { type?: unknown }).type !== 'string') {
    throw new SandboxError(`POST /execute: a line of the answer has no type: ${text.slice(0, 200)}`);
  }
  return line as ExecutionLine;
}

/** svc's `{code, message}` body as the SDK's error of its status (404: NotFoundError, for a context or the sandbox). */
async function httpError(res: Response, what: string): Promise<SandboxError> {
  const text = await readErrorBody(res);
  return errorFromHttp(res.status, text, { retryAfter: res.headers.get('retry-after'), fallbackMessage: `${what}: HTTP ${res.status} ${res.statusText}` });
}
