/**
 * The path of a request as the proxy forwards it and as its rules see it (docs/egress.md
 * "Rules"). Rules match on host, method and path, so the path they are decided on must be the
 * one the upstream serves: an upstream that resolves `/v1/public/../../admin` (or its encoded
 * forms) serves `/admin`, and a rule for `/v1/public/*` must not have matched it first.
 *
 * For a path that begins with `/` (origin-form, or the path of an absolute-form URL):
 * - percent-encoded unreserved characters (RFC 3986 2.3: `A-Z a-z 0-9 - . _ ~`) are decoded and
 *   the hex of every other escape is upper-cased (RFC 3986 6.2.2.1 and 6.2.2.2);
 * - dot-segments are removed (RFC 3986 5.2.4).
 * The result is equivalent to what was sent (RFC 3986 6.2.2), so it is what goes upstream. For the
 * rules, runs of `/` count as one as well (many servers merge them). The query is neither
 * decoded nor touched: `..` or `%2F` there mean nothing to the path.
 *
 * A path whose dot-segments appear only once `%2F`, `%5C` or `\` are read as `/` (`/a/..%2F..%2Fadmin`),
 * or as `..;x` (a path parameter, which Tomcat and Spring strip), is refused: an upstream that
 * reads them so would resolve them where the proxy cannot see it. Anything else (`*` of
 * `OPTIONS *`, a target without a leading `/`) is left as it came.
 */
export type RequestPath = { forward: string } | { refused: string };

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

export function requestPath(target: string): RequestPath {
  if (!target.startsWith('/')) return { forward: target };
  const q = target.indexOf('?');
  const rawPath = q < 0 ? target : target.slice(0, q);
  const query = q < 0 ? '' : target.slice(q);
  // Most paths hold nothing to change: no escape, no dot, no backslash.
  if (!/[%.\\]/.test(rawPath)) return { forward: target };
  const path = removeDotSegments(rawPath.includes('%') ? normalizeEscapes(rawPath) : rawPath);
  if (hiddenDotSegment(path)) {
    return { refused: `the path ${JSON.stringify(rawPath)} holds a dot-segment once an encoded slash or backslash is read as "/"; the egress proxy refuses it, since an upstream that decodes it would serve another path than the rules saw` };
  }
  return { forward: path + query };
}

/** The path (not the query) with runs of `/` merged into one: what the rules match on (decide.ts). */
export function rulePath(uri: string): string {
  if (!uri.includes('//')) return uri;
  const q = uri.indexOf('?');
  if (q < 0) return uri.replace(/\/{2,}/g, '/');
  return uri.slice(0, q).replace(/\/{2,}/g, '/') + uri.slice(q);
}

/**
 * A path (and query) as deny rules compare it (decide.ts), read the way the most lenient upstream
 * might, so that a deny rule errs toward matching: lower-cased (case-insensitive servers serve
 * `/ADMIN` as `/admin`), `;params` cut from each path segment (Tomcat and Spring serve
 * `/admin;a=b` as `/admin`), `%2F`, `%5C` and `\` read as `/` (servers that decode them serve
 * `/internal%2Fkeys` as `/internal/keys`), runs of `/` as one. A deny rule's pattern is read the
 * same way, so that one naming `group%2Fproject` still matches it. Allow rules never see this:
 * they match the path exactly as forwarded.
 */
export function denyRulePath(uri: string): string {
  const q = uri.indexOf('?');
  let path = q < 0 ? uri : uri.slice(0, q);
  if (/[%\\]/.test(path)) path = path.replace(/%2F|%5C|\\/gi, '/');
  if (path.includes(';')) path = path.split('/').map((segment) => segment.split(';', 1)[0]).join('/');
  path = path.replace(/\/{2,}/g, '/');
  return (q < 0 ? path : path + uri.slice(q)).toLowerCase();
}

/** The uri with one trailing `/` of its path dropped (not the root's): `/admin/` and `/admin` are one path to a deny rule. */
export function withoutTrailingSlash(uri: string): string {
  const q = uri.indexOf('?');
  const end = q < 0 ? uri.length : q;
  if (end < 2 || uri.charCodeAt(end - 1) !== 47) return uri;
  return uri.slice(0, end - 1) + uri.slice(end);
}

/** Unreserved characters decoded, every other escape's hex upper-cased; a `%` without two hex digits stays. */
function normalizeEscapes(path: string): string {
  return path.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => {
    const c = String.fromCharCode(parseInt(hex, 16));
    return UNRESERVED.test(c) ? c : `%${hex.toUpperCase()}`;
  });
}

/** RFC 3986 5.2.4 on an absolute path (one that begins with `/`). */
function removeDotSegments(path: string): string {
  if (!path.includes('.')) return path;
  const segments = path.split('/');
  const out: string[] = [];
  const last = segments.length - 1;
  for (let i = 1; i <= last; i++) {
    const s = segments[i];
    if (s === '.' || s === '..') {
      if (s === '..') out.pop();
      // A path that ends in a dot-segment ends in "/": `/a/b/..` is `/a/`.
      if (i === last) out.push('');
      continue;
    }
    out.push(s);
  }
  return `/${out.join('/')}`;
}

/** A dot-segment once `%2F`, `%5C` and `\` are read as `/` (the escapes are upper case here), or with a `;` parameter. */
function hiddenDotSegment(path: string): boolean {
  if (!path.includes('.')) return false;
  for (const segment of path.replace(/%2F|%5C|\\/g, '/').split('/')) {
    const name = segment.split(';', 1)[0];
    if (name === '.' || name === '..') return true;
  }
  return false;
}
