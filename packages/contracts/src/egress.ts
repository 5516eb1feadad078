/**
 * The egress proxy's contract (docs/egress.md): the rule form of docs/egress.md "Rules", the
 * per-sandbox policy the master pushes, the checks every side runs on rules (SDK, master, proxy),
 * and the admin API. The audit log's records are egress-audit.ts's.
 *
 * Admin routes (port 9091 or SVC_EGRESS_ADMIN_PORT, loopback by default; EGRESS_ADMIN_ROUTES in
 * egress-routes.ts, with their clients); all
 * but healthz need X-Svc-Admin-Token equal to `egress.admin_token` (403 otherwise, 503 when the
 * proxy has none; before the body is looked at):
 *   GET    /admin/healthz                      → EgressHealth (no token: it shows no policy)
 *   GET    /admin/policies                     → SandboxEgressPolicyView[] (secrets redacted)
 *   GET    /admin/policies/:sandboxId          → SandboxEgressPolicyView | 404
 *   PUT    /admin/policies/:sandboxId          → SandboxEgressPolicyView (body SandboxEgressPolicy; replaces)
 *   DELETE /admin/policies/:sandboxId          → 204 (idempotent)
 * The master's routes the proxy calls (the same token):
 *   GET    /internal/v1/egress/policies?nodeId → SandboxEgressPolicy[] (secrets included), at start
 *   GET    /internal/v1/egress/platform-addresses → PlatformAddresses, every 30 s: where the proxy
 *          never connects for a sandbox (docs/egress.md "What the proxy never connects to")
 */
import { isIpv4, type TaskStats } from '@svc/common';

export const EGRESS_DEFAULTS = {
  httpPort: 8080,
  httpsPort: 8443,
  adminPort: 9091,
  connectTimeoutMs: 10_000,
  /** Upstream read and send timeouts (docs/egress.md "Known limits"). */
  ioTimeoutMs: 2 * 60 * 60 * 1000,
  maxTuplesPerHost: 8,
  /** Host names (not wildcards) in one sandbox's allowOut, whose addresses its node learns and allows. */
  maxAllowOutHosts: 64,
} as const;

export const EGRESS_ADMIN_TOKEN_HEADER = 'x-svc-admin-token';

export type EgressScheme = 'http' | 'https';
export type EgressAuditLevel = 'none' | 'metadata' | 'full';

export interface EgressMatch {
  scheme?: EgressScheme;
  /** Requires scheme. */
  port?: number;
  /** TLS server name; `*.x` matches any subdomain of x at any depth, never x itself. */
  sni?: string;
  /** Host header without its port; the same wildcard form; case-insensitive. */
  host?: string;
  /** Any of these methods. */
  method?: string[];
  /** The request URI: exact, or a prefix when it ends in one `*`. */
  path?: string;
}

export interface EgressInject {
  header: string;
  /** Contains `${SECRET}`; default `${SECRET}`. */
  format?: string;
  /** Operator-side; never reaches the sandbox, never logged, redacted from every read. */
  secret: string;
}

export interface EgressAction {
  allow: boolean;
  /** Default metadata; full behaves like metadata. */
  audit?: EgressAuditLevel;
  inject?: EgressInject[];
}

export interface EgressRule {
  name: string;
  match: EgressMatch;
  action: EgressAction;
}

/**
 * E2B's layer-3 lists, for a request through the proxy that no rule matched (E2B's allowOut
 * names hosts besides addresses). The upstream's address decides: allowOut CIDRs first, then
 * denyOut, then allowInternetAccess. Absent on a policy: the default deny of docs/egress.md "Rules".
 * (A type, not an interface, as SandboxEgressPolicy: the admin route's body schema takes it.)
 */
export type EgressFallback = {
  allowInternetAccess: boolean;
  /** IPv4 CIDRs. */
  allowOut: string[];
  /** IPv4 CIDRs. */
  denyOut: string[];
};

/**
 * What the proxy enforces for one sandbox, found by its source address. A type, not an
 * interface: it is what the PUT admin route's body schema (EgressPolicyBody) takes.
 */
