import { SvcError } from '@svc/common';
import type { PlatformAddresses } from '@svc/contracts/egress';
import { run } from '../host/exec.ts';
import { type EgressPolicy, reachesOutside } from './egress-policy.ts';

export interface FirewallSandbox {
  instanceId: string;
  hostVeth: string;
  sandboxAddress: string;
  policy: EgressPolicy;
}

/** Where steered traffic goes: the egress proxy's listeners (docs/egress.md). */
export interface EgressTarget {
  address: string;
  httpPort: number;
  httpsPort: number;
  /** The tunnel listener: a tunneled sandbox's other TCP, on to its SOCKS5 proxy. */
  tunnelPort: number;
  /** egress.upstream_proxy is set: every sandbox is tunneled (the operator's proxy). */
  tunnelAll?: boolean;
}

/**
 * Link-local is never reachable from a sandbox, whatever allowOut or a name it learned says:
 * cloud metadata services hand out the host's credentials there (169.254.169.254), which are the
 * operator's, not a team's to open. It was an opt-in of allowOut until 2026-11-30.
 */
const ALWAYS_DENIED = ['169.254.0.0/16'];

/**
 * The agent's nftables table. Everything the agent adds lives in one table of its own
 * (`ip svc_<tag>`), so removing the agent's rules never touches anybody else's:
 *   antispoof:   at raw priority, before connection tracking: a packet from a sandbox's veth
 *                whose source is not that sandbox's address is dropped (set sandbox_sources).
 *   forward:     traffic a sandbox sends jumps to its own chain (verdict map by interface);
 *                nothing new is forwarded into a sandbox. Each chain drops the platform's
 *                addresses (sets platform_tcp and platform_pools, platform-list.ts) before any
 *                allow.
 *   input:       a sandbox cannot open connections to the host (DNAT'd flows excepted,
 *                for a transparent egress proxy); its source is checked before any accept.
 *   prerouting:  the ports of a sandbox's layer-7 rules are DNAT'd to the egress proxy (its own
 *                chain, verdict map by interface); such flows never reach forward.
 *   postrouting: source NAT for sandboxes that may reach outside.
 */
export class Firewall {
  private readonly sandboxes = new Map<string, FirewallSandbox>();
  private platform: PlatformAddresses = { endpoints: [], pools: [] };
  private built = false;

  constructor(
    private readonly table: string,
    private readonly vethPrefix: string,
    private readonly poolCidr: string,
    private readonly egress?: EgressTarget,
    /** Resolves once the platform's addresses are known (PlatformList.ready); a sandbox that may reach outside waits for it. */
    private readonly platformReady: () => Promise<void> = async () => {},
    /** node_agent.host.quota.max_connections_per_sandbox: 0 is no limit. */
    private readonly maxConnections = 0,
  ) {}

  /**
   * The platform's addresses no sandbox reaches (platform-list.ts), replaced in one transaction.
   * Before the table is first built they are kept for it.
   */
  async setPlatform(list: PlatformAddresses): Promise<void> {
    if (this.built) await this.apply([`flush set ip ${this.table} platform_tcp`, `flush set ip ${this.table} platform_pools`, ...this.platformElements(list)]);
    this.platform = list;
  }

  /** Replaces the whole table atomically with these sandboxes' rules. */
  async rebuild(sandboxes: FirewallSandbox[]): Promise<void> {
    const t = this.table;
    const p = `"${this.vethPrefix}*"`;
    const lines = [
      `table ip ${t} {}`,
      `delete table ip ${t}`,
      `table ip ${t} {`,
      '  map sandbox_out { type ifname : verdict; }',
      '  map sandbox_steer { type ifname : verdict; }',
      '  set sandbox_nat { type ipv4_addr; }',
      '  set platform_tcp { type ipv4_addr . inet_service; }',
      '  set platform_pools { type ipv4_addr; flags interval; auto-merge; }',
      '  set sandbox_sources { type ifname . ipv4_addr; }',
      ...this.antiSpoofing(p),
      '  chain forward {',
      '    type filter hook forward priority -5; policy accept;',
      '    iifname vmap @sandbox_out',
      `    oifname ${p} ct state established,related accept`,
      `    oifname ${p} drop`,
      `    iifname ${p} drop`,
      '  }',
      '  chain input {',
      '    type filter hook input priority -5; policy accept;',
      `    iifname ${p} iifname . ip saddr != @sandbox_sources drop`,
      `    iifname ${p} ct state established,related accept`,
      `    iifname ${p} ct status dnat accept`,
      `    iifname ${p} drop`,
      '  }',
      ...this.connectionLimit(p),
      '  chain prerouting {',
      '    type nat hook prerouting priority -100; policy accept;',
      '    iifname vmap @sandbox_steer',
      '  }',
      '  chain postrouting {',
      '    type nat hook postrouting priority 100; policy accept;',
      `    ip saddr @sandbox_nat oifname != ${p} masquerade`,
      '  }',
      '}',
    ];
    lines.push(...this.platformElements(this.platform));
    for (const s of sandboxes) lines.push(...this.addLines(s));
    await this.apply(lines);
    this.built = true;
    this.sandboxes.clear();
    for (const s of sandboxes) this.sandboxes.set(s.instanceId, s);
  }

