import { SvcError } from '@svc/common';

/**
 * Why the gateway refuses a request's path before anything else reads it; undefined when it
 * may go on (docs/security.md, "The gateway's paths"). The gateway checks paths as it routes them
 * and forwards them to the master as they came, where fetch's URL parser would resolve what the
 * router did not:
 * - a dot segment, raw or percent-encoded (`..`, `%2e%2e`, `.%2E`), or behind a backslash, which
 *   fetch reads as a slash, or behind an encoded slash or backslash (`%2F`, `%5C`), which the
 *   router decodes into a wildcard parameter that a route then puts in the master's path.
 *   `/volumecontent/%2e%2e/%2e%2e/v1/teams` reached the master's `/v1/teams` with no team (the
 *   operator's calls), `/volumecontent/x%2F..%2F..%2F..%2Fv1%2Fteams` too until the encoded
 *   slash was a separator here, and `/secrets/../v1/nodes` its node routes;
 * - a percent-encoded letter, digit or `-._~`, which no client needs to encode (RFC 3986
 *   section 2.3) and which the router decodes: `/%73vc/template` matched `/svc/template` while
 *   the operator-only checks, reading the path as it came, saw another path.
 */
export function pathRefusal(url: string): string | undefined {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (/%(?:[46][1-9a-f]|[57][0-9a]|3[0-9]|2d|2e|5f|7e)/i.test(path)) {
    return 'the path percent-encodes a letter, digit or one of "-._~", which need no encoding: send them as they are';
  }
  // URL parsers drop tabs and line breaks inside a URL, so `.\t.` is a dot segment to them too.
  for (const raw of path.replace(/[\t\n\r]/g, '').split(/[/\\]|%2f|%5c/i)) {
    if (raw === '.' || raw === '..') return 'the path has a "." or ".." segment';
  }
  return undefined;
}

/** The gateway's first hook: a refused path is a 400 before the key check, the routes or the master see it. */
export function checkPath(url: string): void {
  const why = pathRefusal(url);
  if (why) throw new SvcError(400, why);
}
