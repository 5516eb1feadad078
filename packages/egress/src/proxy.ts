import type { ServerReply, ServerRequest } from '@svc/http1';
import { ExchangeGate, type Verdict } from './exchange-gate.ts';
import { sandboxResponseHeaders, upstreamRequestHeaders, type InjectedHeader } from './headers.ts';
import { requestTarget, type RequestTarget } from './request-target.ts';
import { ForwardExchange } from './forward-exchange.ts';
import type { PooledTarget } from './upstream.ts';
import type { ConnectionFacts, ProxyDeps } from './proxy-deps.ts';

/**
 * One request from a sandbox, docs/egress.md "How traffic reaches the proxy": identify the sandbox by its
 * address, decide by its rules before any upstream contact, inject on allow, forward with
 * streamed bodies, and write the audit records.
 */
export function handleEgressRequest(deps: ProxyDeps, conn: ConnectionFacts, req: ServerRequest, res: ServerReply): void {
  try {
    new Exchange(deps, conn, req, res).serve()?.catch((err: unknown) => failedInside(deps, conn, req, res, err));
  } catch (err) {
    failedInside(deps, conn, req, res, err);
  }
}

/** A bug in the proxy while it served a request: logged, and a 500 if the answer has not begun. */
function failedInside(deps: ProxyDeps, conn: ConnectionFacts, req: ServerRequest, res: ServerReply, err: unknown): void {
  deps.logger.error({ err, sandboxIp: conn.sandboxIp, method: req.method, path: req.url?.split('?')[0] }, 'egress request failed inside the proxy');
  if (!res.headersSent && !res.destroyed) sendJson(res, 500, 'egress proxy internal error');
  else res.destroy();
}

class Exchange {
  private readonly gate: ExchangeGate;
  private readonly method: string;
  private target: RequestTarget | undefined;

  constructor(private readonly deps: ProxyDeps, private readonly conn: ConnectionFacts, private readonly req: ServerRequest, private readonly res: ServerReply) {
    // As sent, not upper-cased: methods are case-sensitive (RFC 9110 9.1), and the answer to the
    // sandbox is framed by its own method (a HEAD's has no body), so the upstream must get that
    // very method: a `head` sent up as HEAD came back as a Content-Length without a body, which
    // desynced the sandbox's connection. The rules still match methods case-insensitively (decide.ts).
    this.method = req.method;
    this.gate = new ExchangeGate(deps, conn, this.method, req.url);
    // 499 (nginx's "client closed request"): the sandbox left before the proxy answered.
    res.onClose(() => this.gate.finish(this.res.headersSent ? this.res.statusCode : 499));
  }

  /** A promise only when the verdict had to wait (a DNS lookup, a placeholder): exchange-gate.ts decide. */
  serve(): Promise<void> | undefined {
    const target = requestTarget(this.conn.scheme, this.req.url, this.req.header('host'));
    if (typeof target === 'string') {
      this.answer(400, target);
      return undefined;
    }
    this.target = target;
    // Upgrades ("Connection: upgrade") go to upgrade-exchange.ts; a request that only names an
    // Upgrade comes here, and goes upstream as the ordinary request it is (Upgrade is hop-by-hop).
    const verdict = this.gate.decide({ scheme: this.conn.scheme, port: target.port, host: target.host, method: this.method, path: target.path, ...(this.conn.sni ? { sni: this.conn.sni } : {}) });
    if (verdict instanceof Promise) return verdict.then((v) => this.act(v));
    this.act(verdict);
    return undefined;
  }

  private act(verdict: Verdict): void {
    if (!verdict.allowed) return this.answer(verdict.status, verdict.message);
    this.forward(verdict.ip, verdict.inject);
  }

  private forward(ip: string, inject: InjectedHeader[]): void {
    const target = this.target as RequestTarget;
    // The sandbox is part of the pool key (upstream.ts PooledTarget): no connection is shared with another.
    const sandbox = `${this.conn.sandboxIp}/${this.gate.record.sandbox_id ?? ''}`;
    const upstream: PooledTarget = { scheme: this.conn.scheme, host: target.host, ip, port: target.port, sandbox };
    new ForwardExchange(this.deps, this.req, this.res, upstream, this.deps.viaFor(this.conn.sandboxIp), this.gate.record, (status, message) => this.answer(status, message)).start({
      method: this.method,
      path: target.path,
      headers: upstreamRequestHeaders(this.req.rawHeaders, inject, target.hostHeader),
      hasBody: this.req.hasBody,
      chunkedBody: this.req.chunked,
    });
  }

  private answer(status: number, message: string): void {
    if (this.res.headersSent || this.res.destroyed) { this.res.destroy(); return; }
    this.gate.record.bytes_out += sendJson(this.res, status, message);
  }
}

/** svc's error body `{code, message}`; returns the body's length for the audit record. */
function sendJson(res: ServerReply, status: number, message: string): number {
  const body = JSON.stringify({ code: status, message });
  const length = Buffer.byteLength(body);
  res.writeHead(status, undefined, ['content-type', 'application/json', 'content-length', String(length)]);
  res.end(body);
  return length;
}
