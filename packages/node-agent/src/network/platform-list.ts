import { readFile, rename, writeFile } from 'node:fs/promises';
import { intToIp, isIpv4, parseCidr, SvcError, type Logger } from '@svc/common';
import type { PlatformAddresses } from '@svc/contracts/egress';
import { MasterInternalClient } from '@svc/contracts/master-internal';

/** How often the master's list is read again (as the egress proxy does, platform-guard.ts). */
const REFRESH_MS = 30_000;
/** How often it is asked for until it first answers. */
const FIRST_READ_RETRY_MS = 1_000;
/** How long a sandbox that may reach outside waits for the first list before its create fails. */
const READY_WAIT_MS = 10_000;

/** The master's list, asked with a short timeout: the agent's start waits for the first answer. */
export function platformAddressesOf(masterAddr: string, clusterToken: string): () => Promise<PlatformAddresses> {
  const master = new MasterInternalClient(masterAddr, { clusterToken });
  return () => master.platformAddresses(5_000);
}

export interface PlatformListOptions {
  /** The master's list (MasterInternalClient.platformAddresses); none without a master. */
  source?: () => Promise<PlatformAddresses>;
  /** Where the last list is kept, so that a restart with the master down starts with it. */
  file: string;
  /** Applies a new list (Firewall.setPlatform). */
  apply: (list: PlatformAddresses) => Promise<void>;
  logger: Logger;
  /** How long ready() waits for the first list (default 10 s). */
  readyWaitMs?: number;
}

/**
 * The platform's addresses that no sandbox's own packets reach (docs/cluster.md, "Traffic
 * between components"): the master, the node agents, the lifecycle replicas, the template
 * center, the database and Redis, wherever they run, and every node's sandbox pool. In a cluster
 * they sit on other hosts, where this node's input chain does not reach; without this a sandbox
 * with internet access called another node's agent, which takes no token, and ran commands in
 * that node's sandboxes.
 *
 * The master's list, the egress proxy's too (MASTER_EGRESS_ROUTES.platformAddresses), read at
 * start and every 30 s. The last one is kept on disk and used until the master answers. A node
 * with a master and no list yet admits no sandbox that may reach outside (`ready`): fail closed.
 */
export class PlatformList {
  private current: PlatformAddresses = { endpoints: [], pools: [] };
  private listed: boolean;
  private timer: NodeJS.Timeout | undefined;
  private failures = 0;
  private waiters: Array<() => void> = [];
  private stopped = false;
  /** The read under way: a timer's and a caller's never apply out of order. */
  private reading: Promise<void> = Promise.resolve();

  constructor(private readonly o: PlatformListOptions) {
    this.listed = !o.source;
  }