export type SandboxEgressPolicy = {
  sandboxId: string;
  /** The sandbox's team: whose secrets its `${e2b.secrets.NAME}` placeholders name (docs/security.md). */
  teamId?: string;
  /** The sandbox's IPv4 address: the source of its traffic. */
  address: string;
  rules: EgressRule[];
  fallback?: EgressFallback;
  /**
   * E2B's per-host transforms for hosts that no rule allows: they inject only into requests the
   * fallback allows (E2B: "rules do not grant network access"). Exact hosts first, then wildcards
   * by longest suffix; the first that matches the Host applies.
   */
  transforms?: EgressTransform[];
  /**
   * E2B's `network.egressProxy`: the SOCKS5 proxy every upstream connection of the sandbox goes
   * through, its other TCP too (docs/egress.md "Bring your own proxy"). Checked by
   * parseEgressProxy (egress-tunnel.ts).
   */
  tunnel?: EgressTunnel;
};

/** A SOCKS5 proxy as E2B's SDK sends it: `host:port`, and RFC 1929 credentials when it has them. */
export type EgressTunnel = {
  address: string;
  username?: string;
  password?: string;
};

export interface EgressTransform {
  host: string;
  inject: EgressInject[];
}

/** A policy as the admin API shows it: every secret replaced by REDACTED. */
export type SandboxEgressPolicyView = SandboxEgressPolicy;
export const REDACTED = '[redacted]';

export interface EgressHealth {
  ok: true;
  /** False until the first load of all policies from the master succeeded (every request is then 403). */
  ready: boolean;
  policies: number;
  tasks: Record<string, TaskStats>;
}

/**
 * Where the platform's own components listen (the master's list that webhooks are checked
 * against: API, master, node agents, proxies, template center, database, Redis), names resolved
 * and a wildcard listener as the master host's addresses, IPv4 only; and the sandbox address pools.
 */
export interface PlatformAddresses {
  endpoints: Array<{ ip: string; port: number }>;
  pools: string[];
  /** master.platform_networks: the platform's own hosts, every port (absent from masters before 2026-11-30). */
  networks?: string[];
}

// ---- rule checks (docs/egress.md "Rules") ----

/** A rule that breaks the constraints of docs/egress.md "Rules"; the SDK throws it as InvalidArgumentError, the server as 400. */
export class EgressRuleError extends Error {}

const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const METHOD = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}$/;
const FORBIDDEN_INJECT_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'upgrade', 'te', 'trailer', 'keep-alive', 'proxy-connection']);

/** A host or SNI pattern: a domain, `*.` and a domain, or one IPv4 address; never a CIDR. */
export function checkHostPattern(value: string, where: string): string {
  const v = value.trim().toLowerCase().replace(/\.$/, '');
  if (v.includes('/')) throw new EgressRuleError(`${where} must be a domain name or a single IP, not a CIDR (${JSON.stringify(value)})`);
  if (isIpv4(v)) {
    // `127.0.0.01` passed isIpv4 and then never matched: the proxy compares dotted quads as text and
    // refuses a Host or SNI in any other form. Written as the dotted quad, not refused: stored rules
    // are checked again on load, where a refusal would drop the sandbox's whole policy. Unambiguous:
    // isIpv4 takes at most one leading zero, and `00` to `07` read the same as octal.
    return v.split('.').map(Number).join('.');
  }
  const name = v.startsWith('*.') ? v.slice(2) : v;
  if (!name || name.length > 253 || !name.split('.').every((l) => LABEL.test(l)) || /^[\d.]+$/.test(name)) {
    throw new EgressRuleError(`${where} must be a domain name (optionally starting with "*.") or a single IPv4 address, not ${JSON.stringify(value)}`);
  }
  return v;
}

/** The (port, scheme) flows a rule's match intercepts (docs/egress.md "Rules": which ports a rule takes over). */
export function interceptedTuples(m: EgressMatch): Array<{ port: number; scheme: EgressScheme }> {
  if (m.port !== undefined && m.scheme) return [{ port: m.port, scheme: m.scheme }];
  if (m.scheme) return [{ port: m.scheme === 'https' ? 443 : 80, scheme: m.scheme }];
  return [{ port: 80, scheme: 'http' }, { port: 443, scheme: 'https' }];
}

/**
 * Checks rules against the constraints of docs/egress.md "Rules" and returns them normalized (lower-case scheme,
 * host and SNI, upper-case methods, names filled in). Throws EgressRuleError naming the rule.
 */
