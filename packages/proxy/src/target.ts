import { isIssuedSandboxId, SvcError } from '@svc/common';
import { ENVD_PORT } from '@svc/contracts/envd-port';

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
 * `168-1-10`), so a Host that merely looks like one cannot be refused. A Host naming an id in the
 * form the platform issues (isIssuedSandboxId, common ids.ts) is a 400 when it is not the headers'
 * sandbox and port (hostDisagrees): a cache in front that ignores `Vary` would store the headers'
 * sandbox's answer under the Host's URL (the SDK, by name or by URL, never sends two ids,
 * nor a port header other than its Host's). An answer the headers routed carries `Vary`
 * on them (http-exchange.ts) for the caches that honour it. An absolute-form target that names
 * another host than Host is a 400, for the same caches. Ids are matched in lower case
 * (docs/data-plane.md, "Naming the sandbox").
 */
export function requestTarget(h: NamingHeaders, url: string): Target | null | SvcError {
  if (!absoluteFormAgrees(url, h.host)) return new SvcError(400, 'the request target names another host than the Host header');
  const byHost = targetFromHost(h.host);
  if (h.sandboxIdHeader === undefined) return byHost;
  const byHeaders = targetFromHeaders(h.sandboxIdHeader, h.sandboxPortHeader);
  if (byHeaders === null) return null;
  if (byHost !== null && isIssuedSandboxId(byHost.sandboxId)) {
    const refusal = hostDisagrees(byHost, byHeaders);
    if (refusal !== undefined) return new SvcError(400, refusal);
  }
  return { ...byHeaders, byHeaders: true };
}

/**
 * Why a Host naming an issued sandbox names another target than the headers, or undefined when it
 * names the same. An omitted E2b-Sandbox-Port means envd's port and agrees with a Host naming
 * 49983 only: a Host `8080-<id>` answered from envd would be as wrong as one answered from another
 * sandbox (both official SDKs always send the header; a hand-written curl may not).
 */
function hostDisagrees(byHost: Target, byHeaders: Target): string | undefined {
  if (byHost.sandboxId !== byHeaders.sandboxId) {
    return `the Host names sandbox ${byHost.sandboxId} and the E2b-Sandbox-Id header sandbox ${byHeaders.sandboxId}: name one sandbox`;
  }
  // No port header means envd's, which a Host names as 49983: the same target, nothing to poison.
  const headerPort = byHeaders.port === 0 ? ENVD_PORT : byHeaders.port;
  if (byHost.port !== headerPort) {
    const named = byHeaders.port === 0 ? `no port (envd's, ${ENVD_PORT})` : `port ${byHeaders.port}`;
    return `the Host names port ${byHost.port} of sandbox ${byHost.sandboxId} and the E2b-Sandbox-Port header ${named}: name one port`;
  }
  return undefined;
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
 * `<port>-<sandboxID>.<anything>` (any `:port` suffix of the Host is ignored). Host names are
 * case-insensitive (RFC 4343) and the platform's ids are lower-case (common ids.ts), so the id is
 * lower-cased: kept as sent, `8000-IABC…` missed the route cache and the look-up coalescing keyed
 * by `iabc…`, and found `iabc…` anyway on a MySQL master (case-insensitive collation).
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
  const sandboxId = sandboxIdIn(host, dash + 1, end);
  return sandboxId === undefined ? null : { sandboxId, port };
}

/**
 * The official e2b SDK with E2B_SANDBOX_URL sends `E2b-Sandbox-Id` and `E2b-Sandbox-Port`, the
 * id as the API gave it (lower case). Lower-cased like the Host's, so that one sandbox has one
 * spelling whichever way it is named.
 */
function targetFromHeaders(idHeader: string, port: string | undefined): Target | null {
  const sandboxId = sandboxIdIn(idHeader, 0, idHeader.length);
  if (sandboxId === undefined) return null;
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

/**
 * The id in s[from, to), lower-cased, when it is one (letters, digits, `-` and `_`; 1 to 64
 * characters: the node agent's SANDBOX_ID_PATTERN, contracts node-agent-schemas.ts); undefined
 * when not. Allocates a second string only for an id that has upper-case letters.
 */
function sandboxIdIn(s: string, from: number, to: number): string | undefined {
  if (to - from < 1 || to - from > 64) return undefined;
  let upper = false;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c >= 65 && c <= 90) { upper = true; continue; }
    const ok = (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 45 || c === 95;
    if (!ok) return undefined;
  }
  const id = s.slice(from, to);
  return upper ? id.toLowerCase() : id;
}
