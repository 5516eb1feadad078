import type { Socket } from 'node:net';
import { SvcError, writeErrorOnSocket } from '@svc/common';
import { ExchangeGate } from './exchange-gate.ts';
import type { ConnectionFacts, ProxyDeps } from './proxy-deps.ts';
import { openTunnelUpstream } from './tunnel-upstream.ts';
import { upstreamFailure, type UpstreamTarget } from './upstream.ts';

/** Bytes a sandbox may send before its tunnel is open (kept, then sent on); beyond them reading pauses. */
const HELD_BYTES_MAX = 64 * 1024;
/** How long the sandbox has to read a final answer and hang up before its connection is closed. */
const LINGER_MS = 10_000;

/**
 * What the WebSocket upgrade and the CONNECT exchanges share (docs/egress.md "WebSocket and
 * CONNECT"): the sandbox's socket as node's http server hands it over, the answers written on it
 * raw, the upstream opened by openTunnelUpstream, the two sockets spliced with the bytes counted
 * and an idle timeout over both, and one request record written when the sandbox's side closes.
 */
export abstract class SocketExchange {
  protected readonly gate: ExchangeGate;
  /** The status the sandbox got; undefined until an answer was written (the record says 499 then). */
  protected status: number | undefined;
  /** The sandbox hung up (or reset) before the answer, or its socket closed. */
  protected left = false;
  /** The upstream while it is being talked to; destroyed should the sandbox leave first. */
  protected upstream: Socket | undefined;
  private held: Buffer[] = [];
  private heldBytes = 0;
  private holding = true;
  private relaying = false;
  private linger: NodeJS.Timeout | undefined;

  constructor(protected readonly deps: ProxyDeps, protected readonly conn: ConnectionFacts, protected readonly sandbox: Socket, head: Buffer, method: string, rawPath: string) {
    this.gate = new ExchangeGate(deps, conn, method, rawPath);
    // The lean server stopped watching this socket; the idle timeout here is the exchange's own.
    sandbox.setTimeout(0);
    sandbox.on('error', (err) => deps.logger.debug({ err: err.message, sandboxIp: conn.sandboxIp }, 'egress tunnel: the sandbox side failed'));
    sandbox.once('close', () => {
      this.left = true;
      clearTimeout(this.linger);
      if (!this.relaying) this.upstream?.destroy();
      this.gate.finish(this.status ?? 499);
    });
    if (head.length) this.keep(head);
    // Read on while the upstream is reached: early bytes are kept, and a hang-up is noticed.
    sandbox.on('data', this.onHeldData);
    sandbox.once('end', this.onHeldEnd);
    // Handed over paused (nothing the sandbox sent after the head is lost meanwhile): read on now.
    sandbox.resume();
  }

  private readonly onHeldData = (chunk: Buffer): void => {
    if (!this.holding) return; // answered: what the sandbox sends now goes nowhere
    this.keep(chunk);
    if (this.heldBytes > HELD_BYTES_MAX) this.sandbox.pause();
  };

  private readonly onHeldEnd = (): void => {
    // The sandbox gave up before the answer. After one it is the sandbox closing its side: let the answer's own end finish.
    if (this.status === undefined) this.sandbox.destroy();
  };

  private keep(chunk: Buffer): void {
    this.held.push(chunk);
    this.heldBytes += chunk.length;
  }

  /** Stops keeping the sandbox's bytes and returns what was kept. */
  private release(): Buffer {
    this.holding = false;
    this.sandbox.off('data', this.onHeldData);
    const out = Buffer.concat(this.held);
    this.held = [];
    this.heldBytes = 0;
    return out;
  }

  /** The upstream for `target`, or undefined when it failed (answered here) or the sandbox left meanwhile. */
  protected async open(target: UpstreamTarget, wrapTls: boolean): Promise<Socket | undefined> {
    let socket: Socket;
    try {
      socket = await openTunnelUpstream(this.deps, this.conn.sandboxIp, target, wrapTls);
    } catch (err) {
      this.fail(err, target);
      return undefined;
    }
    if (this.left) { socket.destroy(); return undefined; }
    this.gate.record.upstream_addr = `${target.ip}:${target.port}`;
    this.upstream = socket;
    return socket;
  }