export function checkEgressRules(input: unknown): EgressRule[] {
  if (!Array.isArray(input)) throw new EgressRuleError('network.rules must be a list of {name, match, action}');
  const schemeOf = new Map<string, EgressScheme>();
  const tuplesOf = new Map<string, Set<string>>();
  return input.map((raw, i) => {
    const where = `network.rules[${i}]`;
    if (!isObj(raw)) throw new EgressRuleError(`${where} must be an object {name, match, action}`);
    const name = raw.name === undefined ? `rule-${i}` : raw.name;
    if (typeof name !== 'string' || !name || name.length > 128) throw new EgressRuleError(`${where}.name must be a string of 1 to 128 characters`);
    const at = `${where} (${name})`;
    const rule: EgressRule = { name, match: checkMatch(raw.match, at), action: checkAction(raw.action, at) };
    for (const host of [rule.match.host, rule.match.sni]) {
      if (!host) continue;
      const tuples = tuplesOf.get(host) ?? new Set<string>();
      for (const t of interceptedTuples(rule.match)) {
        const key = `${host}:${t.port}`;
        const seen = schemeOf.get(key);
        // A rule without a scheme covers both defaults and so constrains nothing.
        if (rule.match.scheme) {
          if (seen && seen !== t.scheme) throw new EgressRuleError(`${at}: rules for ${key} disagree on the scheme (${seen} and ${t.scheme}); one scheme per host and port`);
          schemeOf.set(key, t.scheme);
        }
        tuples.add(`${t.port}/${t.scheme}`);
      }
      tuplesOf.set(host, tuples);
      if (tuples.size > EGRESS_DEFAULTS.maxTuplesPerHost) {
        throw new EgressRuleError(`${at}: more than ${EGRESS_DEFAULTS.maxTuplesPerHost} distinct (port, scheme) pairs for host ${host}`);
      }
    }
    return rule;
  });
}

function checkMatch(raw: unknown, at: string): EgressMatch {
  if (raw === undefined || raw === null) return {};
  if (!isObj(raw)) throw new EgressRuleError(`${at}: match must be an object`);
  const known = ['scheme', 'port', 'sni', 'host', 'method', 'path'];
  const extra = Object.keys(raw).filter((k) => !known.includes(k));
  if (extra.length) throw new EgressRuleError(`${at}: match has unknown fields ${extra.join(', ')} (known: ${known.join(', ')})`);
  const m: EgressMatch = {};
  if (raw.scheme !== undefined) {
    const s = typeof raw.scheme === 'string' ? raw.scheme.toLowerCase() : '';
    if (s !== 'http' && s !== 'https') throw new EgressRuleError(`${at}: match.scheme must be http or https`);
    m.scheme = s;
  }
  if (raw.port !== undefined) {
    if (!Number.isInteger(raw.port) || (raw.port as number) < 1 || (raw.port as number) > 65535) throw new EgressRuleError(`${at}: match.port must be an integer from 1 to 65535`);
    if (!m.scheme) throw new EgressRuleError(`${at}: match.port requires match.scheme`);
    m.port = raw.port as number;
  }
  for (const f of ['host', 'sni'] as const) {
    if (raw[f] === undefined) continue;
    if (typeof raw[f] !== 'string') throw new EgressRuleError(`${at}: match.${f} must be a string`);
    m[f] = checkHostPattern(raw[f] as string, `${at}: match.${f}`);
  }
  if (raw.method !== undefined) {
    const list = typeof raw.method === 'string' ? [raw.method] : raw.method;
    if (!Array.isArray(list) || list.length === 0 || !list.every((x) => typeof x === 'string' && METHOD.test(x))) {
      throw new EgressRuleError(`${at}: match.method must be a non-empty list of HTTP methods`);
    }
    m.method = list.map((x: string) => x.toUpperCase());
  }
  if (raw.path !== undefined) {
    const p = raw.path;
    if (typeof p !== 'string' || !p || p.length > 2048) throw new EgressRuleError(`${at}: match.path must be a non-empty string`);
    const star = p.indexOf('*');
    if (star !== -1 && star !== p.length - 1) throw new EgressRuleError(`${at}: match.path may hold only one '*', at its end`);
    m.path = p;
  }
  return m;
}

function checkAction(raw: unknown, at: string): EgressAction {
  if (!isObj(raw) || typeof raw.allow !== 'boolean') throw new EgressRuleError(`${at}: action must be an object with allow true or false`);
  const a: EgressAction = { allow: raw.allow };
  if (raw.audit !== undefined) {
    if (raw.audit !== 'none' && raw.audit !== 'metadata' && raw.audit !== 'full') throw new EgressRuleError(`${at}: action.audit must be none, metadata or full`);
    a.audit = raw.audit;
  }
  if (raw.inject !== undefined && raw.inject !== null) {
    if (!Array.isArray(raw.inject)) throw new EgressRuleError(`${at}: action.inject must be a list of {header, format, secret}`);
    if (!raw.allow && raw.inject.length > 0) throw new EgressRuleError(`${at}: a deny rule cannot inject (a configuration error); inject only after allow`);
    a.inject = raw.inject.map((x: unknown, j: number) => checkInject(x, `${at}: action.inject[${j}]`));
  }
  return a;
}

