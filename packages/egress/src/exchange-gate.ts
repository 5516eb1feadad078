import type { EgressAuditLevel, EgressFallback, EgressInject, EgressRule, SandboxEgressPolicy } from '@svc/contracts/egress';
import type { EgressRequestRecord, EgressSecurityReason } from '@svc/contracts/egress-audit';
import { auditTimestamp } from './audit-log.ts';
import { connectRefusal } from './connect-refusal.ts';
import { decide, decideByAddress, fallbackAllowsNothing, transformFor, type RequestFacts, type TunnelDenial } from './decide.ts';
import { countEgressRequest } from './egress-metrics.ts';
import { injectedHeaders, type InjectedHeader } from './headers.ts';
import { normalizeHost } from './host-match.ts';
import { PlaceholderError } from './placeholders.ts';
import type { ConnectionFacts, ProxyDeps } from './proxy-deps.ts';
import { upstreamFailure } from './upstream.ts';

/** What the policy says of one exchange: where to go and what to add, or the answer that refuses it. */
export type Verdict =
  | { allowed: true; ip: string; inject: InjectedHeader[] }
  | { allowed: false; status: number; message: string };

/** What a deny rule that carries inject (a configuration error the checks refuse) did, should one arrive anyway. */
const MALFORMED_DENY = 'a deny rule carries inject (a configuration error): denied, and the inject dropped';

/**
 * The policy and audit side of one exchange from a sandbox (a request, a WebSocket upgrade or a
 * CONNECT), docs/egress.md: the sandbox found by its address, its rules decided before any
 * upstream contact, the by-address fallback, the Host/SNI guard and the inject; the request
 * record, written once when the exchange closes, and the security events.
 */
export class ExchangeGate {
  readonly record: EgressRequestRecord;
  private readonly started = performance.now();
  private policy: SandboxEgressPolicy | undefined;
  private facts: RequestFacts | undefined;
  private auditLevel: EgressAuditLevel = 'metadata';
  /** What the policy decided (svc_egress_requests_total); unset: no upstream could be read from the request. */
  private decision: 'allow' | 'deny' | undefined;
  private finished = false;

  constructor(private readonly deps: ProxyDeps, private readonly conn: ConnectionFacts, private readonly method: string, private readonly rawPath: string) {
    this.record = {
      ts: auditTimestamp(),
      sandbox_ip: conn.sandboxIp,
      dst_ip: '',
      dst_port: 0,
      scheme: conn.scheme,
      host: '',
      method,
      path: rawPath,
      status: 0,
      bytes_in: 0,
      bytes_out: 0,
      latency_ms: 0,
      tls_version: conn.tlsVersion,
      cipher: conn.cipher,
      upstream_status: '',
      upstream_addr: '',
    };
  }

