/**
 * `Sandbox`: the e2b-shaped entry point. Static methods act on a sandbox id through the
 * REST API; an instance also reaches the sandbox's envd through the data plane
 * (`files`, `commands`, `pty`), and its code interpreter (`runCode`, the code contexts).
 */
import { ApiClient } from './api-client.ts';
import type { CodeContext } from '@svc/contracts/code-interpreter';
import { CodeInterpreter, type CreateCodeContextOpts, type RunCodeOpts } from './code-interpreter.ts';
import { Commands } from './commands.ts';
import { ConnectionConfig, defaultTemplate, timeoutToSeconds, type ConnectionOpts } from './config.ts';
import { ConflictError, GoneError, InvalidArgumentError, SandboxNotFoundError, TemplateError } from './errors.ts';
import { EnvdTransport, dataPlaneError } from './envd/transport.ts';
import type { Execution } from './execution.ts';
import { Filesystem } from './filesystem.ts';
import { SandboxPaginator, SnapshotPaginator } from './paginator.ts';
import { Pty } from './pty.ts';
import { dataPlaneDomain, type SandboxTarget } from './sandbox-port.ts';
import * as snapshots from './sandbox-snapshots.ts';
import { buildCreateBody, toSandboxInfo, toSandboxLogEntry, toSandboxMetrics } from './sandbox-wire.ts';
import type {
  CreateSnapshotOpts, RequestOpts, SandboxApiOpts, SandboxConnectOpts, SandboxForkOpts, SandboxInfo, SandboxListOpts, SandboxLogEntry, SandboxLogsOpts, SandboxMetrics,
  SandboxOnResume, SandboxOpts, SandboxPauseOpts, SnapshotInfo, SnapshotListOpts,
} from './types.ts';
import type { WireSandbox, WireTimeoutRequest } from './wire.ts';

export interface SandboxConstructorOpts extends ConnectionOpts {
  sandboxId: string;
  sandboxDomain?: string;
  envdVersion: string;
  envdAccessToken?: string;
  trafficAccessToken?: string;
}

export class Sandbox {
  readonly sandboxId: string;
  readonly sandboxDomain?: string;
  readonly envdVersion: string;
  readonly files: Filesystem;
  readonly commands: Commands;
  readonly pty: Pty;
  protected readonly connectionConfig: ConnectionConfig;
  private readonly dataPlane: SandboxTarget;
  private readonly codeInterpreter: CodeInterpreter;

  /** @internal Use `Sandbox.create` or `Sandbox.connect`. */
  constructor(opts: SandboxConstructorOpts) {
    this.connectionConfig = new ConnectionConfig(opts);
    this.sandboxId = opts.sandboxId;
    this.sandboxDomain = opts.sandboxDomain;
    this.envdVersion = opts.envdVersion;
    this.dataPlane = {
      sandboxUrl: this.connectionConfig.sandboxUrl,
      sandboxId: opts.sandboxId,
      envdAccessToken: opts.envdAccessToken,
      trafficAccessToken: opts.trafficAccessToken,
      requestTimeoutMs: this.connectionConfig.requestTimeoutMs,
    };
    const transport = new EnvdTransport(this.dataPlane);
    this.files = new Filesystem(transport);
    this.commands = new Commands(transport);
    this.pty = new Pty(transport);
    this.codeInterpreter = new CodeInterpreter(this.dataPlane);
  }

  /** Token for data-plane requests when the sandbox refuses public traffic. */
  get trafficAccessToken(): string | undefined {
    return this.dataPlane.trafficAccessToken;
  }

  /** @internal envd's access token, sent as X-Access-Token. */
  protected get envdAccessToken(): string | undefined {
    return this.dataPlane.envdAccessToken;
  }

  // ------------------------------------------------------------------ static

