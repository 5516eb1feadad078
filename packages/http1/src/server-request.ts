import type { Socket } from 'node:net';
import type { RequestHead } from './request-parser.ts';

/** How long, and how much, a refused request's body is read before its answer (then the connection closes). */
const DRAIN_MAX_BYTES = 256 * 1024 * 1024;
const DRAIN_MAX_MS = 10_000;

/**
 * A client's request on the lean server: its head, and its body as the bytes come. One consumer
 * reads the body (onData/onEnd); until it does, or while it pauses, the connection stops
 * reading, so a body never piles up in memory.
 */
export class ServerRequest {
  readonly method: string;
  readonly url: string;
  readonly httpVersionMinor: number;
  /** Flat [name, value, ...] as received. */
  readonly rawHeaders: string[];
  readonly hasBody: boolean;
  /** The body comes chunked (Transfer-Encoding), so it is framed again towards an upstream. */
  readonly chunked: boolean;
  /** The whole body arrived. */
  complete = false;
  /** The client went away before the body ended. */
  aborted = false;
  trailers: string[] | undefined;
  private dataCb: ((chunk: Buffer) => void) | undefined;
  private endCbs: Array<() => void> = [];
  private queued: Buffer[] | undefined;
  private paused = false;
  /** The body is being dropped (drain), so the connection may read it freely. */
  draining = false;
  private headersObject: Record<string, string | string[]> | undefined;

  constructor(head: RequestHead, readonly socket: Socket, private readonly flow: { pause(): void; resume(): void }) {
    this.method = head.method;
    this.url = head.target;
    this.httpVersionMinor = head.minor;
    this.rawHeaders = head.headers;
    this.hasBody = head.body !== 'none';
    this.chunked = head.body === 'chunked';
  }

  get remoteAddress(): string | undefined { return this.socket.remoteAddress; }

  /** The first value of a header, by its name in lower case. */
  header(lowerName: string): string | undefined {
    const h = this.rawHeaders;
    for (let i = 0; i < h.length; i += 2) {
      if (h[i].length === lowerName.length && h[i].toLowerCase() === lowerName) return h[i + 1];
    }
    return undefined;
  }

  /**
   * node's `headers` shape (lower-cased names; repeats joined by ", ", set-cookie a list), made
   * only when asked (tracing reads it), never on the plain forwarding path.
   */
  get headers(): Record<string, string | string[]> {
    if (this.headersObject) return this.headersObject;
    const out: Record<string, string | string[]> = {};
    for (let i = 0; i < this.rawHeaders.length; i += 2) {
      const name = this.rawHeaders[i].toLowerCase();
      const value = this.rawHeaders[i + 1];
      const had = out[name];
      if (name === 'set-cookie') out[name] = had === undefined ? [value] : [...(had as string[]), value];
      else out[name] = had === undefined ? value : `${had as string}, ${value}`;
    }
    return (this.headersObject = out);
  }

  /** Takes the body: each chunk to `onData`, then `onEnd` (at once when there is none, or it is all here). */
  read(onData: (chunk: Buffer) => void, onEnd: () => void): void {
    this.dataCb = onData;
    this.endCbs.push(onEnd);
    this.flush();
  }

  pause(): void {
    this.paused = true;
    this.flow.pause();
  }

  resume(): void {
    this.paused = false;
    this.flush();
  }

  /**
   * Reads and drops the rest of the body, then resolves: a refusal is answered once the client
   * has sent what it meant to send (answered at once, a `Connection: close` client would see its
   * upload reset instead of the answer). Resolves false when it gave up (too much, too long): the
   * connection must then close after the answer.
   */
  drain(): Promise<boolean> {
    if (this.complete || this.aborted) return Promise.resolve(!this.aborted);
    return new Promise((resolve) => {
      let seen = 0;
      const timer = setTimeout(() => resolve(false), DRAIN_MAX_MS);
      this.draining = true;
      this.read((chunk) => {
        seen += chunk.length;
        if (seen > DRAIN_MAX_BYTES) { clearTimeout(timer); resolve(false); }
      }, () => { clearTimeout(timer); resolve(!this.aborted); });
    });
  }

  // ---- fed by the connection ----

  /** @internal */
  push(chunk: Buffer): void {
    if (this.dataCb !== undefined && !this.paused && this.queued === undefined) { this.dataCb(chunk); return; }
    (this.queued ??= []).push(chunk);
    this.flow.pause();
  }

  /** @internal */
  end(trailers: string[] | undefined): void {
    this.trailers = trailers;
    this.complete = true;
    if (this.queued === undefined) this.ended();
  }

  /** @internal The client went away mid-body. */
  abort(): void {
    if (this.complete) return;
    this.aborted = true;
    this.queued = undefined;
    this.ended();
  }

  private flush(): void {
    if (this.dataCb === undefined || this.paused) return;
    const queued = this.queued;
    if (queued !== undefined) {
      while (queued.length > 0 && !this.paused) this.dataCb(queued.shift()!);
      if (queued.length > 0) return;
      this.queued = undefined;
    }
    if (this.complete || this.aborted) this.ended();
    else this.flow.resume();
  }

  private ended(): void {
    const cbs = this.endCbs;
    this.endCbs = [];
    for (const cb of cbs) cb();
  }
}