  /**
   * Sources are checked before anything else sees a sandbox's packet: connection tracking (-200)
   * and the connection limit (-150) both come before the forward chain's own check, and the
   * limit's set is keyed by source address, so a sandbox that forged 65,535 sources (a microvm
   * guest's root can, on its tap) filled it and no sandbox's connections were limited any more;
   * and input accepted `established` from any source (found by a helper reading the node agent as
   * an attacker). raw priority (-300): a forged packet makes no conntrack entry either.
   */
  private antiSpoofing(vethPattern: string): string[] {
    return [
      '  chain antispoof {',
      '    type filter hook prerouting priority raw; policy accept;',
      `    iifname ${vethPattern} iifname . ip saddr != @sandbox_sources drop`,
      '  }',
    ];
  }

  /**
   * A sandbox's tracked connections at once, direct or to the egress proxy (its new ones past the
   * limit are dropped): the host's connection tracking is one table for every sandbox, the proxy
   * and the agent, and one sandbox opening flows to its own server filled it, so that every new
   * flow of the host was dropped (found by a helper reading the node agent as an attacker). Keyed
   * by source address, which antispoof holds to the sandbox's own. Before
   * conntrack's own hook (-200) has run, `ct state` is unknown: hence mangle's priority (-150).
   */
  private connectionLimit(vethPattern: string): string[] {
    if (this.maxConnections <= 0) return [];
    return [
      '  set sandbox_conns { type ipv4_addr; size 65535; flags dynamic; }',
      '  chain conn_limit {',
      '    type filter hook prerouting priority -150; policy accept;',
      `    iifname ${vethPattern} ct state new add @sandbox_conns { ip saddr ct count over ${this.maxConnections} } drop`,
      '  }',
    ];
  }

  async add(s: FirewallSandbox): Promise<void> {
    if (reachesOutside(s.policy)) await this.platformReady();
    await this.apply(this.addLines(s));
    this.sandboxes.set(s.instanceId, s);
  }

  /** Changes a sandbox's egress policy in one transaction (a warm sandbox being handed out). */
  async update(instanceId: string, policy: EgressPolicy): Promise<void> {
    const old = this.sandboxes.get(instanceId);
    if (!old) throw new Error(`firewall: no rules for instance ${instanceId}`);
    if (reachesOutside(policy)) await this.platformReady();
    const next = { ...old, policy };
    const t = this.table;
    const lines = [`flush chain ip ${t} ${chainOf(instanceId)}`, ...this.chainRules(next), `flush chain ip ${t} ${steerChainOf(instanceId)}`, ...this.steerRules(next)];
    if (reachesOutside(old.policy) && !reachesOutside(policy)) lines.push(`delete element ip ${t} sandbox_nat { ${old.sandboxAddress} }`);
    if (!reachesOutside(old.policy) && reachesOutside(policy)) lines.push(`add element ip ${t} sandbox_nat { ${old.sandboxAddress} }`);
    await this.apply(lines);
    this.sandboxes.set(instanceId, next);
  }

  async remove(instanceId: string): Promise<void> {
    const s = this.sandboxes.get(instanceId);
    if (!s) return;
    const t = this.table;
    const lines = [
      `delete element ip ${t} sandbox_sources { "${s.hostVeth}" . ${s.sandboxAddress} }`,
      `delete element ip ${t} sandbox_out { "${s.hostVeth}" }`,
      `flush chain ip ${t} ${chainOf(instanceId)}`,
      `delete chain ip ${t} ${chainOf(instanceId)}`,
      `delete element ip ${t} sandbox_steer { "${s.hostVeth}" }`,
      `flush chain ip ${t} ${steerChainOf(instanceId)}`,
      `delete chain ip ${t} ${steerChainOf(instanceId)}`,
    ];
    if (reachesOutside(s.policy)) lines.push(`delete element ip ${t} sandbox_nat { ${s.sandboxAddress} }`);
    await this.apply(lines);
    this.sandboxes.delete(instanceId);
  }

  /** Removes the agent's table entirely (the agent shuts down with no sandbox left). */
  async drop(): Promise<void> {
    await run('nft', ['delete', 'table', 'ip', this.table], { allowFail: true });
    this.built = false;
    this.sandboxes.clear();
  }

