/**
 * One server-streaming Connect call over fetch, read as an async iterable of messages.
 * Three clocks can end it: the handshake deadline (until the caller marks the stream
 * started), the stream's own deadline (`timeoutMs`, also sent as Connect-Timeout-Ms so
 * the server enforces it too) and the caller's signal. `close()` ends it quietly.
 */
import { transportError } from '../api-client.ts';
import { readErrorBody } from '../bounded-body.ts';
import { ConnectError } from '../errors.ts';
import {
  EnvelopeReader, PROTOCOL_VERSION_HEADER, STREAM_CONTENT_TYPE, TIMEOUT_HEADER,
  connectErrorFromJson, decodeStreamEnvelope, encodeEnvelope,
} from './connect-protocol.ts';

export interface StreamCallOpts {
  headers: Record<string, string>;
  /** Deadline of the whole stream in ms; 0 means none. */
  timeoutMs: number;
  /** Deadline for the first message in ms; 0 means none. */
  handshakeTimeoutMs: number;
  signal?: AbortSignal;
  /** Builds the error for a non-2xx answer that is not a Connect error. */
  httpError: (status: number, body: string) => Error;
}

type AbortReason = 'closed' | 'deadline' | 'handshake' | 'signal';

export class RpcStream<T> implements AsyncIterable<T> {
  private readonly controller = new AbortController();
  private reason?: AbortReason;
  private readonly timers: ReturnType<typeof setTimeout>[] = [];
  private handshakeTimer?: ReturnType<typeof setTimeout>;
  private readonly messages: AsyncGenerator<T>;

  constructor(
    private readonly url: string,
    private readonly request: unknown,
    private readonly opts: StreamCallOpts,
  ) {
    this.messages = this.run();
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return this.messages;
  }

  /** Reads the next message; `undefined` when the stream ended. */
  async next(): Promise<T | undefined> {
    const r = await this.messages.next();
    return r.done ? undefined : r.value;
  }

  /** The stream is up: the handshake deadline no longer applies. */
  markStarted(): void {
    if (this.handshakeTimer) clearTimeout(this.handshakeTimer);
    this.handshakeTimer = undefined;
  }

  /** Stops the stream; iteration ends without an error. */
  close(): void {
    this.abort('closed');
  }

  private abort(reason: AbortReason): void {
    if (this.reason) return;
    this.reason = reason;
    this.clearTimers();
    this.controller.abort();
  }

  private clearTimers(): void {
    for (const t of this.timers) clearTimeout(t);
    this.markStarted();
  }

  private startClocks(): void {
    const { timeoutMs, handshakeTimeoutMs, signal } = this.opts;
    if (timeoutMs > 0) {
      const t = setTimeout(() => this.abort('deadline'), timeoutMs);
      t.unref?.();
      this.timers.push(t);
    }
    if (handshakeTimeoutMs > 0) {
      this.handshakeTimer = setTimeout(() => this.abort('handshake'), handshakeTimeoutMs);
      this.handshakeTimer.unref?.();
    }
    if (signal) {
      if (signal.aborted) this.abort('signal');
      else signal.addEventListener('abort', () => this.abort('signal'), { once: true });
    }
  }

  /** The error for an interrupted fetch or read; undefined when the caller closed the stream. */
  private interrupted(err: unknown): Error | undefined {
    switch (this.reason) {
      case 'closed': return undefined;
      case 'deadline': return new ConnectError('deadline_exceeded', `the stream ran longer than ${this.opts.timeoutMs} ms`);
      case 'handshake': return new ConnectError('canceled', `no answer within ${this.opts.handshakeTimeoutMs} ms`);
      case 'signal': return new ConnectError('canceled', 'the request was aborted');
      default: return transportError(err, `POST ${this.url}`);
    }
  }

  private async *run(): AsyncGenerator<T> {
    this.startClocks();
    const headers: Record<string, string> = {
      ...this.opts.headers,
      'Content-Type': STREAM_CONTENT_TYPE,
      [PROTOCOL_VERSION_HEADER]: '1',
    };
    if (this.opts.timeoutMs > 0) headers[TIMEOUT_HEADER] = String(this.opts.timeoutMs);
    try {
      let res: Response;
      try {
        res = await fetch(this.url, { method: 'POST', headers, body: encodeEnvelope(this.request), signal: this.controller.signal, redirect: 'manual' });
      } catch (err) {
        const e = this.interrupted(err);
        if (!e) return;
        throw e;
      }
      if (!res.ok || !res.body) {
        const text = await readErrorBody(res);
        throw connectErrorFromBody(text, res.status) ?? this.opts.httpError(res.status, text);
      }
      const reader = res.body.getReader();
      const envelopes = new EnvelopeReader();
      for (;;) {
        let chunk: { done: boolean; value?: Uint8Array };
        try {
          chunk = await reader.read();
        } catch (err) {
          const e = this.interrupted(err);
          if (!e) return;
          throw e;
        }
        if (chunk.done) break;
        for (const env of envelopes.push(chunk.value ?? new Uint8Array(0))) {
          const item = decodeStreamEnvelope<T>(env);
          if (item.kind === 'end') {
            if (item.error) throw item.error;
            return;
          }
          yield item.message;
        }
      }
      if (this.reason === 'closed') return;
      throw new ConnectError('unavailable', 'the connection closed before the stream ended');
    } finally {
      this.abort('closed');
    }
  }
}

function connectErrorFromBody(text: string, status: number): ConnectError | undefined {
  try {
    return connectErrorFromJson(JSON.parse(text), status);
  } catch {
    return undefined;
  }
}