  /** Creates a sandbox from `template` (default: env SVC_TEMPLATE_ID, else 'base'). */
  static async create<S extends typeof Sandbox>(this: S, opts?: SandboxOpts): Promise<InstanceType<S>>;
  static async create<S extends typeof Sandbox>(this: S, template: string, opts?: SandboxOpts): Promise<InstanceType<S>>;
  static async create<S extends typeof Sandbox>(this: S, templateOrOpts?: string | SandboxOpts, maybeOpts?: SandboxOpts): Promise<InstanceType<S>> {
    const opts = (typeof templateOrOpts === 'string' ? maybeOpts : templateOrOpts) ?? {};
    const template = typeof templateOrOpts === 'string' ? templateOrOpts : opts.template ?? defaultTemplate();
    const api = new ApiClient(opts);
    const created = await api.call('POST', '/v2/sandboxes', { body: buildCreateBody(template, opts), signal: opts.signal, requestTimeoutMs: createRequestTimeout(opts, api.config.requestTimeoutMs) });
    if (!created?.sandboxID) throw new TemplateError('the API did not return a sandbox id');
    return new this({ ...api.config.toOpts(), ...fromWire(created) }) as InstanceType<S>;
  }

  /**
   * Connects to a running or paused sandbox (a paused one is resumed). `timeoutMs`:
   * omitted keeps the current timeout, NEVER_TIMEOUT never times out, N > 0 makes sure
   * at least N ms remain. `onResume: 'reboot'` boots a paused sandbox again from its files
   * instead of restoring its memory.
   */
  static async connect<S extends typeof Sandbox>(this: S, sandboxId: string, opts: SandboxConnectOpts = {}): Promise<InstanceType<S>> {
    const api = new ApiClient(opts);
    const wire = await connectWire(api, sandboxId, opts);
    return new this({ ...api.config.toOpts(), ...fromWire(wire) }) as InstanceType<S>;
  }

  /** Lists running and paused sandboxes, a page at a time. */
  static list(opts: SandboxListOpts = {}): SandboxPaginator {
    return new SandboxPaginator(opts);
  }

  /** True when the sandbox was killed, false when it did not exist (or was already gone). */
  static async kill(sandboxId: string, opts: SandboxApiOpts = {}): Promise<boolean> {
    try {
      await new ApiClient(opts).call('DELETE', '/sandboxes/{sandboxID}', { params: { sandboxID: sandboxId }, notFound: SandboxNotFoundError, signal: opts.signal });
      return true;
    } catch (err) {
      if (err instanceof SandboxNotFoundError || err instanceof GoneError) return false;
      throw err;
    }
  }

  static async getInfo(sandboxId: string, opts: SandboxApiOpts = {}): Promise<SandboxInfo> {
    const detail = await new ApiClient(opts).call('GET', '/sandboxes/{sandboxID}', { params: { sandboxID: sandboxId }, notFound: SandboxNotFoundError, signal: opts.signal });
    return toSandboxInfo(detail);
  }

  /** Sets the idle timeout (it can shorten it too); NEVER_TIMEOUT never times out. */
  static async setTimeout(sandboxId: string, timeoutMs: number, opts: SandboxApiOpts = {}): Promise<void> {
    await new ApiClient(opts).call('POST', '/sandboxes/{sandboxID}/timeout', {
      params: { sandboxID: sandboxId },
      body: { timeout: timeoutToSeconds(timeoutMs) },
      notFound: SandboxNotFoundError,
      signal: opts.signal,
    });
  }

  /**
   * True when the sandbox got paused, false when it already was. `keepMemory: false` frees its
   * memory and keeps its files: connecting boots it again from them, traffic does not resume it.
   */
  static async pause(sandboxId: string, opts: SandboxPauseOpts = {}): Promise<boolean> {
    try {
      await new ApiClient(opts).call('POST', '/sandboxes/{sandboxID}/pause', {
        params: { sandboxID: sandboxId },
        body: opts.keepMemory === undefined ? undefined : { memory: opts.keepMemory },
        notFound: SandboxNotFoundError,
        signal: opts.signal,
      });
      return true;
    } catch (err) {
      if (err instanceof ConflictError) return false;
      throw err;
    }
  }