/**
 * The shortest live secret the egress audit log redacts from its lines. A header value may be
 * short (E2B's transforms set any header: `X-Env: prod`), and one of a character or two (`"`)
 * redacted from every line of the node made them all unreadable, whoever's they were.
 */
export const MIN_SECRET_LENGTH = 8;

/**
 * Where a header value holds a character it cannot carry, or -1: anything but tab, space,
 * visible ASCII and Latin-1 (RFC 9110 5.5). A control character could end the header; one past
 * U+00FF is cut to its low byte when the head is written as latin1, so U+010D U+010A went out as
 * CR LF and split the request on an upstream connection other sandboxes' requests shared.
 */
export function unsafeHeaderCharAt(value: string): number {
  return value.search(/[^\t\x20-\x7e\x80-\xff]/);
}

/** Why a header value cannot be sent, naming the position but never the value (it may be a secret). */
export function unsafeHeaderCharReason(value: string): string | undefined {
  const at = unsafeHeaderCharAt(value);
  if (at < 0) return undefined;
  const c = value.charCodeAt(at);
  const kind = c < 0x20 || c === 0x7f ? 'a control character (line breaks, NUL and the other controls are refused)' : 'a character past Latin-1 (U+00FF)';
  return `holds ${kind} at index ${at}; a header value may hold only tab, space, visible ASCII and Latin-1 characters`;
}

function checkInject(raw: unknown, at: string): EgressInject {
  if (!isObj(raw)) throw new EgressRuleError(`${at} must be an object {header, format, secret}`);
  if (typeof raw.header !== 'string' || !HEADER_NAME.test(raw.header)) throw new EgressRuleError(`${at}.header must be an HTTP header name`);
  if (FORBIDDEN_INJECT_HEADERS.has(raw.header.toLowerCase())) throw new EgressRuleError(`${at}.header cannot be ${raw.header}: it frames the request`);
  if (typeof raw.secret !== 'string' || !raw.secret) throw new EgressRuleError(`${at}.secret must be a non-empty string`);
  const secretFault = unsafeHeaderCharReason(raw.secret);
  if (secretFault) throw new EgressRuleError(`${at}.secret ${secretFault}`);
  const out: EgressInject = { header: raw.header, secret: raw.secret };
  if (raw.format !== undefined) {
    if (typeof raw.format !== 'string' || !raw.format.includes('${SECRET}')) throw new EgressRuleError(`${at}.format must be a string holding \${SECRET}`);
    const formatFault = unsafeHeaderCharReason(raw.format);
    if (formatFault) throw new EgressRuleError(`${at}.format ${formatFault}`);
    out.format = raw.format;
  }
  return out;
}

/** The policy with every secret replaced by REDACTED: what any read shows. */
export function redactPolicy(p: SandboxEgressPolicy): SandboxEgressPolicyView {
  return {
    ...p,
    rules: redactRules(p.rules),
    ...(p.transforms ? { transforms: p.transforms.map((t) => ({ ...t, inject: t.inject.map((x) => ({ ...x, secret: REDACTED })) })) } : {}),
    ...(p.tunnel?.password !== undefined ? { tunnel: { ...p.tunnel, password: REDACTED } } : {}),
  };
}

export function redactRules(rules: EgressRule[]): EgressRule[] {
  return rules.map((r) => r.action.inject?.length
    ? { ...r, action: { ...r.action, inject: r.action.inject.map((x) => ({ ...x, secret: REDACTED })) } }
    : r);
}

/** The (port, scheme) pairs a sandbox's traffic is steered to the proxy on. */
export function steeredTuples(rules: EgressRule[]): Array<{ port: number; scheme: EgressScheme }> {
  const seen = new Map<string, { port: number; scheme: EgressScheme }>();
  for (const r of rules) for (const t of interceptedTuples(r.match)) seen.set(`${t.port}/${t.scheme}`, t);
  return [...seen.values()].sort((a, b) => a.port - b.port);
}

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
