import type { EgressScheme } from '@svc/contracts/egress';
import { DEFAULT_PORT } from './decide.ts';
import { isHostNameSyntax, isIpv4InAnotherForm } from './numeric-host.ts';
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
  // A fragment is never sent (RFC 9110 4.2.4): upstreams differ on whether `/admin#x` is
  // `/admin`, so a path rule could not know which path it decides on.
  if (url.includes('#')) return `the request target ${JSON.stringify(url)} holds a "#" (a fragment), which a request never carries; send it without the fragment`;
  const absolute = /^https?:\/\/([^/?#]*)(.*)$/i.exec(url);
  const authority = absolute ? absolute[1].replace(/^.*@/, '') : hostHeader;
  if (authority === undefined || authority === '') return 'the request has no Host header';
  const parsed = splitAuthority(authority.trim().toLowerCase());
  if (!parsed) return `the Host ${JSON.stringify(authority)} is not a host name or IPv4 address with an optional port`;
  if (parsed === 'numeric') {
    return `the Host ${JSON.stringify(authority)} is an IPv4 address in another form than a dotted quad (four decimal numbers 0 to 255 without leading zeros, as 127.0.0.1); rules compare that form only, so write the address as one`;
  }
  // `http://h?q` is `/?q` in origin-form (RFC 9112 3.2.1).
  const rest = absolute ? absolute[2] : url;
  const path = requestPath(absolute && !rest.startsWith('/') ? `/${rest}` : rest);
  if ('refused' in path) return path.refused;
  const port = parsed.port ?? DEFAULT_PORT[scheme];
  if (!absolute) return { host: parsed.host, port, path: path.forward };
  return { host: parsed.host, port, path: path.forward, hostHeader: parsed.port === undefined ? parsed.host : `${parsed.host}:${parsed.port}` };
}

/**
 * The host and port of an authority; undefined when it is neither a name nor an address;
 * 'numeric' for a name of numbers only that is not a dotted quad (numeric-host.ts). Refused, not
 * rewritten to the dotted quad: the upstream would get a Host other than the one the sandbox
 * sent, and the TLS server name (tls-listener.ts) is refused the same way.
 */
function splitAuthority(authority: string): { host: string; port?: number } | 'numeric' | undefined {
  const m = /^([^:]+)(?::(\d{1,5}))?$/.exec(authority);
  if (!m) return undefined;
  const host = m[1].endsWith('.') ? m[1].slice(0, -1) : m[1];
  if (!isHostNameSyntax(host)) return undefined;
  if (isIpv4InAnotherForm(host)) return 'numeric';
  if (m[2] === undefined) return { host };
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { host, port } : undefined;
}
