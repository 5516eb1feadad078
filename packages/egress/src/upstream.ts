import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import tls from 'node:tls';
import { ResponseParseError, UpstreamPool, type DialedSocket, type UpstreamConnection, type UpstreamConnectionError } from '@svc/http1';
import type { EgressScheme } from '@svc/contracts/egress';
import { DnsBusyError, DnsCache, DnsTimeoutError } from './dns-cache.ts';
import type { PlatformGuard } from './platform-guard.ts';
import { isIpv4 } from './ipv4.ts';
import { dialUpstream, ProxyDialError, type DialTarget, type ProxyVia } from './upstream-dial.ts';

export interface UpstreamOptions {
  /** host → IPv4, consulted before DNS. */
  resolve?: Record<string, string>;
  /** Trusted for upstream TLS besides node's and the system's roots (PEM). */
  upstreamCa?: string;
  /** The host's CA bundle (systemCaBundle), so that CAs an operator added to the system are trusted too. */
  systemCa?: string;
  connectTimeoutMs: number;
  /** Upstream read and send idle timeout. */
  ioTimeoutMs: number;
  /** Refuses a sandbox's own SOCKS5 proxy at an address of the platform, at each dial; absent: not checked past the create. */
  platform?: PlatformGuard;
  /** The name cache; absent: the system resolver with dns-cache.ts's limits (tests give one with a resolver of their own). */
  dns?: DnsCache;
}

export interface UpstreamTarget {
  scheme: EgressScheme;
  /** The name the sandbox asked for: the TLS server name and certificate identity. */
  host: string;
  ip: string;
  port: number;
}

/**
 * An upstream as a pooled request goes to it: with the sandbox it is for, which is part of the
 * pool key, so that no two sandboxes ever send on one connection. A request that split on a
 * shared connection (docs/egress.md "Speed") would otherwise have taken the next
 * sandbox's request, and the credential the proxy injected into it, as its own body.
 */
export interface PooledTarget extends UpstreamTarget {
  /** The sandbox: its address and, once its policy is known, its id. */
  sandbox: string;
}

export type UpstreamFailure = 'dns' | 'dns_busy' | 'refused' | 'connect_timeout' | 'io_timeout' | 'untrusted_certificate' | 'connection' | 'proxy';

/** An upstream that could not be reached or failed; `status` is what the sandbox gets (502 or 504). */
export class UpstreamError extends Error {
  constructor(readonly status: 502 | 503 | 504, readonly failure: UpstreamFailure, message: string, readonly code?: string) {
    super(message);
    this.name = 'UpstreamError';
  }
}

const TLS_TRUST_ERRORS = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED', 'CERT_REJECTED', 'CERT_SIGNATURE_FAILURE', 'INVALID_CA', 'ERR_TLS_CERT_ALTNAME_INVALID',
  'HOSTNAME_MISMATCH', 'CERT_REVOKED', 'INVALID_PURPOSE',
]);

/**
 * How many idle sockets one (sandbox, scheme, host, ip, port, proxy) keeps, and a worker keeps in
 * all. The key names the sandbox, so without a total a node's idle sockets grew with sandboxes ×
 * hosts × the key's cap: at 32 a key (until 2026-12-01), 200 sandboxes each using 10 hosts could
 * park 64,000 sockets for 30 s. The cap of 8 a key that replaced it cost more than it saved: 16
 * parallel keep-alive clients of one sandbox (bench/nginx-peer.ts's default) found half their
 * sockets closed after each answer, and every other request paid a new upstream TLS handshake
 * (2026-12-02, 1 worker: 444 µs of the proxy's CPU a request against 97 with 8 clients, 8% of
 * direct against 37%). So 32 a key again, at most 256 idle a sandbox, and 1,024 idle in a
 * worker, the total's evictions falling on the sandbox that holds the most (http1 UpstreamPool
 * groupOf): a sandbox parking sockets to a thousand names closes its own, not the others'.
 */
export const MAX_IDLE_SOCKETS_PER_KEY = 32;
const MAX_IDLE_SOCKETS_PER_SANDBOX = 256;
const MAX_IDLE_SOCKETS_PER_WORKER = 1024;
/** The sandbox a pool key names (its first field, Upstreams.connection). */
const sandboxOfKey = (key: string): string => key.slice(0, key.indexOf('|'));
/** An idle pooled socket closes after this. */
const IDLE_SOCKET_TIMEOUT_MS = 30_000;
/** TLS sessions kept for resumption, one per upstream key (node's https.Agent keeps 100 too). */
const MAX_TLS_SESSIONS = 100;

/**
 * The upstream side of the proxy: name resolution (overrides, then DNS, IPv4 only) and
 * keep-alive connections on the shared lean HTTP/1.1 path (@svc/http1), with the connect and
 * idle timeouts of docs/egress.md "Known limits". One pool key per (sandbox, scheme, host, ip,
 * port, proxy and its login), not per address alone: a socket serves one sandbox and one name,
 * and a proxied one its proxy and login only.
 */
