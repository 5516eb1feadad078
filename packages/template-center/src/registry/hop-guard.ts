import { lookup as dnsLookup } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { canonicalAddress, hostAddresses } from '@svc/common';
import { registryHost } from './reference.ts';
import { RegistryError } from './registry-error.ts';

/** A host's addresses (tests give their own). */
export type ResolveHost = (host: string) => Promise<string[]>;

const systemResolve: ResolveHost = async (host) => (await lookup(host, { all: true })).map((a) => a.address);

/**
 * Why the template center may not follow a registry to `next` (a redirect, a token service's
 * realm); undefined when it may (docs/templates.md, "The builder"). A registry must not send the
 * template center into the host it runs on: loopback, 0.0.0.0/8, link-local (cloud metadata) or
 * one of the host's own addresses, where the master's operator API, the node agent and the
 * database listen. Measured through `svc up` before this: a registry answering every path with a
 * redirect to `http://127.0.0.1:<master>/v1/sandboxes` had the master's list fetched for it. A
 * registry the operator named (template_center.host_registries, a mirror) is not asked about:
 * RegistryClientOptions.trusted.
 * The connection does not resolve the name again after this check: it is made through
 * guardedLookup, which checks the address it connects to.
 */
export async function hopRefusal(registry: string, next: URL, resolve: ResolveHost = systemResolve): Promise<string | undefined> {
  const why = await onHost(next.hostname.replace(/^\[|\]$/g, ''), resolve);
  return why && `${registry} sent the pull to ${next.origin}, and ${why}: the template center follows a registry into the host it runs on only for a registry the operator names in template_center.host_registries`;
}

/** Whether the operator named `registry` in template_center.host_registries (`*`: every registry). */
export function listedRegistry(registry: string, hostRegistries: readonly string[]): boolean {
  const name = registry.toLowerCase();
  return hostRegistries.some((r) => r === '*' || r.toLowerCase() === name);
}

/**
 * Why a build may not pull from `registry` itself; undefined when it may. A registry on the host
 * the template center runs on (a name resolving to loopback, 0.0.0.0/8, link-local or one of the
 * host's addresses) is one of the host's own services unless the operator says otherwise: a team
 * naming `127.0.0.1:<master's port>` would have the template center send registry-shaped GETs to
 * the master, and learn from the answers which of the host's ports are open. Docs:
 * docs/templates.md "The builder".
 */
export async function registryRefusal(registry: string, resolve: ResolveHost = systemResolve): Promise<string | undefined> {
  const why = await onHost(registryHost(registry), resolve);
  return why && `registry ${registry} is on the host the template center runs on (${why}); builds pull from a registry there only when the operator names it in template_center.host_registries (SVC_HOST_REGISTRIES), for example "${registry}"`;
}

/** How `host` reaches the host itself, when it does; a name that does not resolve reaches nothing. */
async function onHost(host: string, resolve: ResolveHost): Promise<string | undefined> {
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : host === 'localhost' ? ['127.0.0.1'] : await resolve(host);
  } catch {
    // Not resolvable now: the connection that follows fails the pull by itself.
    return undefined;
  }
  for (const raw of addresses) {
    const why = addressOnHost(raw);
    if (why) return `${host === why.address ? why.address : `${host} (${why.address})`} ${why.reason}`;
  }
  return undefined;
}

/** Whether an address is the host's own (loopback, 0.0.0.0/8, link-local, one of its interfaces'), and why. */
function addressOnHost(raw: string): { address: string; reason: string } | undefined {
  const a = canonicalAddress(raw);
  const reason = a.startsWith('127.') || a === '::1' ? 'is loopback'
    : a.startsWith('0.') || a === '::' ? 'means this host'
      : a.startsWith('169.254.') || /^fe[89ab][0-9a-f]:/.test(a) ? 'is link-local'
        : hostAddresses().some((h) => canonicalAddress(h) === a) ? 'is an address of this host' : undefined;
  return reason === undefined ? undefined : { address: a, reason };
}

/**
 * The `lookup` of every connection a registry client opens for a registry the operator did not
 * name (registry-client.ts): the name is resolved once, here, the answer checked, and the
 * connection made to the address checked. The checks before a request (registryRefusal,
 * hopRefusal) give the clear message, but the connection would resolve the name again, and a name
 * answering a public address to the check and 127.0.0.1 to the connection (a TTL of 0: DNS
 * rebinding) would reach the host's own services. An address given as an IP literal is not
 * looked up by node; the checks before cover it.
 */
export const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) { callback(err, '', 0); return; }
    if (addresses.length === 0) { callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '', 0); return; }
    for (const { address } of addresses) {
      const why = addressOnHost(address);
      if (why) {
        const refused = new RegistryError(`${hostname} resolved to ${why.address}, which ${why.reason}: the template center connects into the host it runs on only for a registry the operator names in template_center.host_registries`, 403);
        callback(refused, '', 0);
        return;
      }
    }
    if (options.all) callback(null, addresses);
    else callback(null, addresses[0].address, addresses[0].family);
  });
};
