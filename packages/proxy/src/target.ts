import { SvcError } from '@svc/common';

/** Which sandbox and port a data-plane request is for. */
export interface Target {
  sandboxId: string;
  /** 0: the sandbox's envd port. */
  port: number;
  /** Named by the E2b-Sandbox-* headers, not by Host: a cache keyed on the URL must vary on them. */
  byHeaders?: boolean;
}

/** What requestTarget reads of a request's headers. */
interface NamingHeaders {
  host: string | undefined;
  sandboxIdHeader: string | undefined;
  sandboxPortHeader: string | undefined;
}

/**
 * The sandbox and port a request names: by Host, else by the E2b-Sandbox-Id and -Port headers;
 * null when neither names one. The headers may name the Host's sandbox again (the official SDK
 * sends them with every request); naming another, or an absolute-form target naming another
 * authority than Host, is a 400: a cache in front that keys on the URL would store one
 * sandbox's answer as another's.
 */
export function requestTarget(h: NamingHeaders, url: string): Target | null | SvcError {
  const authority = absoluteAuthority(url);
  if (authority !== undefined && authority.toLowerCase() !== h.host?.toLowerCase()) {
    return new SvcError(400, 'the request target names another host than the Host header');
  }
  const byHost = targetFromHost(h.host);
  if (h.sandboxIdHeader === undefined) return byHost;
  const byHeaders = targetFromHeaders(h.sandboxIdHeader, h.sandboxPortHeader);
  if (byHost === null) return byHeaders && { ...byHeaders, byHeaders: true };
  const disagree: string[] = [];
  if (byHeaders === null || byHeaders.sandboxId !== byHost.sandboxId) disagree.push('E2b-Sandbox-Id');
  // Without the port header the headers claim no port: the Host's is used.
  if (h.sandboxPortHeader && byHeaders?.port !== byHost.port) disagree.push('E2b-Sandbox-Port');
  if (disagree.length === 0) return byHost;
  return new SvcError(400, `the Host names port ${byHost.port} of sandbox ${byHost.sandboxId}, and the ${disagree.join(' and ')} header${disagree.length > 1 ? 's' : ''} another: send them the same or leave them out`);
}

/** The authority of an absolute-form request target (`http://host:port/path`); undefined for any other form. */
function absoluteAuthority(url: string): string | undefined {
  if (url.charCodeAt(0) === 47 || url === '*') return undefined; // origin form, the usual case
  const sep = url.indexOf('://');
  if (sep <= 0) return undefined;
  const from = sep + 3;
  let end = url.length;
  for (const c of '/?#') {
    const i = url.indexOf(c, from);
    if (i >= 0 && i < end) end = i;
  }
  return url.slice(from, end);
}

/**
 * `<port>-<sandboxID>.<anything>` (any `:port` suffix of the Host is ignored).
 * Hand-rolled instead of a regex: this runs for every request.
 */
function targetFromHost(host: string | undefined): Target | null {
  if (!host) return null;
  const dash = host.indexOf('-');
  if (dash <= 0 || dash > 5) return null;
  const port = parsePort(host, 0, dash);
  if (port === 0) return null;
  let end = host.indexOf('.', dash + 1);
  if (end < 0) end = host.indexOf(':', dash + 1);
  if (end < 0) end = host.length;
  if (!isSandboxId(host, dash + 1, end)) return null;
  return { sandboxId: host.slice(dash + 1, end), port };
}

/** The official e2b SDK with E2B_SANDBOX_URL sends `E2b-Sandbox-Id` and `E2b-Sandbox-Port`. */
function targetFromHeaders(sandboxId: string | undefined, port: string | undefined): Target | null {
  if (!sandboxId || !isSandboxId(sandboxId, 0, sandboxId.length)) return null;
  if (port === undefined || port === '') return { sandboxId, port: 0 };
  const p = parsePort(port, 0, port.length);
  return p === 0 ? null : { sandboxId, port: p };
}

/** 1..65535, or 0 when the text is not a port. */
function parsePort(s: string, from: number, to: number): number {
  if (to - from < 1 || to - from > 5) return 0;
  let port = 0;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return 0;
    port = port * 10 + c;
  }
  return port <= 65535 ? port : 0;
}

/** Letters, digits, `-` and `_`; at most 64 characters. */
function isSandboxId(s: string, from: number, to: number): boolean {
  if (to - from < 1 || to - from > 64) return false;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    const ok = (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || c === 45 || c === 95;
    if (!ok) return false;
  }
  return true;
}
