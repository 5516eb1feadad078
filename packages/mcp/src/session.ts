/**
 * One MCP session's state: the connection its calls use, handles of the sandboxes it reached
 * (so a second call on a sandbox goes straight to its envd), and its own code-interpreter sandbox,
 * started by the first run_code without a sandboxId and killed when the session closes.
 */
import { NotFoundError, Sandbox, type ConnectionOpts, type SandboxOpts } from '@svc/sdk';
import { sdkOpts, type McpConnection, type McpLog } from './connection.ts';
import { ToolFailure, noSandbox, pausedSandbox } from './results.ts';

export const CODE_INTERPRETER_TEMPLATE = 'code-interpreter-v1';
/**
 * How long an HTTP session may sit idle before it is closed, and the idle timeout of a session's
 * code sandbox: a session that vanishes without closing (a killed client) leaves it for no longer.
 */
export const SESSION_IDLE_MS = 30 * 60_000;
/**
 * Tool calls one session may have under way at once. Each holds a connection to a sandbox and some
 * output in the gateway's memory: a client firing hundreds at once (or a batch of them in one
 * request) multiplied both without bound.
 */
export const MAX_CONCURRENT_CALLS = 8;

/** What the API says about a sandbox after a call on it failed. */
type SandboxCondition = 'gone' | 'paused' | 'running';

export class McpSession {
  /** The key of the latest request (HTTP), for calls made outside one: the code sandbox's kill at close. */
  apiKey: string | undefined;
  private readonly handles = new Map<string, Sandbox>();
  private code?: Promise<string>;
  private codeId?: string;
  private closed = false;
  private running = 0;

  constructor(
    readonly id: string,
    private readonly connection: McpConnection,
    readonly log: McpLog,
    private readonly codeSandboxTimeoutMs = SESSION_IDLE_MS,
  ) {
    this.apiKey = connection.apiKey;
  }

  /**
   * Takes a place for one tool call: false when MAX_CONCURRENT_CALLS are under way, else the call
   * runs and must give its place back with `endCall`.
   */
  startCall(): boolean {
    if (this.running >= MAX_CONCURRENT_CALLS) return false;
    this.running++;
    return true;
  }

  endCall(): void {
    this.running--;
  }

  /** The SDK options of one call: the request's own key when it brought one, else the session's latest. */
  opts(requestKey?: string): ConnectionOpts {
    return sdkOpts(this.connection, requestKey ?? this.apiKey);
  }

  get publicSandboxUrl(): string {
    return this.connection.publicSandboxUrl ?? this.connection.sandboxUrl;
  }

  /**
   * A handle on a running sandbox for its envd and code interpreter. The first use asks the API
   * about it, so that a paused sandbox is refused (connecting would resume it behind the model's back).
   */
  async sandbox(sandboxId: string, opts: ConnectionOpts): Promise<Sandbox> {
    const known = this.handles.get(sandboxId);
    if (known) return known;
    const info = await Sandbox.getInfo(sandboxId, opts);
    if (info.state === 'paused') throw new ToolFailure(pausedSandbox(sandboxId));
    const sbx = await Sandbox.connect(sandboxId, opts);
    this.handles.set(sandboxId, sbx);
    return sbx;
  }

  remember(sbx: Sandbox): void {
    this.handles.set(sbx.sandboxId, sbx);
  }

  /** After a kill or a pause: the next call asks the API again. */
  forget(sandboxId: string): void {
    this.handles.delete(sandboxId);
    if (this.codeId === sandboxId) {
      this.code = undefined;
      this.codeId = undefined;
    }
  }

  /** After a call on the sandbox failed: is it gone, paused, or running (and the failure its own)? */
  async condition(sandboxId: string, opts: ConnectionOpts): Promise<SandboxCondition> {
    try {
      const info = await Sandbox.getInfo(sandboxId, opts);
      if (info.state === 'running') return 'running';
      this.handles.delete(sandboxId);
      return 'paused';
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      this.forget(sandboxId);
      return 'gone';
    }
  }

  /**
   * The error to report for a failed call on a sandbox: a ToolFailure saying what to do when the
   * sandbox is gone or paused, else the call's own error.
   */
  async explain(sandboxId: string, opts: ConnectionOpts, err: unknown): Promise<unknown> {
    let condition: SandboxCondition;
    try {
      condition = await this.condition(sandboxId, opts);
    } catch (lookup) {
      this.log.warn({ session: this.id, sandboxId, err: (lookup as Error).message }, 'a call on a sandbox failed and the API could not say why');
      return err;
    }
    if (condition === 'gone') return new ToolFailure(noSandbox(sandboxId));
    if (condition === 'paused') return new ToolFailure(pausedSandbox(sandboxId));
    return err;
  }

  isCodeSandbox(sandboxId: string): boolean {
    return this.codeId === sandboxId;
  }

  /** The session's code sandbox, started on first use; `started` when this call started it. */
  async codeSandbox(opts: ConnectionOpts): Promise<{ sandbox: Sandbox; started: boolean }> {
    if (this.closed) throw new ToolFailure('this MCP session is closed: open a new one');
    if (this.code) return { sandbox: await this.sandbox(await this.code, opts), started: false };
    const creating = createWithoutDeadline(CODE_INTERPRETER_TEMPLATE, { ...opts, timeoutMs: this.codeSandboxTimeoutMs, metadata: { 'mcp-session': this.id } });
    this.code = creating;
    let id: string;
    try {
      id = await creating;
    } catch (err) {
      // the next run_code tries again
      if (this.code === creating) this.code = undefined;
      throw err;
    }
    if (this.code === creating) this.codeId = id;
    return { sandbox: await this.sandbox(id, opts), started: true };
  }

  /** Ends the session: its code sandbox is killed. Safe to call twice. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const pending = this.code;
    this.code = undefined;
    this.handles.clear();
    if (!pending) return;
    let id: string;
    try {
      id = await pending;
    } catch {
      return; // it never started: nothing to kill (its run_code reported why)
    }
    await this.killCodeSandbox(id);
  }

  private async killCodeSandbox(sandboxId: string): Promise<void> {
    try {
      await Sandbox.kill(sandboxId, this.opts());
      this.log.info({ session: this.id, sandboxId }, 'MCP session closed: its code sandbox was killed');
    } catch (err) {
      this.log.warn({ session: this.id, sandboxId, err: (err as Error).message }, 'MCP session closed, but its code sandbox could not be killed; it ends at its idle timeout');
    }
  }
}

/**
 * Creates a sandbox and answers its id. The request has no deadline of its own (the caller's signal
 * still ends it): a create waits while its template builds, until the server's own create deadline.
 * The instance it gives is not kept, since it would carry that lack of deadline to its every call.
 */
export async function createWithoutDeadline(template: string, opts: SandboxOpts): Promise<string> {
  return (await Sandbox.create(template, { ...opts, requestTimeoutMs: 0 })).sandboxId;
}
