import type { FastifyRequest } from 'fastify';
import { isIP } from 'node:net';
import { canonicalAddress, inIpCidr, parseIpCidr, type IpCidr } from '@svc/common';

/**
 * The address a request came from, for the failed-key budget and the audit log's `source`
 * (docs/security.md, "Behind a load balancer"). From a peer in api.trusted_proxies it is read
 * from X-Forwarded-For: the right-most address there that is not itself a trusted proxy, since
 * each proxy appends the address it was reached from and anything further left is the client's
 * own to write. From any other peer the header is ignored: a client could name any address.
 */
export class ClientAddresses {
  private readonly trusted: IpCidr[];

  /** `trusted`: api.trusted_proxies as configured (validated by validateConfig). */
  constructor(trusted: string) {
    this.trusted = trusted.split(',').map((x) => x.trim()).filter(Boolean).map((c) => parseIpCidr(c));
  }

  of(req: FastifyRequest): string {
    const peer = canonicalAddress(req.socket?.remoteAddress ?? req.ip);
    if (!this.isTrusted(peer)) return peer;
    let client = peer;
    for (const hop of forwardedFor(req.headers['x-forwarded-for']).reverse()) {
      // Not an address: the trusted hop to its right is the last one that told the truth.
      if (!hop) return client;
      client = hop;
      if (!this.isTrusted(hop)) return hop;
    }
    // Every hop is a trusted proxy (or none was named): the farthest one is the client.
    return client;
  }

  private isTrusted(address: string): boolean {
    return this.trusted.some((c) => inIpCidr(address, c));
  }
}

/** The header's addresses, left to right (every header line joined); '' for an entry that is no address. */
function forwardedFor(header: string | string[] | undefined): string[] {
  if (header === undefined) return [];
  const entries = (Array.isArray(header) ? header.join(',') : header).split(',').map((x) => x.trim());
  return entries.map((e) => {
    // Some proxies write an IPv6 address in brackets, some add the port ([2001:db8::1]:443, 192.0.2.1:80).
    const bare = /^\[([^\]]+)\](?::\d+)?$/.exec(e)?.[1] ?? /^(\d+\.\d+\.\d+\.\d+):\d+$/.exec(e)?.[1] ?? e;
    return isIP(bare) ? canonicalAddress(bare) : '';
  });
}
