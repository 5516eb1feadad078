import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { badRequest, canonicalAddress, embeddedIpv4, hostAddresses, inIpCidr, isLoopbackHost, parseIpCidr, type IpCidr } from '@svc/common';
import type { PlatformAddresses } from '@svc/contracts/egress';
import { parseWebhookUrl } from '@svc/contracts/events';

/** Where one of the platform's own components listens: an address (a wildcard for all) and a port. */
export interface Endpoint {
  host: string;
  port: number;
}

export interface WebhookTargetRules {
  /** The platform's components (master, gateway, node agents, proxies, egress admin, database, Redis). */
  platform: () => Promise<Endpoint[]>;
  /** The sandbox address pools: no webhook may reach a sandbox (it would be a way into another team's). */
  pools: string[];
  /** master.platform_networks: the platform's own hosts, on every port. */
  networks?: string[];
  /** events.webhook_allow_cidrs: when not empty, every address a URL resolves to must be in one. */
  allowCidrs: string[];
  /** Resolves a host name to its addresses (tests give their own). */
  resolve?: (host: string) => Promise<string[]>;
}

/** A listen address that binds every address of its host (parseListen drops the brackets of `[::]`). */
export const WILDCARDS = new Set(['0.0.0.0', '::', '']);

/**
 * The check of a webhook's URL (docs/observability.md, "Where a webhook may point"): http or
 * https, and no address it resolves to is one of the platform's own endpoints, in a sandbox
 * pool, or link-local (a cloud's metadata service, with the machine's credentials). Other
 * loopback and private addresses are allowed: a self-hosted platform's webhooks usually go to
 * the operator's own services. An IPv6 address carrying an IPv4 one (NAT64, 6to4) is judged as
 * the IPv4 address it reaches. The check runs when a webhook is saved and again at each
 * delivery, whose connection goes to the address checked then (a name that resolves elsewhere
 * later, DNS rebinding, cannot slip past it).
 */
export class WebhookTargets {
  private readonly pools: IpCidr[];
  private readonly networks: IpCidr[];
  private readonly allow: IpCidr[];
  private readonly resolve: (host: string) => Promise<string[]>;

  constructor(private readonly rules: WebhookTargetRules) {
    this.pools = rules.pools.filter(Boolean).map((c) => parseIpCidr(c));
    this.networks = (rules.networks ?? []).filter(Boolean).map((c) => parseIpCidr(c));
    this.allow = rules.allowCidrs.filter(Boolean).map((c) => parseIpCidr(c));
    this.resolve = rules.resolve ?? (async (host) => (await lookup(host, { all: true })).map((a) => a.address));
  }

  /** The addresses a delivery may connect to; a 400 naming the address and why when one is not allowed. */
  async check(raw: string): Promise<{ url: URL; addresses: string[] }> {
    const url = parseWebhookUrl(raw);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    let addresses: string[];
    try {
      addresses = isIP(host) ? [host] : await this.resolve(host);
    } catch (err) {
      throw badRequest(`url's host ${host} does not resolve (${(err as Error).message})`);
    }
    if (addresses.length === 0) throw badRequest(`url's host ${host} does not resolve`);
    const platform = await this.resolvedPlatform();
    for (const a of addresses.map(canonicalAddress)) {
      const why = this.judge(a, port, platform, 'webhook');
      if (why) throw badRequest(`url ${url.origin} is not allowed: ${a}${host === a ? '' : ` (${host})`} ${why}`);
    }
    return { url, addresses: addresses.map(canonicalAddress) };
  }

  /**
   * A host:port the platform itself will connect to for a user (a sandbox's SOCKS5 egressProxy):
   * the same refusals as a webhook's URL, except events.webhook_allow_cidrs, which is for
   * webhooks; and loopback, which the egress proxy never dials for a sandbox (docs/egress.md
   * "What the proxy never connects to"). A 400 that begins with `what`.
   */
  async checkEndpoint(host: string, port: number, what: string): Promise<void> {
    let addresses: string[];
    try {
      addresses = isIP(host) ? [host] : await this.resolve(host);
    } catch (err) {
      throw badRequest(`${what}'s host ${host} does not resolve (${(err as Error).message})`);
    }
    if (addresses.length === 0) throw badRequest(`${what}'s host ${host} does not resolve`);
    const platform = await this.resolvedPlatform();
    for (const a of addresses.map(canonicalAddress)) {
      const why = this.judge(a, port, platform, 'endpoint');
      if (why) throw badRequest(`${what} ${host}:${port} is not allowed: ${a}${host === a ? '' : ` (${host})`} ${why}`);
    }
  }