  private addLines(s: FirewallSandbox): string[] {
    const t = this.table;
    const lines = [`add element ip ${t} sandbox_sources { "${s.hostVeth}" . ${s.sandboxAddress} }`, `add chain ip ${t} ${chainOf(s.instanceId)}`, ...this.chainRules(s)];
    lines.push(`add element ip ${t} sandbox_out { "${s.hostVeth}" : jump ${chainOf(s.instanceId)} }`);
    lines.push(`add chain ip ${t} ${steerChainOf(s.instanceId)}`, ...this.steerRules(s));
    lines.push(`add element ip ${t} sandbox_steer { "${s.hostVeth}" : jump ${steerChainOf(s.instanceId)} }`);
    if (reachesOutside(s.policy)) lines.push(`add element ip ${t} sandbox_nat { ${s.sandboxAddress} }`);
    return lines;
  }

  /** Order matters: anti-spoofing, replies, isolation from other sandboxes and from the platform, then allowOut before denyOut. */
  private chainRules(s: FirewallSandbox): string[] {
    const r = (rule: string) => `add rule ip ${this.table} ${chainOf(s.instanceId)} ${rule}`;
    const lines = [
      r(`ip saddr != ${s.sandboxAddress} drop`),
      r('ct state established,related accept'),
      r(`ip daddr ${this.poolCidr} drop`),
      r('ip daddr @platform_pools drop'),
      r('ip daddr . tcp dport @platform_tcp drop'),
    ];
    for (const { cidr, allow } of layer3Order(s.policy)) lines.push(r(`ip daddr ${cidr} ${allow ? 'accept' : 'drop'}`));
    lines.push(r(s.policy.allowInternetAccess ? 'accept' : 'drop'));
    return lines;
  }

  /**
   * The sandbox's rule ports, to the proxy's listener for their scheme; only from its own address.
   * Then, for a tunneled sandbox, its other TCP to the tunnel listener, decided by the same
   * layer-3 lists in the same order as its forward chain (chainRules): what layer 3 denies is not
   * DNAT'd, so it reaches the forward chain and is dropped there, never the proxy.
   */
  private steerRules(s: FirewallSandbox): string[] {
    const steer = s.policy.steer ?? [];
    const tunnel = s.policy.tunnel === true || this.egress?.tunnelAll === true;
    if (steer.length === 0 && !tunnel) return [];
    if (!this.egress) throw new SvcError(400, `${steer.length ? 'network rules' : 'egressProxy'} need the egress proxy, and this node has none (egress.enabled is false)`);
    const r = (rule: string) => `add rule ip ${this.table} ${steerChainOf(s.instanceId)} ${rule}`;
    const lines: string[] = [];
    for (const scheme of ['http', 'https'] as const) {
      const ports = steer.filter((t) => t.scheme === scheme).map((t) => t.port);
      if (ports.length === 0) continue;
      const to = `${this.egress.address}:${scheme === 'https' ? this.egress.httpsPort : this.egress.httpPort}`;
      lines.push(r(`ip saddr ${s.sandboxAddress} tcp dport { ${ports.join(', ')} } dnat to ${to}`));
    }
    if (tunnel) lines.push(...this.tunnelRules(s, r));
    return lines;
  }

  private tunnelRules(s: FirewallSandbox, r: (rule: string) => string): string[] {
    const to = `dnat to ${this.egress!.address}:${this.egress!.tunnelPort}`;
    const from = `ip saddr ${s.sandboxAddress} meta l4proto tcp`;
    const lines = [r(`ip daddr ${this.poolCidr} return`), r('ip daddr @platform_pools return'), r('ip daddr . tcp dport @platform_tcp return')];
    for (const { cidr, allow } of layer3Order(s.policy)) lines.push(r(allow ? `${from} ip daddr ${cidr} ${to}` : `ip daddr ${cidr} return`));
    if (s.policy.allowInternetAccess) lines.push(r(`${from} ${to}`));
    return lines;
  }

  private platformElements(list: PlatformAddresses): string[] {
    const t = this.table;
    const lines: string[] = [];
    if (list.endpoints.length) lines.push(`add element ip ${t} platform_tcp { ${list.endpoints.map((e) => `${e.ip} . ${e.port}`).join(', ')} }`);
    if (list.pools.length) lines.push(`add element ip ${t} platform_pools { ${list.pools.join(', ')} }`);
    return lines;
  }

  private async apply(lines: string[]): Promise<void> {
    await run('nft', ['-f', '-'], { input: lines.join('\n') + '\n' });
  }
}

/**
 * The layer-3 lists in the order they decide, first match wins: link-local denies, then allowOut
 * and the learned addresses allow, then denyOut denies (internet access decides the rest). The
 * forward chain and a tunneled sandbox's steering both follow it, so they cannot disagree.
 */
function layer3Order(p: EgressPolicy): Array<{ cidr: string; allow: boolean }> {
  return [
    ...ALWAYS_DENIED.map((cidr) => ({ cidr, allow: false })),
    ...[...p.allowOut, ...(p.learned ?? [])].map((cidr) => ({ cidr, allow: true })),
    ...p.denyOut.map((cidr) => ({ cidr, allow: false })),
  ];
}

const chainOf = (instanceId: string) => `sb_${instanceId}`;
const steerChainOf = (instanceId: string) => `st_${instanceId}`;