export class Upstreams {
  private readonly pool: UpstreamPool;
  private readonly secureContext: tls.SecureContext | undefined;
  private readonly sessions = new Map<string, Buffer>();
  private readonly dns: DnsCache;
  /**
   * egress.resolve as a Map: looked up by a name the sandbox chose (its Host), a plain object
   * answered `constructor` or `__proto__` with what Object.prototype holds, not an address.
   */
  private readonly overrides: Map<string, string>;

  constructor(private readonly opts: UpstreamOptions) {
    this.overrides = new Map(Object.entries(opts.resolve ?? {}));
    this.dns = opts.dns ?? new DnsCache();
    this.pool = new UpstreamPool({ idleMs: IDLE_SOCKET_TIMEOUT_MS, maxIdlePerKey: MAX_IDLE_SOCKETS_PER_KEY, maxIdleTotal: MAX_IDLE_SOCKETS_PER_WORKER, groupOf: sandboxOfKey, maxIdlePerGroup: MAX_IDLE_SOCKETS_PER_SANDBOX, ioTimeoutMs: opts.ioTimeoutMs });
    // One context for every connection: building one with the roots costs milliseconds.
    const extra = [opts.systemCa, opts.upstreamCa].filter((pem): pem is string => !!pem);
    this.secureContext = extra.length ? tls.createSecureContext({ ca: [...tls.rootCertificates, ...extra] }) : undefined;
  }

  get connectTimeoutMs() { return this.opts.connectTimeoutMs; }

  /**
   * A keep-alive connection to the upstream, idle in the pool or new; through `via` when given,
   * never direct then. The caller starts its exchange on it (UpstreamConnection.start).
   */
  connection(target: PooledTarget, via?: ProxyVia): UpstreamConnection {
    // The sandbox first: a key never names another sandbox's connection, whatever its other parts hold.
    const key = `${target.sandbox}|${target.scheme}|${target.host}|${target.ip}|${target.port}${via ? viaKey(via) : ''}`;
    return this.pool.acquire(key, () => this.open(key, target, via));
  }

  private open(key: string, target: UpstreamTarget, via: ProxyVia | undefined): DialedSocket | Promise<DialedSocket> {
    if (!via) {
      if (target.scheme === 'http') return { socket: net.connect({ host: target.ip, port: target.port }), ready: 'connect' };
      return { socket: this.tlsOver(key, target, { host: target.ip, port: target.port }), ready: 'secureConnect' };
    }
    // `host` beside `socket`: the name node checks the certificate against when there is no SNI (an IP literal).
    return this.dial({ ip: target.ip, port: target.port }, via).then((raw): DialedSocket => (
      target.scheme === 'http' ? { socket: raw, ready: 'now' } : { socket: this.tlsOver(key, target, { socket: raw, host: target.ip }), ready: 'secureConnect' }
    ));
  }

  /** TLS to the upstream's name (its address for an IP literal), resuming the key's last session. */
  private tlsOver(key: string, target: UpstreamTarget, how: { host: string; port: number } | { socket: net.Socket; host: string }): tls.TLSSocket {
    const session = this.sessions.get(key);
    const socket = tls.connect({
      ...how,
      ...(isIpv4(target.host) ? {} : { servername: target.host }),
      ...(this.secureContext ? { secureContext: this.secureContext } : {}),
      ...(session ? { session } : {}),
      ALPNProtocols: ['http/1.1'],
    });
    socket.on('session', (s: Buffer) => {
      this.sessions.delete(key);
      if (this.sessions.size >= MAX_TLS_SESSIONS) this.sessions.delete(this.sessions.keys().next().value as string);
      this.sessions.set(key, s);
    });
    return socket;
  }

  /**
   * What the tunnels the proxy runs itself (WebSocket upgrades, CONNECT) share with its pooled
   * requests: the trust for upstream TLS (undefined: node's roots alone) and the timeouts.
   */
  tunnelSettings(): { secureContext?: tls.SecureContext; connectTimeoutMs: number; ioTimeoutMs: number } {
    return { ...(this.secureContext ? { secureContext: this.secureContext } : {}), connectTimeoutMs: this.opts.connectTimeoutMs, ioTimeoutMs: this.opts.ioTimeoutMs };
  }

  /**
   * A raw TCP connection to an upstream, through `via` when given (never direct then): the
   * tunnel listener's and CONNECT's dial, with the connect timeout of docs/egress.md "Known limits".
   */
  dial(target: DialTarget, via?: ProxyVia): Promise<net.Socket> {
    const platform = this.opts.platform;
    return dialUpstream(target, {
      ...(via ? { via } : {}),
      connectTimeoutMs: this.opts.connectTimeoutMs,
      resolveProxyHost: (h) => this.resolve(h),
      ...(platform ? { refuseProxyAddress: (ip: string, port: number) => platform.refusal(ip, port) } : {}),
    });
  }

