import type { EgressTunnel } from '@svc/contracts/egress';
import { parseProxyAddress } from '@svc/contracts/egress-tunnel';

/**
 * A proxy the egress proxy's own upstream connections go through: a sandbox's
 * `network.egressProxy` (SOCKS5) or the operator's `egress.upstream_proxy` (SOCKS5 or HTTP
 * CONNECT), docs/egress.md "Bring your own proxy".
 */
export interface ProxyVia {
  kind: 'socks5' | 'http';
  host: string;
  port: number;
  username?: string;
  password?: string;
  /** A sandbox's own egressProxy: the address its name resolves to is checked at each dial (platform-guard.ts). */
  fromSandbox?: true;
}

export interface DialTarget {
  /** The IPv4 address to reach, resolved by the egress proxy (pinned: the proxy is asked for the address). */
  ip: string;
  port: number;
}

/** A dial through a proxy that failed at the proxy: never retried direct (fail closed). */
export class ProxyDialError extends Error {
  constructor(message: string, readonly code: string) {
    super(message);
    this.name = 'ProxyDialError';
  }
}

/** Parsed once per policy's tunnel: viaOfTunnel runs on every request and connection of a tunneled sandbox. */
const parsed = new WeakMap<EgressTunnel, ProxyVia>();

/** A sandbox's `network.egressProxy` (always SOCKS5, as E2B's API says) as a dial's proxy. */
export function viaOfTunnel(t: EgressTunnel): ProxyVia {
  let via = parsed.get(t);
  if (!via) {
    via = parseVia(t);
    parsed.set(t, via);
  }
  return via;
}

function parseVia(t: EgressTunnel): ProxyVia {
  const { host, port } = parseProxyAddress(t.address, 'tunnel.address');
  return { kind: 'socks5', host, port, fromSandbox: true, ...(t.username !== undefined ? { username: t.username } : {}), ...(t.password !== undefined ? { password: t.password } : {}) };
}
