import { promises as dns } from 'node:dns';
import { readFile } from 'node:fs/promises';
import http, { type ClientRequest, type OutgoingHttpHeaders } from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import type { EgressScheme } from '@svc/contracts/egress';
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
}

export interface UpstreamTarget {
  scheme: EgressScheme;
  /** The name the sandbox asked for: the TLS server name and certificate identity. */
  host: string;
  ip: string;
  port: number;
}

export interface UpstreamRequest {
  method: string;
  path: string;
  /** Flat [name, value, ...], as rawHeaders holds them. */
  headers: string[];
}

export type UpstreamFailure = 'dns' | 'refused' | 'connect_timeout' | 'io_timeout' | 'untrusted_certificate' | 'connection' | 'proxy';

/** An upstream that could not be reached or failed; `status` is what the sandbox gets (502 or 504). */
export class UpstreamError extends Error {
  constructor(readonly status: 502 | 504, readonly failure: UpstreamFailure, message: string, readonly code?: string) {
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

/** How many sockets one (scheme, host, ip, port) may hold, and keep idle. */
const MAX_SOCKETS_PER_POOL = 256;
const MAX_FREE_SOCKETS_PER_POOL = 32;
/** An idle pooled socket closes after this, unless the upstream's Keep-Alive hint is shorter. */
const FREE_SOCKET_TIMEOUT_MS = 30_000;

type PoolKeyed = { poolKey?: string; via?: ProxyVia };
type Dialer = (target: DialTarget, via: ProxyVia) => Promise<net.Socket>;
type ConnectCallback = ((err: Error | null, stream: Duplex) => void) | undefined;

/**
 * One keep-alive pool per (scheme, host, ip, port, proxy), not per address alone: a socket serves
 * one name. A request with `via` gets its socket through that proxy (createConnection's callback
 * form, which node's Agent supports), never a direct one.
 */
class PooledHttpAgent extends http.Agent {
  constructor(opts: http.AgentOptions, private readonly dial: Dialer) { super(opts); }
  override getName(options: http.ClientRequestArgs & PoolKeyed = {}): string {
    return options.poolKey ?? super.getName(options);
  }
  override createConnection(options: http.ClientRequestArgs & PoolKeyed, cb?: ConnectCallback): Duplex | undefined {
    if (!options.via) return net.createConnection(options as net.NetConnectOpts);
    // Never a direct socket for a proxied request: node always passes the callback; should it not, fail.
    if (!cb) throw new ProxyDialError('a proxied connection was asked for without a callback', 'EPROXY');
    this.dial({ ip: String(options.host ?? ''), port: Number(options.port) }, options.via)
      .then((s) => cb(null, s), (err: Error) => cb(err, undefined as unknown as Duplex));
    return undefined;
  }
}
class PooledHttpsAgent extends https.Agent {
  constructor(opts: https.AgentOptions, private readonly dial: Dialer) { super(opts); }
  override getName(options: https.RequestOptions & PoolKeyed = {}): string {
    return options.poolKey ?? super.getName(options);
  }
  override createConnection(options: https.RequestOptions & PoolKeyed, cb?: ConnectCallback): Duplex | undefined {
    if (!options.via) return tls.connect(options as tls.ConnectionOptions);
    // Never a direct socket for a proxied request: node always passes the callback; should it not, fail.
    if (!cb) throw new ProxyDialError('a proxied connection was asked for without a callback', 'EPROXY');
    this.dial({ ip: String(options.host ?? ''), port: Number(options.port) }, options.via).then(
      (raw) => cb(null, tls.connect({ ...(options as tls.ConnectionOptions), socket: raw })),
      (err: Error) => cb(err, undefined as unknown as Duplex),
    );
    return undefined;
  }
}

/**
 * The upstream side of the proxy: name resolution (overrides, then DNS, IPv4 only) and
 * keep-alive connection pools, with the connect and idle timeouts of docs/egress.md "Known limits".
 */
export class Upstreams {
  private readonly httpAgent: PooledHttpAgent;
  private readonly httpsAgent: PooledHttpsAgent;
  private readonly secureContext: tls.SecureContext | undefined;

  constructor(private readonly opts: UpstreamOptions) {
    const common = { keepAlive: true, maxSockets: MAX_SOCKETS_PER_POOL, maxFreeSockets: MAX_FREE_SOCKETS_PER_POOL, timeout: FREE_SOCKET_TIMEOUT_MS, scheduling: 'lifo' as const };
    const dial: Dialer = (target, via) => this.dial(target, via);
    this.httpAgent = new PooledHttpAgent(common, dial);
    // One context for every connection: building one with the roots costs milliseconds.
    const extra = [opts.systemCa, opts.upstreamCa].filter((pem): pem is string => !!pem);
    const secureContext = extra.length ? tls.createSecureContext({ ca: [...tls.rootCertificates, ...extra] }) : undefined;
    this.secureContext = secureContext;
    this.httpsAgent = new PooledHttpsAgent({ ...common, ...(secureContext ? { secureContext } : {}) }, dial);
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
    return dialUpstream(target, { ...(via ? { via } : {}), connectTimeoutMs: this.opts.connectTimeoutMs, resolveProxyHost: (h) => this.resolve(h) });
  }

  /** The IPv4 address to contact for a host: an IPv4 literal, an override, then DNS. */
  async resolve(host: string): Promise<string> {
    if (isIpv4(host)) return host;
    const override = this.opts.resolve?.[host] ?? this.opts.resolve?.[host.toLowerCase()];
    if (override) return override;
    try {
      const { address } = await dns.lookup(host, { family: 4 });
      return address;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new UpstreamError(502, 'dns', `cannot resolve upstream host ${host} (${code ?? (err as Error).message})`, code);
    }
  }

  /**
   * Starts a request to the upstream; the caller writes or pipes the body. Its 'error' event
   * carries an UpstreamError for the timeouts and a raw error otherwise (see upstreamFailure).
   */
  request(target: UpstreamTarget, r: UpstreamRequest, via?: ProxyVia): ClientRequest {
    const poolKey = `${target.scheme}|${target.host}|${target.ip}|${target.port}${via ? `|${via.kind}:${via.host}:${via.port}:${via.username ?? ''}` : ''}`;
    const options: http.RequestOptions & https.RequestOptions & PoolKeyed = {
      host: target.ip,
      port: target.port,
      method: r.method,
      path: r.path,
      headers: r.headers as unknown as OutgoingHttpHeaders,
      setHost: false,
      timeout: this.opts.ioTimeoutMs,
      poolKey,
      ...(via ? { via } : {}),
    };
    let req: ClientRequest;
    if (target.scheme === 'https') {
      options.agent = this.httpsAgent;
      options.servername = isIpv4(target.host) ? '' : target.host;
      req = https.request(options);
    } else {
      options.agent = this.httpAgent;
      req = http.request(options);
    }
    this.watch(req, target);
    return req;
  }

  private watch(req: ClientRequest, target: UpstreamTarget): void {
    const where = `${target.host} (${target.ip}:${target.port})`;
    // The connect timeout covers TCP and, for https, the TLS handshake: both are "connecting".
    req.on('socket', (socket) => {
      if (req.reusedSocket) return;
      const timer = setTimeout(() => {
        req.destroy(new UpstreamError(504, 'connect_timeout', `upstream ${where} did not complete the connection within ${seconds(this.opts.connectTimeoutMs)}`, 'ETIMEDOUT'));
      }, this.opts.connectTimeoutMs);
      const done = () => clearTimeout(timer);
      socket.once(target.scheme === 'https' ? 'secureConnect' : 'connect', done);
      socket.once('close', done);
    });
    req.on('timeout', () => {
      req.destroy(new UpstreamError(504, 'io_timeout', `upstream ${where} sent and took nothing for ${seconds(this.opts.ioTimeoutMs)}`, 'ETIMEDOUT'));
    });
  }

  /** Closes every pooled socket. */
  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
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
  const err = error as NodeJS.ErrnoException;
  const code = err?.code;
  const where = `${target.host} (${target.ip}:${target.port})`;
  if (code === 'ECONNREFUSED') return new UpstreamError(502, 'refused', `upstream ${where} refused the connection`, code);
  if (code && TLS_TRUST_ERRORS.has(code)) {
    return new UpstreamError(502, 'untrusted_certificate', `upstream ${target.host} presented a certificate that is not trusted (${code}: ${err.message})`, code);
  }
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return new UpstreamError(502, 'connection', `upstream ${where} is unreachable (${code})`, code);
  return new UpstreamError(502, 'connection', `upstream ${where} failed: ${err.message}${code ? ` (${code})` : ''}`, code);
}
