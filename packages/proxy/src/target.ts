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
 * The sandbox and port a request names: by the E2b-Sandbox-Id and -Port headers when they are
 * sent, else by Host; null when neither names one. The headers win, as E2B's own proxy reads
 * them: with E2B_SANDBOX_URL the official SDK sends them with a Host that is the proxy's own
 * name, which may look like a sandbox's (`192-168-1-10.sslip.io` reads as port 192 of sandbox
 * `168-1-10`), so a Host that disagrees cannot be refused. An answer they routed carries `Vary`
 * on them (http-exchange.ts), so that a cache in front that keys on the URL does not store one
 * sandbox's answer as another's. An absolute-form target that names another host than Host is a
 * 400, for the same cache.
 */
export function requestTarget(h: NamingHeaders, url: string): Target | null | SvcError {
  if (!absoluteFormAgrees(url, h.host)) return new SvcError(400, 'the request target names another host than the Host header');
  if (h.sandboxIdHeader === undefined) return targetFromHost(h.host);
  const byHeaders = targetFromHeaders(h.sandboxIdHeader, h.sandboxPortHeader);
  return byHeaders && { ...byHeaders, byHeaders: true };
}

/**
 * Whether an absolute-form request target (`http://host:port/path`) names the Host's host and
 * port, compared as URLs compare them (case, a default port, userinfo); true for any other form.
 */
function absoluteFormAgrees(url: string, host: string | undefined): boolean {
  if (url.charCodeAt(0) === 47 || url === '*') return true; // origin form, the usual case
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) return true;
  try {
    const target = new URL(url);
    const named = new URL(`${target.protocol}//${host ?? ''}`);
    return target.host === named.host;
  } catch {
    return false; // a target or Host that is no URL cannot be shown to agree
  }
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