  /** The kept list, then one read of the master's (never throws); later reads run on a timer. */
  async start(): Promise<void> {
    await this.loadKept();
    await this.refresh();
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** Reads the master's list now and applies it when it changed; one read at a time, in order. */
  refresh(): Promise<void> {
    this.reading = this.reading.then(() => this.readOnce());
    return this.reading;
  }

  private async readOnce(): Promise<void> {
    if (!this.o.source) return;
    let list: PlatformAddresses;
    try {
      list = normalize(await this.o.source());
    } catch (err) {
      // The first failure and then every 20th: an outage logs a few lines, not one every second.
      if (this.failures++ % 20 === 0) this.o.logger.warn({ err: (err as Error).message, listed: this.listed }, 'cannot read the platform\'s addresses from the master; the last list stays');
      return;
    }
    if (this.failures) this.o.logger.info('the platform\'s addresses were read from the master again');
    this.failures = 0;
    try {
      await this.use(list, true);
    } catch (err) {
      // The firewall keeps the list it had; the next read tries again.
      this.o.logger.error({ err: (err as Error).message }, 'the platform\'s addresses could not be applied to the firewall; the last list stays');
    }
  }

  /** Resolves once a list is known; a 503 after 10 s (sandboxes that may reach outside wait for it). */
  async ready(): Promise<void> {
    if (this.listed) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== done);
        reject(new SvcError(503, 'this node has not read the platform\'s addresses from the master yet: a sandbox that may reach outside waits for them (retry)'));
      }, this.o.readyWaitMs ?? READY_WAIT_MS);
      const done = () => { clearTimeout(timer); resolve(); };
      this.waiters.push(done);
    });
  }

  get list(): PlatformAddresses {
    return this.current;
  }

  private schedule(): void {
    if (this.stopped || !this.o.source) return;
    this.timer = setTimeout(() => {
      void this.refresh().finally(() => this.schedule());
    }, this.listed ? REFRESH_MS : FIRST_READ_RETRY_MS).unref();
  }

  private async use(list: PlatformAddresses, fromMaster: boolean): Promise<void> {
    const changed = JSON.stringify(list) !== JSON.stringify(this.current);
    if (changed) {
      await this.o.apply(list);
      this.current = list;
      this.o.logger.info({ endpoints: list.endpoints.length, pools: list.pools }, 'sandboxes\' packets to the platform\'s addresses are dropped');
      if (fromMaster) await this.keep(list);
    }
    if (!this.listed) {
      this.listed = true;
      for (const w of this.waiters.splice(0)) w();
    }
  }

  private async loadKept(): Promise<void> {
    if (!this.o.source) return;
    let text: string;
    try {
      text = await readFile(this.o.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.o.logger.warn({ err: (err as Error).message, file: this.o.file }, 'cannot read the kept platform addresses');
      return;
    }
    try {
      await this.use(normalize(JSON.parse(text) as PlatformAddresses), false);
    } catch (err) {
      this.o.logger.warn({ err: (err as Error).message, file: this.o.file }, 'the kept platform addresses are unreadable; waiting for the master\'s');
    }
  }

  private async keep(list: PlatformAddresses): Promise<void> {
    const tmp = `${this.o.file}.tmp`;
    try {
      await writeFile(tmp, JSON.stringify(list), { mode: 0o600 });
      await rename(tmp, this.o.file);
    } catch (err) {
      // Only a restart with the master down misses it; the list in force is applied already.
      this.o.logger.warn({ err: (err as Error).message, file: this.o.file }, 'cannot keep the platform addresses on disk');
    }
  }
}

/**
 * The list as the firewall takes it: IPv4 endpoints with a TCP port, pools as network/prefix,
 * sorted and without repeats (so that an unchanged list is seen as unchanged). Anything else is
 * an error: a list this node cannot read whole is not applied in part.
 */
export function normalize(list: PlatformAddresses): PlatformAddresses {
  if (!list || !Array.isArray(list.endpoints) || !Array.isArray(list.pools) || (list.networks !== undefined && !Array.isArray(list.networks))) throw new Error('the platform addresses are not { endpoints: [], pools: [] }');
  const endpoints = new Map<string, { ip: string; port: number }>();
  for (const e of list.endpoints) {
    if (typeof e?.ip !== 'string' || !isIpv4(e.ip) || !Number.isInteger(e.port) || e.port < 1 || e.port > 65_535) throw new Error(`not an IPv4 endpoint: ${JSON.stringify(e)}`);
    endpoints.set(`${e.ip}:${e.port}`, { ip: e.ip, port: e.port });
  }
  const pools = new Set<string>();
  // master.platform_networks are dropped on every port, as the pools are.
  for (const p of [...list.pools, ...(list.networks ?? [])]) {
    if (typeof p !== 'string') throw new Error(`not a pool: ${JSON.stringify(p)}`);
    const { base, prefix } = parseCidr(p);
    // A pool wider than a /8 is no node's sandbox pool; dropping it would cut sandboxes off the world.
    if (prefix < 8) throw new Error(`a sandbox pool of /${prefix} is too wide: ${p}`);
    pools.add(`${intToIp(base)}/${prefix}`);
  }
  return {
    endpoints: [...endpoints.keys()].sort().map((k) => endpoints.get(k)!),
    pools: [...pools].sort(),
  };
}
