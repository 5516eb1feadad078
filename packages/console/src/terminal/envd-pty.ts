/**
 * One terminal session in a sandbox: a login bash started by envd with a PTY attached
 * (process.Process/Start, a server stream of its output), fed by SendInput, resized by Update and
 * killed by SendSignal when the page closes it. Reached through the data-plane proxy at
 * `<port>-<sandboxID>.<domain>`; the same calls as the SDK's `sandbox.pty` (packages/sdk/src/pty.ts).
 */
import { ENVD_PORT } from '@svc/contracts/envd-port';
import { ConnectError, base64ToBytes, bytesToBase64, serverStream, unaryCall } from './connect-stream.ts';

/** The end of a stream that broke after the shell started (the sandbox paused or killed, the network). */
export const CONNECTION_LOST = 'the connection to the sandbox was lost';
const PROCESS = 'process.Process';
/** Until envd names the process; a paused sandbox is resumed by the proxy first, which takes a while. */
const START_TIMEOUT_MS = 30_000;
const CALL_TIMEOUT_MS = 15_000;

/** envd's base URL for a sandbox, from the page's scheme and the sandbox's `domain`. */
export function envdUrl(protocol: string, sandboxId: string, domain: string): string {
  return `${protocol}//${ENVD_PORT}-${sandboxId}.${domain}`;
}

export interface PtyOptions {
  baseUrl: string;
  /** The sandbox's envdAccessToken (secured sandboxes). */
  accessToken?: string;
  /** The user to run the shell as; none: envd's default (`user` when the template has one). */
  user?: string;
  cols: number;
  rows: number;
  onOutput: (bytes: Uint8Array) => void;
  /** A call beside the stream failed (input, resize): the session goes on. */
  onError: (message: string) => void;
}

/** How the session ended by itself; `undefined` from run() means close() ended it. */
export type EndReason = string;

export class PtySession {
  pid: number | undefined;
  private readonly controller = new AbortController();
  private closing = false;
  private shouldKill: (() => Promise<boolean>) | undefined;
  private ended = false;
  private timedOut = false;
  private exit: { status?: string; exitCode?: number; error?: string } | undefined;
  private readonly queue: Uint8Array[] = [];
  private sending = false;
  private size: { cols: number; rows: number };
  private sentSize: { cols: number; rows: number };

  constructor(private readonly opts: PtyOptions) {
    this.size = this.sentSize = { cols: opts.cols, rows: opts.rows };
  }

  private headers(): Record<string, string> {
    const h: Record<string, string> = {};
    if (this.opts.accessToken) h['X-Access-Token'] = this.opts.accessToken;
    // envd picks the user from Basic auth with an empty password (the SDK's userHeader).
    if (this.opts.user) h.Authorization = `Basic ${btoa(`${this.opts.user}:`)}`;
    return h;
  }

