import { readFileSync } from 'node:fs';
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';

/** A subnet attached to this host through an interface: its network address and mask, as numbers. */
export interface AttachedNetwork {
  base: number;
  mask: number;
  /** As the interface has it (172.17.0.1/16), for messages. */
  cidr: string;
  iface: string;
}

/** The interfaces that carry a default route, from Linux's /proc/net/route; undefined when it cannot be read. */
export function defaultRouteInterfaces(routeTable?: string): Set<string> | undefined {
  let text = routeTable;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/net/route', 'utf8');
    } catch {
      return undefined;
    }
  }
  const out = new Set<string>();
  for (const line of text.split('\n').slice(1)) {
    const [iface, destination, , , , , , mask] = line.trim().split(/\s+/);
    if (iface && destination === '00000000' && mask === '00000000') out.add(iface);
  }
  return out;
}

/**
 * The IPv4 subnets directly attached to this host through an interface other than the ones that
 * carry the default route (docs/egress.md "What the proxy never connects to"): Docker's bridges,
 * libvirt's, a CNI's. The egress proxy dials from the host's namespace and so reaches them,
 * where the sandbox's own packets would be stopped by the kernel's FORWARD rules. Loopback is
 * left out (refused on its own). With no route table to read, every interface's subnet counts:
 * the failure refuses more, never less.
 */
export function attachedNetworks(interfaces: NodeJS.Dict<NetworkInterfaceInfo[]>, defaults: Set<string> | undefined): AttachedNetwork[] {
  const out: AttachedNetwork[] = [];
  for (const [iface, list] of Object.entries(interfaces)) {
    if (defaults?.has(iface)) continue;
    for (const info of list ?? []) {
      if (info.family !== 'IPv4' || info.internal) continue;
      const mask = ipv4Number(info.netmask);
      out.push({ base: (ipv4Number(info.address) & mask) >>> 0, mask, cidr: info.cidr ?? `${info.address}/${info.netmask}`, iface });
    }
  }
  return out;
}

/** This host's attached networks now. */
export function readAttachedNetworks(): AttachedNetwork[] {
  return attachedNetworks(networkInterfaces(), defaultRouteInterfaces());
}

function ipv4Number(dotted: string): number {
  return dotted.split('.').reduce((n, octet) => n * 256 + Number(octet), 0) >>> 0;
}
