import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import { ExchangeGate } from './exchange-gate.ts';
import { sandboxResponseHeaders, upstreamRequestHeaders, type InjectedHeader } from './headers.ts';
import { requestTarget, type RequestTarget } from './request-target.ts';
import { upstreamFailure, type UpstreamError, type UpstreamTarget } from './upstream.ts';
import type { ConnectionFacts, ProxyDeps } from './proxy-deps.ts';

/** Reset errors that mean a pooled keep-alive socket had been closed by the upstream meanwhile. */
const STALE_SOCKET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

/**
 * One request from a sandbox, docs/egress.md "How traffic reaches the proxy": identify the sandbox by its
 * address, decide by its rules before any upstream contact, inject on allow, forward with
 * streamed bodies, and write the audit records.
 */
export function handleEgressRequest(deps: ProxyDeps, conn: ConnectionFacts, req: IncomingMessage, res: ServerResponse): void {
  new Exchange(deps, conn, req, res).serve().catch((err: unknown) => {
    deps.logger.error({ err, sandboxIp: conn.sandboxIp, method: req.method, url: req.url }, 'egress request failed inside the proxy');
    if (!res.headersSent && !res.destroyed) sendJson(res, 500, 'egress proxy internal error');
    else res.destroy();
  });
}

class Exchange {
  private readonly gate: ExchangeGate;
  private readonly method: string;
  private target: RequestTarget | undefined;

  constructor(private readonly deps: ProxyDeps, private readonly conn: ConnectionFacts, private readonly req: IncomingMessage, private readonly res: ServerResponse) {
    this.method = (req.method ?? 'GET').toUpperCase();
    this.gate = new ExchangeGate(deps, conn, this.method, req.url ?? '');
    // 499 (nginx's "client closed request"): the sandbox left before the proxy answered.
    res.once('close', () => this.gate.finish(this.res.headersSent ? this.res.statusCode : 499));
  }

  async serve(): Promise<void> {
    const target = requestTarget(this.conn.scheme, this.req.url ?? '/', this.req.headers.host);
    if (typeof target === 'string') return this.answer(400, target);
    this.target = target;
    // Upgrades ("Connection: upgrade") go to upgrade-exchange.ts; a request that only names an
    // Upgrade comes here, and goes upstream as the ordinary request it is (Upgrade is hop-by-hop).
    const verdict = await this.gate.decide({ scheme: this.conn.scheme, port: target.port, host: target.host, method: this.method, path: target.path, ...(this.conn.sni ? { sni: this.conn.sni } : {}) });
    if (!verdict.allowed) return this.answer(verdict.status, verdict.message);
    this.forward(verdict.ip, verdict.inject);
  }

  private forward(ip: string, inject: InjectedHeader[]): void {
    const target = this.target as RequestTarget;
    const upstream: UpstreamTarget = { scheme: this.conn.scheme, host: target.host, ip, port: target.port };
    const record = this.gate.record;
    const headers = upstreamRequestHeaders(this.req.rawHeaders, inject);
    const hasBody = this.req.headers['transfer-encoding'] !== undefined || Number(this.req.headers['content-length'] ?? 0) > 0;
    let current: ClientRequest | undefined;
    let responded = false;
    this.res.once('close', () => { if (!this.res.writableFinished) current?.destroy(); });

    const attempt = (retry: boolean) => {
      const up = this.deps.upstreams.request(upstream, { method: this.method, path: target.path, headers }, this.deps.viaFor(this.conn.sandboxIp));
      current = up;
      up.on('response', (upRes) => {
        responded = true;
        record.upstream_status = String(upRes.statusCode ?? '');
        record.upstream_addr = `${ip}:${target.port}`;
        if (this.res.destroyed) { upRes.destroy(); return; }
        try {
          this.res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, sandboxResponseHeaders(upRes.rawHeaders));
        } catch (err) {
          // An answer node parsed but will not repeat (a status outside 100-599, say); an event handler must not throw.
          upRes.destroy();
          this.deps.logger.info({ err: (err as Error).message, host: target.host, status: upRes.statusCode }, 'egress upstream answer cannot be relayed');
          this.answer(502, `upstream ${target.host} sent an answer the proxy cannot relay: ${(err as Error).message}`);
          return;
        }
        upRes.on('data', (chunk: Buffer) => { record.bytes_out += chunk.length; });
        // pipe, not stream.pipeline: pipeline makes an AbortSignal per call, about 5% of the CPU here.
        // The sandbox leaving is handled by the close listener above (it destroys the request).
        upRes.pipe(this.res);
        upRes.once('close', () => {
          if (upRes.complete) return;
          this.deps.logger.debug({ host: target.host, sandboxIp: this.conn.sandboxIp }, 'egress upstream response cut short');
          this.res.destroy();
        });
        upRes.on('error', (err) => { this.deps.logger.debug({ err: err.message, host: target.host }, 'egress upstream response failed'); });
      });
      up.on('error', (err) => {
        if (this.res.destroyed) return; // the sandbox left first; its close destroyed this request
        // A pooled socket the upstream closed meanwhile: once more on a new one, when nothing can have been consumed.
        if (!retry && !responded && !hasBody && up.reusedSocket && STALE_SOCKET_CODES.has((err as NodeJS.ErrnoException).code ?? '')) return attempt(true);
        const failure: UpstreamError = upstreamFailure(err, upstream);
        if (responded || this.res.headersSent) { this.res.destroy(); return; }
        this.req.unpipe(up);
        this.deps.logger.debug({ host: target.host, ip, port: target.port, failure: failure.failure, code: failure.code }, 'egress upstream failed');
        this.answer(failure.status, failure.message);
      });
      if (hasBody && !retry) {
        this.req.on('data', (chunk: Buffer) => { record.bytes_in += chunk.length; });
        this.req.pipe(up);
      } else {
        up.end();
      }
    };
    attempt(false);
  }

  private answer(status: number, message: string): void {
    if (this.res.headersSent || this.res.destroyed) { this.res.destroy(); return; }
    this.gate.record.bytes_out += sendJson(this.res, status, message);
  }
}

/** svc's error body `{code, message}`; returns the body's length for the audit record. */
function sendJson(res: ServerResponse, status: number, message: string): number {
  const body = JSON.stringify({ code: status, message });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
  return Buffer.byteLength(body);
}
