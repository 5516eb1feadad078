import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '@svc/common';
import type { EgressAuditLevel, EgressInject, EgressRequestRecord, EgressRule, EgressScheme, EgressSecurityReason, SandboxEgressPolicy } from '@svc/contracts/egress';
import { auditTimestamp, type AuditLog } from './audit-log.ts';
import { decide, decideByAddress, transformFor, type RequestFacts } from './decide.ts';
import { countEgressRequest } from './egress-metrics.ts';
import { injectedHeaders, sandboxResponseHeaders, upstreamRequestHeaders, type InjectedHeader } from './headers.ts';
import { PlaceholderError, type PlaceholderResolver } from './placeholders.ts';
import { normalizeHost } from './host-match.ts';
import type { PolicyStore } from './policy-store.ts';
import { requestTarget, type RequestTarget } from './request-target.ts';
import { upstreamFailure, type UpstreamError, type Upstreams, type UpstreamTarget } from './upstream.ts';

/** What a request's connection tells the proxy: which sandbox, and the client side's TLS. */
export interface ConnectionFacts {
  scheme: EgressScheme;
  sandboxIp: string;
  sni?: string;
  /** The name the client's TLS certificate was made for (the SNI, else the original destination IP). */
  certName?: string;
  tlsVersion: string;
  cipher: string;
}