  /** An upstream failure before the sandbox got an answer: the 502 or 504 of pooled requests. */
  protected fail(err: unknown, target: UpstreamTarget): void {
    const failure = upstreamFailure(err, target);
    this.deps.logger.debug({ host: target.host, ip: target.ip, port: target.port, failure: failure.failure, code: failure.code }, 'egress tunnel upstream failed');
    this.answer(failure.status, failure.message);
  }

  /** A final answer in svc's error form `{code, message}`; the connection ends after it. */
  protected answer(status: number, message: string): void {
    if (this.sandbox.destroyed || this.status !== undefined) { this.sandbox.destroy(); return; }
    const err = new SvcError(status, message);
    this.status = status;
    this.gate.record.bytes_out += Buffer.byteLength(JSON.stringify(err.toBody()));
    this.closeAfter();
    writeErrorOnSocket(this.sandbox, err);
  }

  /**
   * Starts a final answer the caller writes and ends: the sandbox's bytes are read and dropped
   * from now, so that its hang-up is seen, and the connection is closed at most LINGER_MS after
   * the answer was sent in full.
   */
  protected closeAfter(): void {
    this.release();
    this.sandbox.resume();
    this.sandbox.once('finish', () => { this.linger = setTimeout(() => this.sandbox.destroy(), LINGER_MS).unref(); });
  }

  /** The error that escaped an exchange: logged, and a 500 when the sandbox has had no answer yet. */
  internalError(err: unknown): void {
    this.deps.logger.error({ err, sandboxIp: this.conn.sandboxIp, method: this.gate.record.method, host: this.gate.record.host }, 'egress tunnel failed inside the proxy');
    this.upstream?.destroy();
    if (this.status === undefined && !this.sandbox.destroyed) this.answer(500, 'egress proxy internal error');
    else this.sandbox.destroy();
  }

  /**
   * Splices the sandbox and the upstream both ways, after `upstreamHead` (bytes the upstream sent
   * with its answer) and the bytes the sandbox sent early. A side's end is passed on (half-close);
   * once a side is closed the other is ended after what it still has to send, and nothing
   * flowing either way for ioTimeoutMs closes both. The record counts every byte.
   */
  protected relay(upstream: Socket, upstreamHead: Buffer): void {
    const { sandbox } = this;
    const record = this.gate.record;
    const ioTimeoutMs = this.deps.upstreams.tunnelSettings().ioTimeoutMs;
    const early = this.release();
    sandbox.off('end', this.onHeldEnd);
    this.relaying = true;
    let open = 2;
    const idle = setTimeout(() => {
      this.deps.logger.debug({ host: record.host, sandboxIp: this.conn.sandboxIp, ioTimeoutMs }, 'egress tunnel idle: closing both sides');
      sandbox.destroy();
      upstream.destroy();
    }, ioTimeoutMs).unref();
    const closed = (other: Socket) => () => {
      if (--open === 0) clearTimeout(idle);
      else endThenDestroy(other);
    };
    sandbox.once('close', closed(upstream));
    upstream.once('close', closed(sandbox));
    sandbox.on('data', (chunk: Buffer) => { record.bytes_in += chunk.length; idle.refresh(); });
    upstream.on('data', (chunk: Buffer) => { record.bytes_out += chunk.length; idle.refresh(); });
    if (early.length) { record.bytes_in += early.length; upstream.write(early); }
    if (upstreamHead.length) { record.bytes_out += upstreamHead.length; sandbox.write(upstreamHead); }
    // pipe, not stream.pipeline: a side's error must not destroy the other before it sent what it has.
    sandbox.pipe(upstream);
    upstream.pipe(sandbox);
  }
}

/** Ends a socket's sending side and closes it once what it had to send is out. */
export function endThenDestroy(socket: Socket): void {
  if (socket.destroyed) return;
  if (socket.writableFinished) { socket.destroy(); return; }
  socket.once('finish', () => socket.destroy());
  socket.end();
}