  /**
   * Decides the exchange and, when it is allowed, resolves the upstream and fills the inject.
   * `opaque`: a tunnel whose bytes the proxy does not read (CONNECT), so that an inject could not
   * be added; a rule or transform that injects then refuses it rather than letting the host get
   * requests without the credential the operator expects.
   *
   * The verdict comes without a promise when nothing needs waiting for (a refusal, or an allow
   * without inject to a known address: the common request), since each await is a turn of the
   * microtask queue and a promise on every proxied request.
   */
  decide(facts: RequestFacts, opaque = false): Verdict | Promise<Verdict> {
    this.facts = facts;
    const record = this.record;
    record.scheme = facts.scheme;
    record.host = facts.host;
    record.dst_port = facts.port;
    record.path = facts.path;
    if (!this.deps.store.ready) {
      this.decision = 'deny';
      this.securityEvent('not_ready', '');
      return refused(403, 'egress denied: the proxy has not loaded the egress policies yet (not ready)');
    }
    if (this.deps.platform?.listed === false) {
      this.decision = 'deny';
      this.securityEvent('not_ready', '', 'the master\'s list of the platform\'s addresses is not read yet');
      return refused(403, 'egress denied: the proxy has not read the platform\'s addresses from the master yet (not ready)');
    }
    const policy = this.deps.store.forAddress(this.conn.sandboxIp);
    if (!policy) {
      this.decision = 'deny';
      this.securityEvent('unknown_sandbox', '');
      return refused(403, `egress denied: no egress policy for the sandbox at ${this.conn.sandboxIp}`);
    }
    this.policy = policy;
    this.record.sandbox_id = policy.sandboxId;

    const decision = decide(policy, facts);
    this.decision = decision.verdict === 'allow' || decision.verdict === 'by_address' ? 'allow' : 'deny';
    switch (decision.verdict) {
      case 'deny':
        this.useRule(decision.rule);
        // One event for one refusal: a tunnel's says both why it was refused and that the rule is malformed.
        if (decision.tunnel) return this.refuseTunnel(decision.rule, decision.tunnel, decision.reason === 'malformed_rule');
        if (decision.reason === 'malformed_rule') this.securityEvent('malformed_rule', decision.rule.name, MALFORMED_DENY);
        else this.record.reason = 'deny_rule';
        return refused(403, `egress denied by rule ${decision.rule.name}`);
      case 'default_deny':
        this.securityEvent('default_deny', '');
        return refused(403, 'egress denied: no rule matched (default deny)');
      case 'by_address':
        return this.byAddress(policy, decision.fallback, opaque);
      case 'allow':
        return this.allow(decision.rule, opaque);
    }
  }

  /** No rule matched, and the policy's fallback decides by the address the host resolves to. */
  private byAddress(policy: SandboxEgressPolicy, fallback: EgressFallback, opaque: boolean): Verdict | Promise<Verdict> {
    const nothing = fallbackAllowsNothing(fallback);
    if (nothing) {
      this.decision = 'deny';
      this.securityEvent('default_deny', '', `no rule matched; ${nothing} (the host was not looked up)`);
      return refused(403, `egress denied: no rule matched and ${nothing}`);
    }
    return this.resolveByAddress(policy, fallback, opaque);
  }

  private async resolveByAddress(policy: SandboxEgressPolicy, fallback: EgressFallback, opaque: boolean): Promise<Verdict> {
    const ip = await this.resolve();
    if (typeof ip !== 'string') return ip;
    const platform = this.platformRefusal(ip);
    if (platform) return platform;
    const verdict = decideByAddress(fallback, ip);
    if (!verdict.allow) {
      this.decision = 'deny';
      this.record.dst_ip = ip;
      this.securityEvent('default_deny', '', `no rule matched; ${verdict.why}`);
      return refused(403, `egress denied: no rule matched and ${verdict.why}`);
    }
    // E2B's transforms grant nothing: they inject only into what the fallback allowed.
    const transform = transformFor(policy, this.facts!.host);
    if (!transform) return this.allowed(ip, []);
    const source = `transform ${transform.host}`;
    // E2B's transforms name no scheme: they inject over https only.
    const cleartext = this.cleartextInject(source, false);
    if (cleartext) return cleartext;
    if (opaque) return this.refuseOpaque(source);
    const headers = await this.injectOrRefuse(source, transform.inject);
    return Array.isArray(headers) ? this.allowed(ip, headers) : headers;
  }

  private allow(rule: EgressRule, opaque: boolean): Verdict | Promise<Verdict> {
    this.useRule(rule);
    const inject = rule.action.inject ?? [];
    const cleartext = inject.length ? this.cleartextInject(rule.name, rule.match.scheme === 'http') : undefined;
    if (cleartext) return cleartext;
    if (opaque && inject.length) return this.refuseOpaque(rule.name);
    // The guard before the lookup: a mismatch contacts nobody, not even DNS.
    const mismatch = inject.length ? this.hostTlsMismatch(rule.name) : undefined;
    if (mismatch) return mismatch;
    // Known addresses (an IP literal, an override, a fresh DNS answer) and a rule without inject
    // take no await.
    const ip = this.deps.upstreams.knownAddress(this.facts!.host);
    if (ip !== undefined && inject.length === 0) return this.platformRefusal(ip) ?? this.allowed(ip, []);
    return this.resolveAndInject(rule, inject, ip);
  }