  /**
   * The platform's endpoints as IPv4 addresses, for the egress proxy (PlatformAddresses): names
   * resolved here, a wildcard listener as each of this host's own IPv4 addresses, loopback left out
   * (the egress proxy refuses its own loopback whatever the port, and this host's loopback is no
   * other host's); and the sandbox pools.
   */
  async platformAddresses(): Promise<PlatformAddresses> {
    const seen = new Set<string>();
    const endpoints: PlatformAddresses['endpoints'] = [];
    const add = (ip: string, port: number) => {
      const a = canonicalAddress(ip);
      if (isIP(a) !== 4 || isLoopbackHost(a) || seen.has(`${a}:${port}`)) return;
      seen.add(`${a}:${port}`);
      endpoints.push({ ip: a, port });
    };
    for (const e of await this.resolvedPlatform()) {
      if (WILDCARDS.has(e.host)) for (const a of hostAddresses()) add(a, e.port);
      else add(e.host, e.port);
    }
    return { endpoints, pools: this.rules.pools.filter(Boolean), networks: (this.rules.networks ?? []).filter(Boolean) };
  }

  /** The platform's endpoints, a name among them also by the addresses it resolves to. */
  private async resolvedPlatform(): Promise<Endpoint[]> {
    const out: Endpoint[] = [];
    for (const e of await this.rules.platform()) {
      out.push(e);
      if (isIP(e.host) || WILDCARDS.has(e.host) || e.host === 'localhost') continue;
      const addresses = await this.resolve(e.host).catch(() => {
        // A component's name that does not resolve here is compared by its name alone.
        return [] as string[];
      });
      for (const a of addresses) out.push({ host: a, port: e.port });
    }
    return out;
  }

  /**
   * Why `address` (canonical) may not be connected to for a webhook or a sandbox's endpoint. An
   * IPv6 form that carries an IPv4 address reaches that address (through a NAT64 gateway, a 6to4
   * relay), so it is that address that is judged, by every rule.
   */
  private judge(address: string, port: number, platform: Endpoint[], kind: 'webhook' | 'endpoint'): string | undefined {
    const carried = embeddedIpv4(address);
    if (carried) {
      const why = this.judge(carried, port, platform, kind);
      return why && `carries ${carried}, which ${why}`;
    }
    return this.refusal(address, port, platform, kind === 'webhook') ?? metadataRefusal(address) ?? (kind === 'endpoint' ? loopbackRefusal(address) : undefined);
  }

  private refusal(address: string, port: number, platform: Endpoint[], allowList: boolean): string | undefined {
    // 0.0.0.0 and :: connect to this host itself, whatever listens on any of its addresses.
    if (address === '::' || (isIP(address) === 4 && address.startsWith('0.'))) return 'is no address to deliver to (it means this host)';
    if (this.pools.some((c) => inIpCidr(address, c))) return 'is in the sandbox address pool';
    if (this.networks.some((c) => inIpCidr(address, c))) return 'is in master.platform_networks (the platform\'s own hosts)';
    if (allowList && this.allow.length && !this.allow.some((c) => inIpCidr(address, c))) return 'is outside events.webhook_allow_cidrs';
    const local = isLocal(address);
    for (const e of platform) {
      if (e.port !== port) continue;
      const host = canonicalAddress(e.host);
      if (host === address || (WILDCARDS.has(host) && local) || (host === 'localhost' && isLoopbackHost(address))) return `port ${port} is one of the platform's own components`;
    }
    return undefined;
  }
}

const LINK_LOCAL = [parseIpCidr('169.254.0.0/16'), parseIpCidr('fe80::/10')];
/** AWS's metadata service on IPv6 (Nitro instances): a unique local address, not a link-local one. */
const AWS_METADATA_V6 = parseIpCidr('fd00:ec2::254');

/**
 * A cloud's metadata service, which answers with the machine's credentials, whatever the port:
 * no webhook and no sandbox's endpoint reaches it (until 2026-12-01 only the latter was refused).
 */
function metadataRefusal(address: string): string | undefined {
  if (LINK_LOCAL.some((c) => inIpCidr(address, c))) return 'is link-local (cloud metadata services)';
  if (inIpCidr(address, AWS_METADATA_V6)) return 'is AWS\'s IPv6 metadata service';
  return undefined;
}

/** The machine the egress proxy runs on, whatever the port. */
function loopbackRefusal(address: string): string | undefined {
  return isLoopbackHost(address) ? 'is a loopback address (the host itself)' : undefined;
}

/** This host's own address: what a component listening on every address answers on. */
function isLocal(address: string): boolean {
  if (isLoopbackHost(address) || address === '0.0.0.0' || address === '::') return true;
  return hostAddresses().map(canonicalAddress).includes(address);
}