  /**
   * Starts the shell and streams its output until the session ends. Resolves with why it ended by
   * itself (the shell exited, the connection to the sandbox was lost), or undefined after close();
   * rejects when the shell could not be started.
   */
  async run(): Promise<EndReason | undefined> {
    const request = {
      process: { cmd: '/bin/bash', args: ['-i', '-l'], envs: { TERM: 'xterm-256color', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' } },
      pty: { size: { cols: this.opts.cols, rows: this.opts.rows } },
    };
    const startTimer = setTimeout(() => {
      this.timedOut = true;
      this.controller.abort();
    }, START_TIMEOUT_MS);
    try {
      const end = await serverStream(`${this.opts.baseUrl}/${PROCESS}/Start`, request, {
        // Keepalives keep an idle terminal's stream open through the proxy; envd sends them on request.
        headers: { ...this.headers(), 'Keepalive-Ping-Interval': '50' },
        signal: this.controller.signal,
        onMessage: (m) => {
          if (this.onEvent(m)) clearTimeout(startTimer);
        },
      });
      this.ended = true;
      if (this.closing) return undefined;
      if (this.pid === undefined) throw end.error ?? new ConnectError('internal', 'envd ended the stream before the shell started');
      if (end.error) return `envd ended the stream: ${end.error.message}`;
      return this.exitReason();
    } catch (err) {
      this.ended = true;
      if (this.closing) return undefined;
      if (this.timedOut) throw new ConnectError('deadline_exceeded', `envd did not start the shell within ${START_TIMEOUT_MS / 1000} s`);
      // fetch says only "Failed to fetch" when the proxy is unreachable or refuses the CORS preflight.
      if (this.pid === undefined) throw err instanceof TypeError ? new ConnectError('unavailable', `envd at ${this.opts.baseUrl} did not answer (${err.message})`) : err;
      // The stream broke after the shell started: the sandbox was paused or killed, or the network went.
      return CONNECTION_LOST;
    } finally {
      clearTimeout(startTimer);
    }
  }

  /** Handles one message of the stream; true when it was the start event. */
  private onEvent(message: unknown): boolean {
    const ev = (message as { event?: Record<string, any> } | undefined)?.event;
    if (!ev) return false;
    if (ev.start) {
      this.pid = Number(ev.start.pid ?? 0);
      if (this.closing) this.stop();
      else {
        this.pump();
        this.sendSize();
      }
      return true;
    }
    if (typeof ev.data?.pty === 'string') this.opts.onOutput(base64ToBytes(ev.data.pty));
    else if (ev.end) this.exit = { status: ev.end.status, exitCode: ev.end.exitCode ?? ev.end.exit_code, error: ev.end.error };
    return false;
  }

  private exitReason(): EndReason {
    if (!this.exit) return 'the stream ended';
    const status = this.exit.status || `exit status ${this.exit.exitCode ?? 0}`;
    return `the shell ended (${status})`;
  }

  /** Types `bytes` into the terminal; keeps their order (one SendInput at a time, batching the rest). */
  write(bytes: Uint8Array): void {
    if (this.ended || this.closing) return;
    this.queue.push(bytes);
    this.pump();
  }

  private pump(): void {
    if (this.sending || this.pid === undefined || this.queue.length === 0) return;
    const batch = concat(this.queue.splice(0));
    this.sending = true;
    this.unary('SendInput', { process: { pid: this.pid }, input: { pty: bytesToBase64(batch) } })
      .catch((err: unknown) => {
        if (!this.ended && !this.closing) this.opts.onError(`Input was not sent: ${(err as Error).message}`);
      })
      .finally(() => {
        this.sending = false;
        this.pump();
      });
  }

  /** Asks for a new terminal size; sent once the shell runs, only when it changed. */
  resize(cols: number, rows: number): void {
    this.size = { cols, rows };
    this.sendSize();
  }

  private sendSize(): void {
    if (this.pid === undefined || this.ended || this.closing) return;
    const size = this.size;
    if (size.cols === this.sentSize.cols && size.rows === this.sentSize.rows) return;
    this.sentSize = size;
    this.unary('Update', { process: { pid: this.pid }, pty: { size } }).catch((err: unknown) => {
      if (!this.ended && !this.closing) this.opts.onError(`The terminal was not resized: ${(err as Error).message}`);
    });
  }

  /**
   * Ends the session: the stream stops and the shell is killed (once envd has named it), unless
   * `shouldKill` answers false.
   */
  close(shouldKill?: () => Promise<boolean>): void {
    if (this.closing) return;
    this.closing = true;
    this.shouldKill = shouldKill;
    // Before the start event there is no pid to kill: the stream runs on until it comes (onEvent).
    if (this.pid !== undefined || this.ended) this.stop();
  }

  private stop(): void {
    this.controller.abort();
    if (this.pid === undefined || this.ended) return;
    const pid = this.pid;
    const where = `the shell (pid ${pid}) at ${this.opts.baseUrl}`;
    (this.shouldKill ?? (() => Promise.resolve(true)))()
      .catch((err: unknown) => {
        console.warn(`terminal: could not tell whether to kill ${where}, killing it: ${(err as Error).message}`);
        return true;
      })
      .then((kill) => (kill ? this.unary('SendSignal', { process: { pid }, signal: 'SIGNAL_SIGKILL' }) : undefined))
      .catch((err: unknown) => {
        // Gone already (it exited as we closed): nothing left to kill.
        if (err instanceof ConnectError && err.code === 'not_found') return;
        console.warn(`terminal: could not kill ${where}: ${(err as Error).message}`);
      });
  }

  private unary(method: string, message: unknown): Promise<unknown> {
    return unaryCall(`${this.opts.baseUrl}/${PROCESS}/${method}`, message, {
      headers: this.headers(),
      signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
    });
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