  private async resolveAndInject(rule: EgressRule, inject: EgressInject[], known: string | undefined): Promise<Verdict> {
    const ip = known ?? await this.resolve();
    if (typeof ip !== 'string') return ip;
    const platform = this.platformRefusal(ip);
    if (platform) return platform;
    if (inject.length === 0) return this.allowed(ip, []);
    const headers = await this.injectOrRefuse(rule.name, inject);
    return Array.isArray(headers) ? this.allowed(ip, headers) : headers;
  }

  private allowed(ip: string, inject: InjectedHeader[]): Verdict {
    this.record.dst_ip = ip;
    return { allowed: true, ip, inject };
  }

  /**
   * The refusal of an upstream address on the platform itself, whatever the rules say
   * (platform-guard.ts); undefined when it is not one. Asked as soon as the address is known,
   * before an inject is filled: nothing is resolved from the vault for a request that goes nowhere.
   */
  private platformRefusal(ip: string): Verdict | undefined {
    // A sandbox's own SOCKS5 proxy opens the connection on its side of the world, not the host's:
    // there only what means the platform from anywhere (metadata, its listed endpoints) is refused.
    const throughOwnProxy = this.deps.viaFor(this.conn.sandboxIp)?.fromSandbox;
    const refusal = throughOwnProxy ? this.deps.platform?.refusalThroughSandboxProxy(ip, this.facts!.port) : this.deps.platform?.refusal(ip, this.facts!.port);
    if (!refusal) return undefined;
    this.decision = 'deny';
    const { host, port } = this.facts!;
    const what = host === ip ? `${ip}:${port}` : `${host} (${ip}:${port})`;
    this.securityEvent('platform_address', this.record.rule ?? '', `${what}: ${ip} ${refusal}; nothing was contacted`);
    return refused(403, `egress denied: ${what} is the platform's own: ${ip} ${refusal}; the egress proxy never connects there for a sandbox, whatever the rules say`);
  }

  /**
   * An inject adds credentials, which go only over https unless the rule names scheme http
   * itself (docs/egress.md "Rules"): a rule or E2B transform without a scheme also matches the
   * plain-http port the node steers, and `http://api.openai.com/` sent the key in cleartext. The
   * request is refused, neither sent with the credential nor quietly without it.
   */
  private cleartextInject(source: string, httpNamed: boolean): Verdict | undefined {
    if (this.facts!.scheme !== 'http' || httpNamed) return undefined;
    this.decision = 'deny';
    const host = this.facts!.host;
    this.securityEvent('inject_over_http', source, `${source} injects credentials, and the request to ${host} is plain http; nothing was contacted`);
    return refused(403, `egress denied: ${source} injects credentials only over https, and this request to ${host} is plain http; send it to https://${host}/ (or name scheme http in the rule to send the credential in cleartext)`);
  }

  /**
   * A tunnel a deny rule holds for: the answer and a connect_refused event name the host, port
   * and why, since a rule for one path or method refuses the whole tunnel (decide.ts).
   */
  private refuseTunnel(rule: EgressRule, how: TunnelDenial, malformed: boolean): Verdict {
    const why = connectRefusal(rule, how, this.facts!.host, this.facts!.port);
    this.securityEvent('connect_refused', rule.name, `${why}; nothing was contacted${malformed ? `; and ${MALFORMED_DENY}` : ''}`);
    return refused(403, `egress denied: ${why}`);
  }

  /** A tunnel the proxy cannot add the inject to is refused: docs/egress.md "WebSocket and CONNECT". */
  private refuseOpaque(source: string): Verdict {
    this.decision = 'deny';
    this.securityEvent('connect_refused', source, 'the rule injects headers, which an opaque CONNECT tunnel cannot carry; nothing was contacted');
    return refused(403, `egress denied: ${source} injects headers, which the proxy cannot add inside a ${this.method} tunnel; send the request itself (no explicit proxy) so that the egress proxy can add them`);
  }