  /**
   * @deprecated Use `Sandbox.connect`. `timeoutMs`: omitted or 0 keeps the current
   * timeout, NEVER_TIMEOUT never times out, N > 0 starts a new N ms window.
   */
  static async resume<S extends typeof Sandbox>(this: S, sandboxId: string, opts: SandboxConnectOpts = {}): Promise<InstanceType<S>> {
    const api = new ApiClient(opts);
    const wire = await resumeWire(api, sandboxId, opts);
    return new this({ ...api.config.toOpts(), ...fromWire(wire) }) as InstanceType<S>;
  }

  static async getMetrics(sandboxId: string, opts: SandboxApiOpts = {}): Promise<SandboxMetrics[]> {
    const metrics = await new ApiClient(opts).call('GET', '/sandboxes/{sandboxID}/metrics', { params: { sandboxID: sandboxId }, notFound: SandboxNotFoundError, signal: opts.signal });
    return (metrics ?? []).map(toSandboxMetrics);
  }

  /** The sandbox's own log (envd's lines and its boots), running or paused: E2B's v2 logs. */
  static async getLogs(sandboxId: string, opts: SandboxLogsOpts = {}): Promise<SandboxLogEntry[]> {
    const { cursor, limit, direction, level, search } = opts;
    const query = { cursor: cursor instanceof Date ? cursor.getTime() : cursor, limit, direction, level, search };
    const wire = await new ApiClient(opts).call('GET', '/v2/sandboxes/{sandboxID}/logs', { params: { sandboxID: sandboxId }, query, notFound: SandboxNotFoundError, signal: opts.signal });
    return (wire?.logs ?? []).map(toSandboxLogEntry);
  }

  /**
   * Snapshots the sandbox's files (it is paused for the capture and runs on). `Sandbox.create`
   * takes the answer's `snapshotId` where a template goes; the snapshot outlives the sandbox.
   */
  static async createSnapshot(sandboxId: string, opts: CreateSnapshotOpts = {}): Promise<SnapshotInfo> {
    return snapshots.createSnapshot(new ApiClient(opts), sandboxId, opts);
  }

  /** Lists snapshots, newest first, a page at a time; `sandboxId` and `name` (id or name) filter. */
  static listSnapshots(opts: SnapshotListOpts = {}): SnapshotPaginator {
    return new SnapshotPaginator(opts);
  }

  /**
   * True when the snapshot (by id or name) was deleted, false when there was none. As in e2b it
   * goes through DELETE /templates/{id}, which deletes a template of that id or alias as well.
   */
  static async deleteSnapshot(snapshotId: string, opts: SandboxApiOpts = {}): Promise<boolean> {
    return snapshots.deleteSnapshot(new ApiClient(opts), snapshotId, opts);
  }

  /**
   * Starts `count` sandboxes (1 to 10, default 1) from one capture of a running sandbox, which
   * keeps running. One entry per fork: a connected instance, or the Error that kept it from
   * starting (of the class its code maps to, as for any API error).
   */
  static async fork<S extends typeof Sandbox>(this: S, sandboxId: string, opts: SandboxForkOpts = {}): Promise<Array<InstanceType<S> | Error>> {
    const api = new ApiClient(opts);
    const forks = await snapshots.forkWire(api, sandboxId, opts, createRequestTimeout(opts, api.config.requestTimeoutMs));
    return forks.map((f) => (f instanceof Error ? f : new this({ ...api.config.toOpts(), ...fromWire(f) }) as InstanceType<S>));
  }

  // ------------------------------------------------------------------ instance

  /** Connects again (resuming a paused sandbox) and returns this instance. */
  async connect(opts: { timeoutMs?: number; onResume?: SandboxOnResume } & RequestOpts = {}): Promise<this> {
    const wire = await connectWire(this.api(), this.sandboxId, opts);
    this.adoptTokens(wire);
    return this;
  }

