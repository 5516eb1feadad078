import { lookup as dnsLookup } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { addressRefusal, type AddressRefusal } from './address-refusal.ts';
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
 * database listen; nor into a private or reserved network (RFC 1918, 100.64/10, 198.18/15,
 * fc00::/7, multicast: address-refusal.ts), where the platform's other hosts and the operator's
 * services are. Measured through `svc up` before this: a registry answering every path with a
 * redirect to `http://127.0.0.1:<master>/v1/sandboxes` had the master's list fetched for it. A
 * registry the operator named (template_center.host_registries, a mirror) is not asked about:
 * RegistryClientOptions.trusted.
 * The connection does not resolve the name again after this check: it is made through
 * guardedLookup, which checks the address it connects to.
 */
export async function hopRefusal(registry: string, next: URL, resolve: ResolveHost = systemResolve): Promise<string | undefined> {
  const why = await refusedHost(next.hostname.replace(/^\[|\]$/g, ''), resolve);
  return why && `${registry} sent the pull to ${next.origin}, and ${why.text}: the template center follows a registry into ${where(why)} only for a registry the operator names in template_center.host_registries`;
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
 * the master, and learn from the answers which of the host's ports are open. A registry on a
 * private or reserved network is the operator's own in the same way (another host of the
 * platform, a cloud's metadata service at 100.100.100.200), and is refused the same way unless
 * listed. Docs: docs/templates.md "The builder".
 */
export async function registryRefusal(registry: string, resolve: ResolveHost = systemResolve): Promise<string | undefined> {
  const why = await refusedHost(registryHost(registry), resolve);
  if (!why) return undefined;
  const on = why.onHost ? 'on the host the template center runs on' : 'on a private or reserved network';
  return `registry ${registry} is ${on} (${why.text}); builds pull from a registry there only when the operator names it in template_center.host_registries (SVC_HOST_REGISTRIES), for example "${registry}"`;
}

const where = (why: { onHost: boolean }) => (why.onHost ? 'the host it runs on' : 'a private or reserved network');

/** Why `host` is no place for a registry the operator did not name, when it is; a name that does not resolve reaches nothing. */
async function refusedHost(host: string, resolve: ResolveHost): Promise<{ text: string; onHost: boolean } | undefined> {
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : host === 'localhost' ? ['127.0.0.1'] : await resolve(host);
  } catch {
    // Not resolvable now: the connection that follows fails the pull by itself.
    return undefined;
  }
  // The host's own first: of a name with both kinds of address, that is the one to tell.
  const refusals = addresses.map(addressRefusal).filter((w): w is AddressRefusal => w !== undefined).sort((x, y) => Number(y.onHost) - Number(x.onHost));
  const why = refusals[0];
  return why && { text: `${host === why.address ? why.address : `${host} (${why.address})`} ${why.reason}`, onHost: why.onHost };
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
      const why = addressRefusal(address);
      if (why) {
        const refused = new RegistryError(`${hostname} resolved to ${why.address}, which ${why.reason}: the template center connects into ${where(why)} only for a registry the operator names in template_center.host_registries`, 403);
        callback(refused, '', 0);
        return;
      }
    }
    if (options.all) callback(null, addresses);
    else callback(null, addresses[0].address, addresses[0].family);
  });
};
