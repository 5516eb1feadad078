import type { EgressScheme } from '@svc/contracts/egress';
import { DEFAULT_PORT } from './decide.ts';

export interface RequestTarget {
  /** Lower case, no trailing dot, no port. */
  host: string;
  port: number;
  /** The request URI as sent (path and query). */
  path: string;
}

const HOST_NAME = /^[a-z0-9_]([a-z0-9_.-]{0,252})$/;

/**
 * Where a request goes: the absolute-form URL's authority when the client sent one (a client
 * that believes it talks to a forward proxy), else the Host header; the port from either, else
 * the listener's scheme default. A string is the reason the request is unusable (a 400).
 */
export function requestTarget(scheme: EgressScheme, url: string, hostHeader: string | undefined): RequestTarget | string {
  const absolute = /^https?:\/\/([^/?#]*)(.*)$/i.exec(url);
  const authority = absolute ? absolute[1].replace(/^.*@/, '') : hostHeader;
  const path = absolute ? (absolute[2] || '/') : url;
  if (authority === undefined || authority === '') return 'the request has no Host header';
  const parsed = splitAuthority(authority.trim().toLowerCase());
  if (!parsed) return `the Host ${JSON.stringify(authority)} is not a host name or IPv4 address with an optional port`;
  return { host: parsed.host, port: parsed.port ?? DEFAULT_PORT[scheme], path };
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