  /** @deprecated Use `connect`. */
  async resume(opts: { timeoutMs?: number; onResume?: SandboxOnResume } & RequestOpts = {}): Promise<this> {
    const wire = await resumeWire(this.api(), this.sandboxId, opts);
    this.adoptTokens(wire);
    return this;
  }

  async pause(opts: { keepMemory?: boolean } & RequestOpts = {}): Promise<boolean> {
    return Sandbox.pause(this.sandboxId, this.apiOpts(opts));
  }

  async createSnapshot(opts: { name?: string } & RequestOpts = {}): Promise<SnapshotInfo> {
    return Sandbox.createSnapshot(this.sandboxId, this.apiOpts(opts));
  }

  /** The snapshots taken of this sandbox. */
  listSnapshots(opts: Omit<SnapshotListOpts, 'sandboxId'> = {}): SnapshotPaginator {
    return Sandbox.listSnapshots({ ...this.connectionConfig.toOpts(), ...opts, sandboxId: this.sandboxId });
  }

  /** Forks this sandbox; the entries are instances of this sandbox's class, or Errors. */
  async fork(opts: { count?: number; timeoutMs?: number } & RequestOpts = {}): Promise<Array<this | Error>> {
    const cls = this.constructor as typeof Sandbox;
    const configured = this.connectionConfig.requestTimeoutMs;
    // a fork creates sandboxes: it gets a create's deadline unless this call sets its own
    const requestTimeoutMs = opts.requestTimeoutMs ?? createRequestTimeout({}, configured) ?? configured;
    return cls.fork(this.sandboxId, { ...this.connectionConfig.toOpts(), ...opts, requestTimeoutMs }) as Promise<Array<this | Error>>;
  }

  async kill(opts: RequestOpts = {}): Promise<boolean> {
    return Sandbox.kill(this.sandboxId, this.apiOpts(opts));
  }

  async getInfo(opts: RequestOpts = {}): Promise<SandboxInfo> {
    return Sandbox.getInfo(this.sandboxId, this.apiOpts(opts));
  }

  async setTimeout(timeoutMs: number, opts: RequestOpts = {}): Promise<void> {
    return Sandbox.setTimeout(this.sandboxId, timeoutMs, this.apiOpts(opts));
  }

  async getMetrics(opts: RequestOpts = {}): Promise<SandboxMetrics[]> {
    return Sandbox.getMetrics(this.sandboxId, this.apiOpts(opts));
  }

  async getLogs(opts: Omit<SandboxLogsOpts, keyof SandboxApiOpts> & RequestOpts = {}): Promise<SandboxLogEntry[]> {
    return Sandbox.getLogs(this.sandboxId, this.apiOpts(opts));
  }

  /**
   * The host name of a port of the sandbox, `<port>-<sandboxId>.<domain>`. The domain is
   * the one the API reported, else the host of the data-plane URL.
   */
  getHost(port: number): string {
    return `${port}-${this.sandboxId}.${this.sandboxDomain ?? dataPlaneDomain(this.connectionConfig.sandboxUrl)}`;
  }

  /** True while envd answers; false when the data plane says the sandbox is paused, gone or unreachable. */
  async isRunning(opts: RequestOpts = {}): Promise<boolean> {
    const res = await new EnvdTransport(this.dataPlane).http('GET', '/health', opts);
    await res.body?.cancel().catch(() => { /* the answer is decided by its status; its body was unwanted */ });
    if (res.ok) return true;
    if ([404, 409, 410, 502].includes(res.status)) return false;
    throw dataPlaneError(res.status, '');
  }

  // ------------------------------------------------------------------ code interpreter (port 49999)

  /**
   * Runs `code` in the sandbox's code interpreter: in python's default context, in `language`'s or
   * in `context`. Output reaches the callbacks as it comes; an error the code raises is
   * `execution.error` (the run itself resolves). Past `timeoutMs` (default 60 s) the code is
   * interrupted and the run rejects with a TimeoutError.
   */
  async runCode(code: string, opts: RunCodeOpts = {}): Promise<Execution> {
    return this.codeInterpreter.runCode(code, opts);
  }

