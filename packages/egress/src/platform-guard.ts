import { hostAddresses, isIpv4, parseCidr, type Logger } from '@svc/common';
import type { PlatformAddresses } from '@svc/contracts/egress';
import { EgressPolicySource } from '@svc/contracts/egress-routes';
import { readAttachedNetworks, type AttachedNetwork } from './attached-networks.ts';
import type { PlaceholderSource } from './placeholders.ts';

/** The guard's plain settings (a worker's start message carries them). */
export interface PlatformGuardSettings {
  /** node_agent.address_pool: every sandbox's address, this node's and the others'. */
  sandboxPool: string;
  /**
   * Refuse the subnets attached to this host through interfaces other than the default route's
   * (attached-networks.ts); absent: not refused (tests on loopback, and a test internet on a veth).
   */
  refuseAttachedNetworks?: boolean;
}

/** The master's list of the platform's addresses, on the master the placeholders come from (the same token). */
export function platformSourceOf(source: PlaceholderSource | undefined): (() => Promise<PlatformAddresses>) | undefined {
  if (!source) return undefined;
  const master = new EgressPolicySource(source.masterAddr, source.token, { clusterToken: source.clusterToken });
  return () => master.platformAddresses();
}

/** How often this host's addresses and the master's list are read again. */
const REFRESH_MS = 30_000;
/** How often the master's list is asked for until it first answers (the proxy refuses sandboxes' requests until then). */
const FIRST_READ_RETRY_MS = 1_000;

export interface Cidr { base: number; mask: number }

function cidrOf(text: string): Cidr {
  const { base, prefix } = parseCidr(text);
  return { base, mask: prefix === 0 ? 0 : (~0 << (32 - prefix)) >>> 0 };
}

/**
 * What the egress proxy never connects to for a sandbox, whatever its rules say (docs/egress.md
 * "What the proxy never connects to"). The proxy runs on the host, outside the sandbox's network
 * namespace, so a rule for `127.0.0.1`, or a name that resolves there, would otherwise reach what
 * the sandbox's own packets cannot: the master's operator API, the node agent, the database, the
 * host's other services, another team's sandbox, the cloud's metadata service.
 *
 * Refused on any port: loopback, 0.0.0.0/8 ("this host"), link-local (169.254.0.0/16), this
 * host's own addresses, the sandbox pools, and with refuseAttachedNetworks the subnets attached
 * to the host through interfaces other than the default route's (read again every 30 s). Refused on their port: the platform's endpoints on
 * other hosts (a cluster's master, database, Redis), the master's list, read again every 30 s and
 * kept when the master does not answer; until its first answer the proxy is not ready (`listed`).
 * A sandbox's own SOCKS5 proxy is checked here too; the destinations it is asked for are on its
 * side of the world, and only link-local and the platform's listed endpoints and hosts are
 * refused there (refusalThroughSandboxProxy).
 */
export class PlatformGuard {
  private readonly configuredPool: Cidr;
  /** The configured pool, then the master's pools. */
  private pools: Cidr[];
  /** master.platform_networks, from the master's list. */
  private networks: Cidr[] = [];
  private hostAddresses = new Set<string>();
  /** refuseAttachedNetworks: the host's other interfaces' subnets as read, with its addresses. */
  private attachedRead: AttachedNetwork[] = [];
  /** attachedRead less the subnets inside a sandbox pool, one per subnet: what refusal() scans. */
  private attached: AttachedNetwork[] = [];
  private endpoints = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private retry: NodeJS.Timeout | undefined;
  private failing = false;
  private read = false;

  /** `readAttached`: the attached subnets (tests give their own); only asked when refuseAttachedNetworks. */
  constructor(
    private readonly settings: PlatformGuardSettings,
    private readonly source: (() => Promise<PlatformAddresses>) | undefined,
    private readonly logger: Logger,
    private readonly readAttached: () => AttachedNetwork[] = readAttachedNetworks,
  ) {
    this.configuredPool = cidrOf(settings.sandboxPool);
    this.pools = [this.configuredPool];
    this.readHostAddresses();
  }

  /**
   * Whether the master's list has been read (always, without a master to read it from). Until it
   * is, the proxy is not ready and refuses every sandbox's request (exchange-gate.ts,
   * tcp-tunnel.ts): in a cluster the master, the database and Redis may sit on other hosts, and
   * only that list names them.
   */
  get listed(): boolean {
    return this.read || !this.source;
  }

