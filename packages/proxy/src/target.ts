/** Which sandbox and port a data-plane request is for. */
export interface Target {
  sandboxId: string;
  /** 0: the sandbox's envd port. */
  port: number;
}

/**
 * `<port>-<sandboxID>.<anything>` (any `:port` suffix of the Host is ignored).
 * Hand-rolled instead of a regex: this runs for every request.
 */
export function targetFromHost(host: string | undefined): Target | null {
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
export function targetFromHeaders(sandboxId: string | undefined, port: string | undefined): Target | null {
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
