import { SvcError } from '@svc/common';
import { subnetClash, widerRoutesOver, type HostNetwork } from './host-conflicts.ts';
import { intToIp, ipToInt, parseCidr } from '@svc/common';

export { intToIp, parseCidr } from '@svc/common';

export interface SandboxAddresses {
  /** Index of the /30 inside the pool. */
  slot: number;
  /** Host side of the veth pair (.1 of the /30). */
  hostAddress: string;
  /** Sandbox side (.2 of the /30): where envd and user ports answer. */
  sandboxAddress: string;
}

/**
 * Hands out one /30 per sandbox from the node's address pool. With a view of the host network,
 * a /30 that clashes with it (an address, a gateway, another agent's sandbox route) is passed
 * over: a sandbox there would be unreachable, or would cut the host off from that network.
 */
export class AddressPool {
  readonly cidr: string;
  private readonly base: number;
  private readonly prefix: number;
  private readonly slots: number;
  private readonly used = new Set<number>();
  /** Where the next search for a free slot begins. */
  private cursor = 0;

  constructor(cidr: string, private readonly hostNetwork?: () => HostNetwork) {
    const { base, prefix } = parseCidr(cidr);
    if (prefix > 30) throw new Error(`address pool ${cidr} is smaller than a /30`);
    this.cidr = `${intToIp(base)}/${prefix}`;
    this.base = base;
    this.prefix = prefix;
    this.slots = 2 ** (30 - prefix);
  }

  allocate(): SandboxAddresses {
    const host = this.hostNetwork?.();
    let clashes = 0;
    let example = '';
    // Next-fit, not lowest-first: a freed address waits a whole round of the pool before it is
    // given again, so a far end still sending to its old sandbox finds no one (conntrack.ts too).
    for (let i = 0; i < this.slots; i++) {
      const slot = (this.cursor + i) % this.slots;
      if (this.used.has(slot)) continue;
      const net = this.base + slot * 4;
      const clash = host && subnetClash({ first: net, last: net + 3 }, this.prefix, host);
      if (clash) {
        clashes++;
        example ||= `${intToIp(net)}/30 (${clash})`;
        continue;
      }
      this.used.add(slot);
      this.cursor = (slot + 1) % this.slots;
      return this.addresses(slot);
    }
    const detail = clashes ? `; ${clashes} subnets clash with the host network, e.g. ${example}` : '';
    throw new SvcError(503, `address pool ${this.cidr} is exhausted (${this.slots} sandboxes${detail})`);
  }

  /** Interfaces whose routes cover part of the pool: sandboxes hide those addresses of that network. */
  widerRoutes(): string[] {
    const host = this.hostNetwork?.();
    return host ? widerRoutesOver({ first: this.base, last: this.base + this.slots * 4 - 1 }, this.prefix, host) : [];
  }

  /** Marks a slot taken (an adopted sandbox). False when the slot is outside the pool or already taken. */
  reserve(slot: number): boolean {
    if (slot < 0 || slot >= this.slots || this.used.has(slot)) return false;
    this.used.add(slot);
    return true;
  }

  /** Keeps the /30 holding this address (when the pool has it) from ever being handed out. */
  reserveAddress(address: string) {
    const slot = Math.floor((ipToInt(address) - this.base) / 4);
    if (slot >= 0 && slot < this.slots) this.used.add(slot);
  }

  release(slot: number) {
    this.used.delete(slot);
  }

  get inUse() { return this.used.size; }

  addresses(slot: number): SandboxAddresses {
    const net = this.base + slot * 4;
    return { slot, hostAddress: intToIp(net + 1), sandboxAddress: intToIp(net + 2) };
  }
}