  /**
   * Reads the lists once (resolved whether the master answered or not), then again every 30 s; a
   * master that has not answered yet is asked every second until it does. In `svc up` the master
   * is up before the proxy starts, so the proxy opens with the list.
   */
  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), REFRESH_MS).unref();
    if (!this.listed) this.retryFirstRead();
  }

  stop(): void {
    clearInterval(this.timer);
    clearTimeout(this.retry);
  }

  private retryFirstRead(): void {
    this.retry = setTimeout(() => {
      void this.refresh().then(() => { if (!this.listed) this.retryFirstRead(); });
    }, FIRST_READ_RETRY_MS).unref();
  }

  /**
   * Why the proxy may not connect to ip:port for a sandbox; undefined when it may. `ip` is IPv4.
   * On every request: about 0.1 µs (2 million calls in a loop, this machine), against the 55 µs of
   * CPU an HTTPS keep-alive request costs the proxy (docs/benchmarks.md).
   */
  refusal(ip: string, port: number): string | undefined {
    const n = ipv4ToInt(ip);
    const first = n >>> 24;
    if (first === 127) return 'is a loopback address (the host itself)';
    if (first === 0) return 'means the host itself';
    if (n >>> 16 === 0xa9fe) return 'is link-local (cloud metadata services)';
    if (this.pools.some((c) => ((n & c.mask) >>> 0) === c.base)) return 'is in the sandbox address pool';
    if (this.networks.some((c) => ((n & c.mask) >>> 0) === c.base)) return 'is one of the platform\'s own hosts (master.platform_networks)';
    if (this.hostAddresses.has(ip)) return 'is an address of the host itself';
    if (this.endpoints.has(`${ip}:${port}`)) return `port ${port} is one of the platform's own components`;
    for (const a of this.attached) {
      if (((n & a.mask) >>> 0) === a.base) return `is on a network attached to the host through ${a.iface} (${a.cidr}), not its default route (egress.refuse_attached_networks)`;
    }
    return undefined;
  }

  /**
   * Why the proxy may not ask a sandbox's own SOCKS5 proxy (network.egressProxy) for ip:port;
   * undefined when it may. That proxy opens the connection on its side of the world, where the
   * host's loopback, this host's addresses and the sandbox pools mean nothing of the platform's,
   * so those are left to it; but link-local is a cloud's metadata service wherever the proxy
   * runs, and the platform's own endpoints and hosts (the master's list) are the platform's from
   * any host of its network that a tenant's proxy may sit on. The address is the one this proxy
   * resolved and pins in the SOCKS5 request (never a name the remote proxy resolves itself).
   */
  refusalThroughSandboxProxy(ip: string, port: number): string | undefined {
    const n = ipv4ToInt(ip);
    if (n >>> 16 === 0xa9fe) return 'is link-local (cloud metadata services)';
    if (this.networks.some((c) => ((n & c.mask) >>> 0) === c.base)) return 'is one of the platform\'s own hosts (master.platform_networks)';
    if (this.endpoints.has(`${ip}:${port}`)) return `port ${port} is one of the platform's own components`;
    return undefined;
  }

  private readHostAddresses(): void {
    this.hostAddresses = new Set(hostAddresses().filter(isIpv4));
    if (!this.settings.refuseAttachedNetworks) return;
    try {
      this.attachedRead = this.readAttached();
      this.attached = outsidePools(this.attachedRead, this.pools);
    } catch (err) {
      // The last list stands: a bridge rarely goes away.
      this.logger.warn({ err: (err as Error).message }, 'egress: this host\'s attached networks could not be read; the last list stands');
    }
  }

  /** Reads this host's addresses and the master's list again (start() does every 30 s). */
  async refresh(): Promise<void> {
    this.readHostAddresses();
    if (!this.source) return;
    try {
      const list = await this.source();
      this.endpoints = new Set(list.endpoints.map((e) => `${e.ip}:${e.port}`));
      this.pools = [this.configuredPool, ...list.pools.map(cidrOf)];
      this.attached = outsidePools(this.attachedRead, this.pools);
      this.networks = (list.networks ?? []).map(cidrOf);
      this.read = true;
      if (this.failing) this.logger.info({ endpoints: list.endpoints.length }, 'egress: the master\'s list of platform addresses is read again');
      this.failing = false;
    } catch (err) {
      // The last list stands (an endpoint rarely moves); the refusals that need no master always hold.
      if (!this.failing) {
        this.logger.warn({ err: (err as Error).message }, this.read
          ? 'egress: the master\'s list of platform addresses could not be read; the last one stands'
          : 'egress: the master\'s list of platform addresses could not be read; sandboxes\' requests are refused until it is (asked every second)');
      }
      this.failing = true;
    }
  }
}

/**
 * The attached subnets refusal() needs to scan: those not inside a sandbox pool, each once. Every
 * sandbox's veth puts a subnet of the pool on the host, so unfiltered the list grew with the
 * sandboxes on the node and each allowed request scanned all of them; the pool check before it
 * already refuses their addresses. What stays is the host's few bridges (Docker, libvirt, a CNI).
 */
export function outsidePools(attached: AttachedNetwork[], pools: Cidr[]): AttachedNetwork[] {
  const seen = new Set<string>();
  const out: AttachedNetwork[] = [];
  for (const a of attached) {
    // Inside a pool: at least as long a prefix (mask), and its network address in the pool.
    if (pools.some((p) => (a.mask & p.mask) >>> 0 === p.mask && ((a.base & p.mask) >>> 0) === p.base)) continue;
    const key = `${a.base}/${a.mask}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(a);
  }
  return out;
}

/**
 * A dotted IPv4 address as a number, by hand: this runs on every request the proxy forwards, and
 * common's ipToInt (split, map, Number) allocates four strings and two arrays each time. The
 * addresses come from the resolver or a checked literal; anything else parses as 0.0.0.0, which
 * is refused.
 */
function ipv4ToInt(ip: string): number {
  let n = 0;
  let octet = 0;
  let dots = 0;
  for (let i = 0; i < ip.length; i++) {
    const c = ip.charCodeAt(i);
    if (c === 46) { n = n * 256 + octet; octet = 0; dots++; continue; }
    if (c < 48 || c > 57) return 0;
    octet = octet * 10 + (c - 48);
    if (octet > 255) return 0;
  }
  return dots === 3 ? n * 256 + octet : 0;
}
