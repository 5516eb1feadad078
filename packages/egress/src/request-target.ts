import type { EgressScheme } from '@svc/contracts/egress';
import { DEFAULT_PORT } from './decide.ts';
import { requestPath } from './request-path.ts';

export interface RequestTarget {
  /** Lower case, no trailing dot, no port. */
  host: string;
  port: number;
  /** The path and query as forwarded, and as the rules see them: request-path.ts. */
  path: string;
  /**
   * The Host header sent upstream in place of the sandbox's, for an absolute-form request: its
   * authority, without userinfo (RFC 9112 3.2.2). Absent: the sandbox's Host goes as sent.
   */
  hostHeader?: string;
}

const HOST_NAME = /^[a-z0-9_]([a-z0-9_.-]{0,252})$/;

/**
 * Where a request goes: the absolute-form URL's authority when the client sent one (a client
 * that believes it talks to a forward proxy), else the Host header; the port from either, else
 * the listener's scheme default. A string is the reason the request is unusable (a 400).
 *
 * An absolute-form request's Host header is replaced by its authority (`hostHeader`), as RFC
 * 9112 3.2.2 tells a proxy to do: the rules, the Host/SNI guard and the audit see that authority,
 * so the upstream must get it too, not a Host of the sandbox's choosing (a virtual host or a CDN
 * would route by it, and the inject with it: docs/egress.md "How traffic reaches the proxy").
 */
export function requestTarget(scheme: EgressScheme, url: string, hostHeader: string | undefined): RequestTarget | string {
  const absolute = /^https?:\/\/([^/?#]*)(.*)$/i.exec(url);
  const authority = absolute ? absolute[1].replace(/^.*@/, '') : hostHeader;
  if (authority === undefined || authority === '') return 'the request has no Host header';
  const parsed = splitAuthority(authority.trim().toLowerCase());
  if (!parsed) return `the Host ${JSON.stringify(authority)} is not a host name or IPv4 address with an optional port`;
  // `http://h?q` is `/?q` in origin-form (RFC 9112 3.2.1).
  const rest = absolute ? absolute[2] : url;
  const path = requestPath(absolute && !rest.startsWith('/') ? `/${rest}` : rest);
  if ('refused' in path) return path.refused;
  const port = parsed.port ?? DEFAULT_PORT[scheme];
  if (!absolute) return { host: parsed.host, port, path: path.forward };
  return { host: parsed.host, port, path: path.forward, hostHeader: parsed.port === undefined ? parsed.host : `${parsed.host}:${parsed.port}` };
}

function splitAuthority(authority: string): { host: string; port?: number } | undefined {
  const m = /^([^:]+)(?::(\d{1,5}))?$/.exec(authority);
  if (!m) return undefined;
  const host = m[1].endsWith('.') ? m[1].slice(0, -1) : m[1];
  if (!HOST_NAME.test(host) || host.includes('..')) return undefined;
  if (m[2] === undefined) return { host };
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { host, port } : undefined;
}
