import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { hostAddresses } from '@svc/common';
import { registryHost } from './reference.ts';

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
 * The connection resolves a name again after this check: a name whose answer changes between the
 * two (a TTL of 0) is not caught here; pinning the address would need fetch's own dispatcher.
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
    const a = raw.toLowerCase().replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, '$1');
    const why = a.startsWith('127.') || a === '::1' ? 'is loopback'
      : a.startsWith('0.') || a === '::' ? 'means this host'
        : a.startsWith('169.254.') || /^fe[89ab][0-9a-f]:/.test(a) ? 'is link-local'
          : hostAddresses().includes(a) ? 'is an address of this host' : undefined;
    if (why) return `${host === a ? a : `${host} (${a})`} ${why}`;
  }
  return undefined;
}
