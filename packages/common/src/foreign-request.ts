import { isLoopbackHost } from './ip-address.ts';

/**
 * Where a component answers without keys (the API with api.api_key empty, on loopback only),
 * anyone who can send it a request acts as the operator, and a web page can: it makes its own
 * host name resolve to 127.0.0.1 (DNS rebinding) and the browser sends its requests under that
 * name, or it posts a simple cross-site form (CSRF) to 127.0.0.1 itself. Both are told apart by
 * their headers: only requests to the loopback names or `listenHost` (the address listened on),
 * and from no web page of another host (Origin), are served. Found on /mcp first
 * (packages/mcp/src/request-guards.ts), then on every route of the API by a helper reading the
 * console as an attacker (a page killed the default team's sandboxes with one POST).
 */
export function foreignRequest(host: string | undefined, origin: string | undefined, listenHost: string): { header: 'Host' | 'Origin'; value: string } | undefined {
  const listen = bracketed(listenHost.toLowerCase());
  const served = (name: string | undefined) => name !== undefined && (name === listen || isLoopbackHost(name.replace(/^\[(.*)\]$/, '$1')));
  if (!served(hostnameOf(host))) return { header: 'Host', value: host ?? '' };
  if (origin !== undefined && origin !== 'null' && !served(hostnameOf(originAuthority(origin)))) return { header: 'Origin', value: origin };
  return undefined;
}

/** The names foreignRequest serves, for its callers' messages. */
export function localNames(listenHost: string): string {
  return `this machine's loopback names (localhost, 127.0.0.1, [::1]) and ${bracketed(listenHost.toLowerCase())}`;
}

/** A Host header's hostname, lower case (`[::1]` for IPv6); undefined when it is not one. */
function hostnameOf(host: string | undefined): string | undefined {
  if (!host) return undefined;
  try {
    return new URL(`http://${host}`).hostname.toLowerCase();
  } catch {
    return undefined; // not a host name: the caller refuses the request
  }
}

/** An Origin's host and port; empty when it is not a URL. */
function originAuthority(origin: string): string {
  try {
    return new URL(origin).host;
  } catch {
    return ''; // not a URL: the caller refuses the request
  }
}

/** An IPv6 address as a URL writes it. */
function bracketed(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}