  /** A new context: its own kernel, with its own variables, in `language` (default python). */
  async createCodeContext(opts: CreateCodeContextOpts = {}): Promise<CodeContext> {
    return this.codeInterpreter.createContext(opts);
  }

  async listCodeContexts(opts: RequestOpts = {}): Promise<CodeContext[]> {
    return this.codeInterpreter.listContexts(opts);
  }

  async removeCodeContext(context: CodeContext | string, opts: RequestOpts = {}): Promise<void> {
    return this.codeInterpreter.removeContext(context, opts);
  }

  /** Starts the context's kernel again: its variables are gone, its id stays. */
  async restartCodeContext(context: CodeContext | string, opts: RequestOpts = {}): Promise<void> {
    return this.codeInterpreter.restartContext(context, opts);
  }

  private api(): ApiClient {
    return new ApiClient(this.connectionConfig);
  }

  private apiOpts<O extends RequestOpts>(opts: O): SandboxApiOpts & O {
    return { ...this.connectionConfig.toOpts(), ...opts };
  }

  private adoptTokens(wire: WireSandbox): void {
    if (wire?.envdAccessToken) this.dataPlane.envdAccessToken = wire.envdAccessToken;
    if (wire?.trafficAccessToken) this.dataPlane.trafficAccessToken = wire.trafficAccessToken;
  }
}

function fromWire(w: WireSandbox) {
  return {
    sandboxId: w.sandboxID,
    sandboxDomain: w.domain || undefined,
    envdVersion: w.envdVersion,
    envdAccessToken: w.envdAccessToken || undefined,
    trafficAccessToken: w.trafficAccessToken || undefined,
  };
}

type ResumeOpts = { timeoutMs?: number; onResume?: SandboxOnResume } & RequestOpts;

/** The body of connect and resume: the timeout when given, memory false to boot from the files ('reboot'). */
function resumeBody(opts: ResumeOpts): WireTimeoutRequest {
  const onResume: unknown = opts.onResume ?? undefined;
  if (onResume !== undefined && onResume !== 'restore' && onResume !== 'reboot') {
    throw new InvalidArgumentError(`onResume must be 'restore' or 'reboot' (got ${JSON.stringify(onResume)})`);
  }
  const body: WireTimeoutRequest = {};
  if (opts.timeoutMs !== undefined) body.timeout = timeoutToSeconds(opts.timeoutMs);
  if (onResume === 'reboot') body.memory = false;
  return body;
}

async function connectWire(api: ApiClient, sandboxId: string, opts: ResumeOpts): Promise<WireSandbox> {
  return api.call('POST', '/v2/sandboxes/{sandboxID}/connect', {
    params: { sandboxID: sandboxId },
    body: resumeBody(opts),
    notFound: SandboxNotFoundError,
    requestTimeoutMs: opts.requestTimeoutMs,
    signal: opts.signal,
  });
}

async function resumeWire(api: ApiClient, sandboxId: string, opts: ResumeOpts): Promise<WireSandbox> {
  return api.call('POST', '/sandboxes/{sandboxID}/resume', {
    params: { sandboxID: sandboxId },
    body: resumeBody(opts),
    notFound: SandboxNotFoundError,
    requestTimeoutMs: opts.requestTimeoutMs,
    signal: opts.signal,
  });
}

/**
 * A create waits at least 90 s unless the caller set its own deadline: longer than the server's
 * own create deadline (create_timeout_insec, 60 s by default), so a slow create ends with the
 * server's answer and its reason rather than a bare client timeout.
 */
const MIN_CREATE_REQUEST_TIMEOUT_MS = 90_000;
function createRequestTimeout(opts: { requestTimeoutMs?: number }, configured: number): number | undefined {
  if (opts.requestTimeoutMs !== undefined || configured === 0) return undefined;
  return Math.max(configured, MIN_CREATE_REQUEST_TIMEOUT_MS);
}