  /**
   * The headers an inject adds, after its guard: on HTTPS the Host must be the name the client's
   * TLS verified, or the exchange is refused. Records that the inject fired.
   */
  private async injectOrRefuse(source: string, inject: EgressInject[]): Promise<InjectedHeader[] | Verdict> {
    if (inject.length === 0) return [];
    const mismatch = this.hostTlsMismatch(source);
    if (mismatch) return mismatch;
    let headers: InjectedHeader[];
    try {
      // Secrets and workload tokens named by placeholders, resolved for this exchange (docs/security.md).
      headers = await this.deps.placeholders.fill(this.policy!, injectedHeaders(inject));
    } catch (err) {
      if (!(err instanceof PlaceholderError)) throw err;
      this.decision = 'deny';
      this.securityEvent('placeholder_unresolved', source, err.message);
      return refused(err.status, `egress ${err.status === 403 ? 'denied' : 'unavailable'}: ${err.message}; nothing was sent upstream`);
    }
    this.record.injected = headers.map((h) => h.name);
    this.securityEvent('inject_fired', source, `injected ${this.record.injected.join(', ')}`);
    return headers;
  }

  /**
   * The secret goes only where the client's TLS peer check pointed; a mismatch is the refusal
   * returned. `facts.host` is the Host that goes upstream: an absolute-form request's authority
   * replaces the sandbox's Host header (request-target.ts), so this compares what is sent.
   */
  private hostTlsMismatch(source: string): Verdict | undefined {
    const facts = this.facts!;
    if (facts.scheme !== 'https') return undefined;
    const tlsName = this.conn.sni ?? this.conn.certName ?? '';
    if (normalizeHost(tlsName) === facts.host) return undefined;
    this.decision = 'deny';
    this.securityEvent('host_sni_mismatch', source, `Host ${facts.host} and TLS server name ${tlsName || '(none)'} differ; nothing injected`);
    return refused(403, `egress denied: the Host ${facts.host} does not match the TLS server name ${tlsName || '(none)'}; the inject of ${source} runs only when they agree`);
  }

  private useRule(rule: EgressRule): void {
    this.record.rule = rule.name;
    this.auditLevel = rule.action.audit ?? 'metadata';
  }

  private async resolve(): Promise<string | Verdict> {
    const { host, port, scheme } = this.facts!;
    try {
      // Counted against the sandbox: it may have only a few lookups running (dns-cache.ts).
      return await this.deps.upstreams.resolve(host, this.conn.sandboxIp);
    } catch (err) {
      const failure = upstreamFailure(err, { scheme, host, ip: '', port });
      return refused(failure.status, failure.message);
    }
  }

  securityEvent(reason: EgressSecurityReason, rule: string, detail?: string): void {
    // Every reason but a fired inject is a refusal: the exchange's own record says which.
    if (reason !== 'inject_fired') this.record.reason = reason;
    this.deps.audit.write({
      type: 'security_event',
      ts: auditTimestamp(),
      sandbox_ip: this.conn.sandboxIp,
      ...(this.policy ? { sandbox_id: this.policy.sandboxId } : {}),
      rule,
      reason,
      host: this.facts?.host ?? '',
      ...(this.conn.sni ? { sni: this.conn.sni } : {}),
      method: this.method,
      path: this.facts?.path ?? this.rawPath,
      ...(detail ? { detail } : {}),
    });
  }

  /** Writes the request record once, with the status the sandbox got (499: it left before any answer). */
  finish(status: number): void {
    if (this.finished) return;
    this.finished = true;
    countEgressRequest(this.decision ?? 'invalid');
    this.record.status = status;
    this.record.latency_ms = Math.round(performance.now() - this.started);
    if (this.auditLevel !== 'none') this.deps.audit.write(this.record);
  }
}

function refused(status: number, message: string): Verdict {
  return { allowed: false, status, message };
}
