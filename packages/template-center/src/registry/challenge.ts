/** A parsed WWW-Authenticate challenge: `Bearer realm="…",service="…",scope="…"` or `Basic realm="…"`. */
export interface AuthChallenge {
  scheme: string;
  params: Record<string, string>;
}

export function parseChallenge(header: string | null): AuthChallenge | null {
  if (!header) return null;
  const m = /^\s*([A-Za-z][\w-]*)\s*(.*)$/s.exec(header);
  if (!m) return null;
  const params: Record<string, string> = {};
  const re = /([A-Za-z][\w-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))\s*,?\s*/gy;
  const rest = m[2];
  re.lastIndex = 0;
  let p: RegExpExecArray | null;
  while (re.lastIndex < rest.length && (p = re.exec(rest))) {
    params[p[1].toLowerCase()] = p[2] !== undefined ? p[2].replace(/\\(.)/g, '$1') : p[3];
  }
  return { scheme: m[1].toLowerCase(), params };
}
