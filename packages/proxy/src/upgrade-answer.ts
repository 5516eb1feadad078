import type { Socket } from 'node:net';
import { ResponseParseError, ResponseParser, ServerReply, type ServerRequest, type UpstreamConnectionError } from '@svc/http1';
import { filterResponseHeaders } from './headers.ts';

/** The most bytes of answer heads (informational ones included) read before the final one. */
const MAX_ANSWER_HEADS = 64 * 1024;
const CRLFCRLF = Buffer.from('\r\n\r\n');
/** A client that never closes its side after a relayed refusal keeps its socket this long at most. */
const CLOSE_GRACE_MS = 5_000;

export interface UpgradeAnswerEvents {
  /** A 101: `bytes` are its head and what followed it, for the client; the connection is a tunnel now. */
  switched(bytes: Buffer): void;
  /** Nothing of an answer reached the client (none came in time, a malformed one, a failed connection). */
  failed(err: UpstreamConnectionError): void;
}

/**
 * Reads the sandbox's answer to an upgrade request, the client's connection left paused
 * meanwhile. A 101 hands both over as a tunnel; any other answer is relayed as an ordinary
 * response, framed by the proxy, and the client's connection closes after it: were it piped on,
 * a sandbox answering 200 would get the client's next requests on that connection (other users'
 * behind a shared load balancer, their tokens included) as tunnelled bytes.
 */
export class UpgradeAnswer {
  private buffered: Buffer | undefined;
  private parser: ResponseParser | undefined;
  private reply: ServerReply | undefined;
  private over = false;

  constructor(
    private readonly req: ServerRequest,
    private readonly client: Socket,
    private readonly upstream: Socket,
    /** The answer's limit: this long without a byte either way fails it. */
    private readonly idleMs: number,
    private readonly ev: UpgradeAnswerEvents,
  ) {
    upstream.setTimeout(idleMs);
    upstream.on('timeout', this.onTimeout);
    upstream.on('data', this.onData);
    upstream.on('end', this.onEnd);
    upstream.on('error', this.onError);
  }

  private readonly onData = (chunk: Buffer): void => {
    if (this.parser !== undefined) { this.relay(chunk); return; }
    const buf = this.buffered === undefined ? chunk : Buffer.concat([this.buffered, chunk]);
    const head = finalHead(buf);
    if (head === undefined) {
      if (buf.length > MAX_ANSWER_HEADS) this.fail(new ResponseParseError('the answer to an upgrade has too long a head'));
      else this.buffered = buf;
      return;
    }
    this.buffered = undefined;
    if (head.status === 101) {
      this.stop();
      this.ev.switched(head.start === 0 ? buf : buf.subarray(head.start));
      return;
    }
    this.parser = new ResponseParser({
      onHead: (status, text, headers) => this.relayHead(status, text, headers),
      onBody: (body) => this.relayBody(body),
      onComplete: (trailers) => {
        this.stop();
        this.upstream.destroy();
        this.reply!.end(undefined, trailers);
      },
    });
    this.parser.expect(this.req.method === 'HEAD');
    this.relay(buf.subarray(head.start));
  };

  private relay(chunk: Buffer): void {
    try {
      this.parser!.execute(chunk);
    } catch (err) {
      this.fail(err as UpstreamConnectionError);
    }
  }

  /** Throws InvalidHeaderError for a head that cannot be relayed: the parser's caller fails the answer. */
  private relayHead(status: number, text: string, headers: string[]): void {
    const reply = new ServerReply(this.req, this.client, { replied: () => this.closeClient() }, false, 0);
    reply.writeHead(status, text || undefined, filterResponseHeaders(headers));
    this.reply = reply;
  }

  private relayBody(body: Buffer): void {
    if (this.reply!.write(body)) return;
    this.upstream.pause();
    this.reply!.onceDrain(() => this.upstream.resume());
  }

  private closeClient(): void {
    const client = this.client;
    client.end();
    setTimeout(() => client.destroy(), CLOSE_GRACE_MS).unref();
  }

  private readonly onEnd = (): void => {
    // A body that ends with the connection ends here; any other is cut short.
    if (this.parser?.eof()) return;
    this.fail(Object.assign(new Error('the sandbox closed the connection before its answer to an upgrade ended'), { code: 'ECONNRESET' }));
  };

  private readonly onError = (err: UpstreamConnectionError): void => { this.fail(err); };

  private readonly onTimeout = (): void => {
    this.fail(Object.assign(new Error('upstream idle timeout'), { code: 'ETIMEDOUT', timeout: 'io' as const, timeoutMs: this.idleMs }));
  };

  private fail(err: UpstreamConnectionError): void {
    if (this.over) return;
    this.stop();
    this.upstream.destroy();
    // Part of the answer went out already: the client learns of the failure by the close.
    if (this.reply?.headersSent) this.client.destroy();
    else this.ev.failed(err);
  }

  /** The answer is over or handed on: the upstream's events are no longer this reader's. */
  private stop(): void {
    this.over = true;
    const up = this.upstream;
    up.setTimeout(0);
    up.off('timeout', this.onTimeout);
    up.off('data', this.onData);
    up.off('end', this.onEnd);
    up.off('error', this.onError);
  }
}

/**
 * The first head in `buf` that is not informational (1xx other than 101 are skipped, as a client
 * skips them): where it starts and its status (-1 for a status line that is none, which the
 * response parser then refuses). Undefined until such a head arrived whole.
 */
function finalHead(buf: Buffer): { start: number; status: number } | undefined {
  let start = 0;
  for (;;) {
    const end = buf.indexOf(CRLFCRLF, start);
    if (end < 0) return undefined;
    const m = /^HTTP\/1\.[01] (\d{3})(?: |\r|$)/.exec(buf.toString('latin1', start, Math.min(end + 1, start + 14)));
    const status = m === null ? -1 : Number(m[1]);
    if (status < 100 || status >= 200 || status === 101) return { start, status };
    start = end + 4;
  }
}
