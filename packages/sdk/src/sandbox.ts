/**
 * `Sandbox`: the e2b-shaped entry point. Static methods act on a sandbox id through the
 * REST API; an instance also reaches the sandbox's envd through the data plane
 * (`files`, `commands`, `pty`).
 */
import { ApiClient } from './api-client.ts';
import { Commands } from './commands.ts';
import { ConnectionConfig, defaultTemplate, timeoutToSeconds, type ConnectionOpts } from './config.ts';
import { ConflictError, GoneError, SandboxNotFoundError, TemplateError } from './errors.ts';
import { EnvdTransport, dataPlaneError, type EnvdTarget } from './envd/transport.ts';
import { Filesystem } from './filesystem.ts';
import { SandboxPaginator } from './paginator.ts';
import { Pty } from './pty.ts';
import { buildCreateBody, toSandboxInfo, toSandboxMetrics } from './sandbox-wire.ts';
import type {
  RequestOpts, SandboxApiOpts, SandboxConnectOpts, SandboxInfo, SandboxListOpts, SandboxMetrics, SandboxOpts,
} from './types.ts';
import type { WireSandbox, WireSandboxDetail, WireSandboxMetric } from './wire.ts';

export interface SandboxConstructorOpts extends ConnectionOpts {
  sandboxId: string;
  sandboxDomain?: string;
  envdVersion: string;
  envdAccessToken?: string;
  trafficAccessToken?: string;
}

const path = (id: string, rest = '') => `/sandboxes/${encodeURIComponent(id)}${rest}`;

export class Sandbox {
  readonly sandboxId: string;
  readonly sandboxDomain?: string;
  readonly envdVersion: string;
  readonly files: Filesystem;
  readonly commands: Commands;
  readonly pty: Pty;
  protected readonly connectionConfig: ConnectionConfig;
  private readonly envd: EnvdTarget;

  /** @internal Use `Sandbox.create` or `Sandbox.connect`. */
  constructor(opts: SandboxConstructorOpts) {
    this.connectionConfig = new ConnectionConfig(opts);
    this.sandboxId = opts.sandboxId;
    this.sandboxDomain = opts.sandboxDomain;
    this.envdVersion = opts.envdVersion;
    this.envd = {
      sandboxUrl: this.connectionConfig.sandboxUrl,
      sandboxId: opts.sandboxId,
      envdAccessToken: opts.envdAccessToken,
      trafficAccessToken: opts.trafficAccessToken,
      requestTimeoutMs: this.connectionConfig.requestTimeoutMs,
    };
    const transport = new EnvdTransport(this.envd);
    this.files = new Filesystem(transport);
    this.commands = new Commands(transport);
    this.pty = new Pty(transport);
  }

  /** Token for data-plane requests when the sandbox refuses public traffic. */
  get trafficAccessToken(): string | undefined {
    return this.envd.trafficAccessToken;
  }

  /** @internal envd's access token, sent as X-Access-Token. */
  protected get envdAccessToken(): string | undefined {
    return this.envd.envdAccessToken;
  }

  // ------------------------------------------------------------------ static

  /** Creates a sandbox from `template` (default: env SVC_TEMPLATE_ID, else 'base'). */
  static async create<S extends typeof Sandbox>(this: S, opts?: SandboxOpts): Promise<InstanceType<S>>;
  static async create<S extends typeof Sandbox>(this: S, template: string, opts?: SandboxOpts): Promise<InstanceType<S>>;
  static async create<S extends typeof Sandbox>(this: S, templateOrOpts?: string | SandboxOpts, maybeOpts?: SandboxOpts): Promise<InstanceType<S>> {
    const opts = (typeof templateOrOpts === 'string' ? maybeOpts : templateOrOpts) ?? {};
    const template = typeof templateOrOpts === 'string' ? templateOrOpts : opts.template ?? defaultTemplate();
    const api = new ApiClient(opts);
    const created = await api.post<WireSandbox>('/v2/sandboxes', { body: buildCreateBody(template, opts), signal: opts.signal, requestTimeoutMs: createRequestTimeout(opts, api.config.requestTimeoutMs) });
    if (!created?.sandboxID) throw new TemplateError('the API did not return a sandbox id');
    return new this({ ...api.config.toOpts(), ...fromWire(created) }) as InstanceType<S>;
  }

