import { ConfigError } from './config-error.ts';

/** An operator's proxy for every sandbox's outbound TCP (egress.upstream_proxy). */
export interface UpstreamProxy {
  kind: 'socks5' | 'http';
  host: string;
  port: number;
  username?: string;
  password?: string;
}

/**
 * `socks5://[user:pass@]host:port` or `http://[user:pass@]host:port` (HTTP CONNECT); '' is none.
 * Credentials may be percent-encoded. A ConfigError names what is wrong, never the password.
 */
export function parseUpstreamProxy(raw: string, key = 'egress.upstream_proxy'): UpstreamProxy | undefined {
  if (!raw) return undefined;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ConfigError(key, 'must be socks5://[user:pass@]host:port or http://[user:pass@]host:port');
  }
  const kind = u.protocol === 'socks5:' || u.protocol === 'socks5h:' ? 'socks5' : u.protocol === 'http:' ? 'http' : undefined;
  if (!kind) throw new ConfigError(key, `the scheme must be socks5:// or http:// (HTTP CONNECT), not ${u.protocol}//`);
  if (!u.hostname || !u.port) throw new ConfigError(key, 'must name a host and a port');
  if ((u.pathname && u.pathname !== '/') || u.search || u.hash) throw new ConfigError(key, 'must be only scheme, credentials, host and port');
  const host = u.hostname.replace(/^\[|\]$/g, '');
  const out: UpstreamProxy = { kind, host, port: Number(u.port) };
  if (u.username) out.username = decodeURIComponent(u.username);
  if (u.password) out.password = decodeURIComponent(u.password);
  return out;
}