export interface ProxyDeps {
  store: PolicyStore;
  placeholders: PlaceholderResolver;
  audit: AuditLog;
  upstreams: Upstreams;
  logger: Logger;
}

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
  private readonly started = performance.now();
  private readonly record: EgressRequestRecord;
  private readonly method: string;
  private target: RequestTarget | undefined;
  private policy: SandboxEgressPolicy | undefined;
  private auditLevel: EgressAuditLevel = 'metadata';
  /** What the policy decided (svc_egress_requests_total); unset: no upstream could be read from the request. */
  private decision: 'allow' | 'deny' | undefined;

  constructor(private readonly deps: ProxyDeps, private readonly conn: ConnectionFacts, private readonly req: IncomingMessage, private readonly res: ServerResponse) {
    this.method = (req.method ?? 'GET').toUpperCase();
    this.record = {
      ts: auditTimestamp(),
      sandbox_ip: conn.sandboxIp,
      dst_ip: '',
      dst_port: 0,
      scheme: conn.scheme,
      host: '',
      method: this.method,
      path: req.url ?? '',
      status: 0,
      bytes_in: 0,
      bytes_out: 0,
      latency_ms: 0,
      tls_version: conn.tlsVersion,
      cipher: conn.cipher,
      upstream_status: '',
      upstream_addr: '',
    };
    res.once('close', () => this.finish());
  }

  async serve(): Promise<void> {
    const target = requestTarget(this.conn.scheme, this.req.url ?? '/', this.req.headers.host);
    if (typeof target === 'string') return this.answer(400, target);
    this.target = target;
    Object.assign(this.record, { host: target.host, dst_port: target.port, path: target.path });

    if (!this.deps.store.ready) {
      this.decision = 'deny';
      this.securityEvent('not_ready', '');
      return this.answer(403, 'egress denied: the proxy has not loaded the egress policies yet (not ready)');
    }
    const policy = this.deps.store.forAddress(this.conn.sandboxIp);
    if (!policy) {
      this.decision = 'deny';
      this.securityEvent('unknown_sandbox', '');
      return this.answer(403, `egress denied: no egress policy for the sandbox at ${this.conn.sandboxIp}`);
    }
    this.policy = policy;
    this.record.sandbox_id = policy.sandboxId;

    const facts: RequestFacts = { scheme: this.conn.scheme, port: target.port, host: target.host, method: this.method, path: target.path, ...(this.conn.sni ? { sni: this.conn.sni } : {}) };
    const decision = decide(policy, facts);
    this.decision = decision.verdict === 'allow' || decision.verdict === 'by_address' ? 'allow' : 'deny';
    switch (decision.verdict) {
      case 'deny':
        this.useRule(decision.rule);
        if (decision.reason === 'malformed_rule') this.securityEvent('malformed_rule', decision.rule.name, 'a deny rule carries inject (a configuration error): denied, and the inject dropped');
        return this.answer(403, `egress denied by rule ${decision.rule.name}`);
      case 'default_deny':
        this.securityEvent('default_deny', '');
        return this.answer(403, 'egress denied: no rule matched (default deny)');
      case 'by_address': {
        const ip = await this.resolve();
        if (ip === undefined) return;
        const verdict = decideByAddress(decision.fallback, ip);
        if (!verdict.allow) {
          this.decision = 'deny';
          this.record.dst_ip = ip;
          this.securityEvent('default_deny', '', `no rule matched; ${verdict.why}`);
          return this.answer(403, `egress denied: no rule matched and ${verdict.why}`);
        }
        // E2B's transforms grant nothing: they inject only into what the fallback allowed.
        const transform = transformFor(policy, target.host);
        const headers = transform ? await this.injectOrRefuse(`transform ${transform.host}`, transform.inject) : [];
        if (headers === undefined || this.refuseUpgrade()) return;
        return this.forward(ip, headers);
      }
      case 'allow':
        return this.allow(decision.rule);
    }
  }

  private async allow(rule: EgressRule): Promise<void> {
    this.useRule(rule);
    if (this.conn.scheme === 'https' && rule.action.inject?.length && !this.hostMatchesTls(rule.name)) return;
    if (this.refuseUpgrade()) return;
    const ip = await this.resolve();
    if (ip === undefined) return;
    const headers = await this.injectOrRefuse(rule.name, rule.action.inject ?? []);
    if (headers !== undefined) this.forward(ip, headers);
  }

  /**
   * The headers an inject adds, after its guard: on HTTPS the Host must be the name the client's
   * TLS verified, or the request is refused (undefined). Records that the inject fired.
   */
  private async injectOrRefuse(source: string, inject: EgressInject[]): Promise<InjectedHeader[] | undefined> {
    if (inject.length === 0) return [];
    if (this.conn.scheme === 'https' && !this.hostMatchesTls(source)) return undefined;
    let headers: InjectedHeader[];
    try {
      // Secrets and workload tokens named by placeholders, resolved for this request (docs/security.md).
      headers = await this.deps.placeholders.fill(this.policy!, injectedHeaders(inject));
    } catch (err) {
      if (!(err instanceof PlaceholderError)) throw err;
      this.decision = 'deny';
      this.securityEvent('placeholder_unresolved', source, err.message);
      this.answer(err.status, `egress ${err.status === 403 ? 'denied' : 'unavailable'}: ${err.message}; nothing was sent upstream`);
      return undefined;
    }
    this.record.injected = headers.map((h) => h.name);
    this.securityEvent('inject_fired', source, `injected ${this.record.injected.join(', ')}`);
    return headers;
  }

  /** The secret goes only where the client's TLS peer check pointed; a mismatch is answered 403 here. */
  private hostMatchesTls(source: string): boolean {
    const host = (this.target as RequestTarget).host;
    const tlsName = this.conn.sni ?? this.conn.certName ?? '';
    if (normalizeHost(tlsName) === host) return true;
    this.decision = 'deny';
    this.securityEvent('host_sni_mismatch', source, `Host ${host} and TLS server name ${tlsName || '(none)'} differ; nothing injected`);
    this.answer(403, `egress denied: the Host ${host} does not match the TLS server name ${tlsName || '(none)'}; the inject of ${source} runs only when they agree`);
    return false;
  }

  private useRule(rule: EgressRule): void {
    this.record.rule = rule.name;
    this.auditLevel = rule.action.audit ?? 'metadata';
  }

  /** WebSocket and other upgrades would need a tunnel after the policy check; not offered. */
  private refuseUpgrade(): boolean {
    if (this.req.headers.upgrade === undefined) return false;
    this.answer(501, `protocol upgrade to ${this.req.headers.upgrade} is not supported by the egress proxy`);
    return true;
  }

  private async resolve(): Promise<string | undefined> {
    const target = this.target as RequestTarget;
    try {
      return await this.deps.upstreams.resolve(target.host);
    } catch (err) {
      const failure = upstreamFailure(err, { scheme: this.conn.scheme, host: target.host, ip: '', port: target.port });
      this.answer(failure.status, failure.message);
      return undefined;
    }
  }

  private forward(ip: string, inject: InjectedHeader[]): void {
    const target = this.target as RequestTarget;
    const upstream: UpstreamTarget = { scheme: this.conn.scheme, host: target.host, ip, port: target.port };
    this.record.dst_ip = ip;
    const headers = upstreamRequestHeaders(this.req.rawHeaders, inject);
    const hasBody = this.req.headers['transfer-encoding'] !== undefined || Number(this.req.headers['content-length'] ?? 0) > 0;
    let current: ClientRequest | undefined;
    let responded = false;
    this.res.once('close', () => { if (!this.res.writableFinished) current?.destroy(); });

    const attempt = (retry: boolean) => {
      const up = this.deps.upstreams.request(upstream, { method: this.method, path: target.path, headers });
      current = up;
      up.on('response', (upRes) => {
        responded = true;
        this.record.upstream_status = String(upRes.statusCode ?? '');
        this.record.upstream_addr = `${ip}:${target.port}`;
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
        upRes.on('data', (chunk: Buffer) => { this.record.bytes_out += chunk.length; });
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
        this.req.on('data', (chunk: Buffer) => { this.record.bytes_in += chunk.length; });
        this.req.pipe(up);
      } else {
        up.end();
      }
    };
    attempt(false);
  }

  private answer(status: number, message: string): void {
    if (this.res.headersSent || this.res.destroyed) { this.res.destroy(); return; }
    this.record.bytes_out += sendJson(this.res, status, message);
  }

  private securityEvent(reason: EgressSecurityReason, rule: string, detail?: string): void {
    this.deps.audit.write({
      type: 'security_event',
      ts: auditTimestamp(),
      sandbox_ip: this.conn.sandboxIp,
      ...(this.policy ? { sandbox_id: this.policy.sandboxId } : {}),
      rule,
      reason,
      host: this.target?.host ?? '',
      ...(this.conn.sni ? { sni: this.conn.sni } : {}),
      method: this.method,
      path: this.target?.path ?? this.req.url ?? '',
      ...(detail ? { detail } : {}),
    });
  }

  private finish(): void {
    countEgressRequest(this.decision ?? 'invalid');
    // 499 (nginx's "client closed request"): the sandbox left before the proxy answered.
    this.record.status = this.res.headersSent ? this.res.statusCode : 499;
    this.record.latency_ms = Math.round(performance.now() - this.started);
    if (this.auditLevel !== 'none') this.deps.audit.write(this.record);
  }
}

/** svc's error body `{code, message}`; returns the body's length for the audit record. */
function sendJson(res: ServerResponse, status: number, message: string): number {
  const body = JSON.stringify({ code: status, message });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
  return Buffer.byteLength(body);
}