  /**
   * Connects to a running or paused sandbox (a paused one is resumed). `timeoutMs`:
   * omitted keeps the current timeout, NEVER_TIMEOUT never times out, N > 0 makes sure
   * at least N ms remain.
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
      await new ApiClient(opts).delete(path(sandboxId), { notFound: SandboxNotFoundError, signal: opts.signal });
      return true;
    } catch (err) {
      if (err instanceof SandboxNotFoundError || err instanceof GoneError) return false;
      throw err;
    }
  }

  static async getInfo(sandboxId: string, opts: SandboxApiOpts = {}): Promise<SandboxInfo> {
    const detail = await new ApiClient(opts).get<WireSandboxDetail>(path(sandboxId), { notFound: SandboxNotFoundError, signal: opts.signal });
    return toSandboxInfo(detail);
  }

  /** Sets the idle timeout (it can shorten it too); NEVER_TIMEOUT never times out. */
  static async setTimeout(sandboxId: string, timeoutMs: number, opts: SandboxApiOpts = {}): Promise<void> {
    await new ApiClient(opts).post(path(sandboxId, '/timeout'), {
      body: { timeout: timeoutToSeconds(timeoutMs) },
      notFound: SandboxNotFoundError,
      signal: opts.signal,
    });
  }

  /** True when the sandbox got paused, false when it already was. */
  static async pause(sandboxId: string, opts: SandboxApiOpts = {}): Promise<boolean> {
    try {
      await new ApiClient(opts).post(path(sandboxId, '/pause'), { notFound: SandboxNotFoundError, signal: opts.signal });
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
    const metrics = await new ApiClient(opts).get<WireSandboxMetric[]>(path(sandboxId, '/metrics'), { notFound: SandboxNotFoundError, signal: opts.signal });
    return (metrics ?? []).map(toSandboxMetrics);
  }

  // ------------------------------------------------------------------ instance

  /** Connects again (resuming a paused sandbox) and returns this instance. */
  async connect(opts: { timeoutMs?: number } & RequestOpts = {}): Promise<this> {
    const wire = await connectWire(this.api(), this.sandboxId, opts);
    this.adoptTokens(wire);
    return this;
  }

  /** @deprecated Use `connect`. */
  async resume(opts: { timeoutMs?: number } & RequestOpts = {}): Promise<this> {
    const wire = await resumeWire(this.api(), this.sandboxId, opts);
    this.adoptTokens(wire);
    return this;
  }

  async pause(opts: RequestOpts = {}): Promise<boolean> {
    return Sandbox.pause(this.sandboxId, this.apiOpts(opts));
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

  /**
   * The host name of a port of the sandbox, `<port>-<sandboxId>.<domain>`. The domain is
   * the one the API reported, else the host of the data-plane URL.
   */
  getHost(port: number): string {
    return `${port}-${this.sandboxId}.${this.sandboxDomain ?? dataPlaneDomain(this.connectionConfig.sandboxUrl)}`;
  }

  /** True while envd answers; false when the data plane says the sandbox is paused, gone or unreachable. */
  async isRunning(opts: RequestOpts = {}): Promise<boolean> {
    const res = await new EnvdTransport(this.envd).http('GET', '/health', opts);
    await res.body?.cancel().catch(() => { /* the answer is decided by its status; its body was unwanted */ });
    if (res.ok) return true;
    if ([404, 409, 410, 502].includes(res.status)) return false;
    throw dataPlaneError(res.status, '');
  }

  private api(): ApiClient {
    return new ApiClient(this.connectionConfig);
  }

  private apiOpts(opts: RequestOpts): SandboxApiOpts {
    return { ...this.connectionConfig.toOpts(), ...opts };
  }

  private adoptTokens(wire: WireSandbox): void {
    if (wire?.envdAccessToken) this.envd.envdAccessToken = wire.envdAccessToken;
    if (wire?.trafficAccessToken) this.envd.trafficAccessToken = wire.trafficAccessToken;
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

async function connectWire(api: ApiClient, sandboxId: string, opts: { timeoutMs?: number } & RequestOpts): Promise<WireSandbox> {
  return api.post<WireSandbox>(`/v2${path(sandboxId, '/connect')}`, {
    body: opts.timeoutMs === undefined ? {} : { timeout: timeoutToSeconds(opts.timeoutMs) },
    notFound: SandboxNotFoundError,
    requestTimeoutMs: opts.requestTimeoutMs,
    signal: opts.signal,
  });
}

async function resumeWire(api: ApiClient, sandboxId: string, opts: { timeoutMs?: number } & RequestOpts): Promise<WireSandbox> {
  return api.post<WireSandbox>(path(sandboxId, '/resume'), {
    body: opts.timeoutMs === undefined ? {} : { timeout: timeoutToSeconds(opts.timeoutMs) },
    notFound: SandboxNotFoundError,
    requestTimeoutMs: opts.requestTimeoutMs,
    signal: opts.signal,
  });
}

/** `localhost:3002` for a loopback data-plane URL, so `<port>-<id>.localhost:3002` resolves locally. */
function dataPlaneDomain(sandboxUrl: string): string {
  const url = new URL(sandboxUrl);
  const loopback = ['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname);
  return `${loopback ? 'localhost' : url.hostname}${url.port ? `:${url.port}` : ''}`;
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