  /** The address of a host known without waiting: an IPv4 literal, an override, a fresh DNS answer; else undefined. */
  knownAddress(host: string): string | undefined {
    if (isIpv4(host)) return host;
    return this.overrides.get(host) || this.overrides.get(host.toLowerCase()) || this.dns.cached(host);
  }

  /**
   * The IPv4 address to contact for a host: an IPv4 literal, an override, then DNS (cached 10 s,
   * dns-cache.ts). `owner`, the sandbox that asks, has only a few lookups running at once: past
   * them its request is a 503 and nothing is looked up. A lookup without an answer within 5 s is
   * a 502, as a name that does not resolve is.
   */
  async resolve(host: string, owner?: string): Promise<string> {
    const known = this.knownAddress(host);
    if (known) return known;
    try {
      return await this.dns.resolve(host, owner);
    } catch (err) {
      if (err instanceof DnsBusyError) throw new UpstreamError(503, 'dns_busy', `upstream host ${host} was not looked up: ${err.message}; try again shortly`, err.code);
      const code = (err as NodeJS.ErrnoException).code;
      const why = err instanceof DnsTimeoutError ? err.message : code ?? (err as Error).message;
      throw new UpstreamError(502, 'dns', `cannot resolve upstream host ${host} (${why})`, code);
    }
  }

  /** Closes every pooled socket. */
  close(): void {
    this.pool.closeAll();
  }
}

/** Where distributions keep the system's CA bundle (Debian/Ubuntu/Alpine, RHEL/Fedora, SUSE). */
const SYSTEM_CA_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt', '/etc/ssl/ca-bundle.pem'];

/**
 * The system's CA bundle, when there is one: node 20 trusts only its own copy of Mozilla's
 * roots, while an operator adds a company CA to the system's.
 */
export async function systemCaBundle(): Promise<string | undefined> {
  for (const path of SYSTEM_CA_BUNDLES) {
    try {
      return await readFile(path, 'utf8');
    } catch (err) {
      // Absent here: this distribution keeps it elsewhere (the next path) or has none.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  return undefined;
}

const seconds = (ms: number) => `${Number((ms / 1000).toFixed(1))} s`;

/** Any error of an upstream request as the status and message the sandbox gets. */
export function upstreamFailure(error: unknown, target: UpstreamTarget): UpstreamError {
  if (error instanceof UpstreamError) return error;
  // The sandbox's or the operator's proxy failed: said as such, so nobody looks for the fault upstream.
  if (error instanceof ProxyDialError) return new UpstreamError(error.code === 'ETIMEDOUT' ? 504 : 502, 'proxy', error.message, error.code);
  const err = error as UpstreamConnectionError;
  const code = err?.code;
  const where = `${target.host} (${target.ip}:${target.port})`;
  // The lean path's two limits (@svc/http1): the connect covers TCP and, for https, the TLS handshake.
  if (err?.timeout === 'connect') return new UpstreamError(504, 'connect_timeout', `upstream ${where} did not complete the connection within ${seconds(err.timeoutMs ?? 0)}`, 'ETIMEDOUT');
  if (err?.timeout === 'io') return new UpstreamError(504, 'io_timeout', `upstream ${where} sent and took nothing for ${seconds(err.timeoutMs ?? 0)}`, 'ETIMEDOUT');
  if (err instanceof ResponseParseError) return new UpstreamError(502, 'connection', `upstream ${where} sent an answer that is not valid HTTP/1.1 (${err.message})`, err.code);
  if (code === 'ECONNREFUSED') return new UpstreamError(502, 'refused', `upstream ${where} refused the connection`, code);
  if (code && TLS_TRUST_ERRORS.has(code)) {
    return new UpstreamError(502, 'untrusted_certificate', `upstream ${target.host} presented a certificate that is not trusted (${code}: ${err.message})`, code);
  }
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return new UpstreamError(502, 'connection', `upstream ${where} is unreachable (${code})`, code);
  return new UpstreamError(502, 'connection', `upstream ${where} failed: ${err.message}${code ? ` (${code})` : ''}`, code);
}

const viaKeys = new WeakMap<ProxyVia, string>();

/**
 * The part of a pool key a proxy adds: its address and its login, the password as a digest. A
 * proxy checks a login once, when the connection opens: a sandbox naming the same proxy and user
 * with another password reused a connection let in for the right one (upstream-via-pool.test.ts).
 * Made once per ProxyVia (a policy's tunnel is parsed once): this runs on every proxied request.
 */
function viaKey(via: ProxyVia): string {
  let key = viaKeys.get(via);
  if (key === undefined) {
    const secret = via.password === undefined ? '' : createHash('sha256').update(via.password).digest('base64url');
    key = `|${via.kind}:${via.host}:${via.port}:${via.username ?? ''}:${secret}`;
    viaKeys.set(via, key);
  }
  return key;
}
