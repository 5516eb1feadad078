import { createHash } from 'node:crypto';
import { randomId } from '@svc/common';

/**
 * Names of the host resources one node agent owns. Every name carries a short tag derived
 * from the agent's state directory, so agents (and test runs) with different state
 * directories never touch each other's namespaces, interfaces, containers or rules.
 * Linux limits interface names to 15 characters: "sv" + tag(6) + instance id(7).
 */
export class ResourceNames {
  static readonly idLength = 7;
  readonly tag: string;

  constructor(stateDir: string) {
    this.tag = createHash('sha256').update(stateDir).digest('hex').slice(0, 6);
  }

  static newInstanceId(): string {
    return randomId(ResourceNames.idLength);
  }

  static isInstanceId(s: string): boolean {
    return s.length === ResourceNames.idLength && /^[a-z0-9]+$/.test(s);
  }

  netns(instanceId: string) { return `svc-${this.tag}-${instanceId}`; }
  hostVeth(instanceId: string) { return `sv${this.tag}${instanceId}`; }
  container(instanceId: string) { return `svc-${this.tag}-${instanceId}`; }
  /** Parent cgroup (cgroupfs path) of every sandbox of this agent. */
  get cgroupParent() { return `svc-${this.tag}`; }
  get vethPrefix() { return `sv${this.tag}`; }
  get nftTable() { return `svc_${this.tag}`; }

  /** The instance id in a netns or container name of this agent, else undefined. */
  instanceOfNetns(name: string): string | undefined { return this.suffix(name, `svc-${this.tag}-`); }
  instanceOfContainer(name: string): string | undefined { return this.suffix(name, `svc-${this.tag}-`); }
  instanceOfVeth(name: string): string | undefined { return this.suffix(name, this.vethPrefix); }

  private suffix(name: string, prefix: string): string | undefined {
    if (!name.startsWith(prefix)) return undefined;
    const rest = name.slice(prefix.length);
    return ResourceNames.isInstanceId(rest) ? rest : undefined;
  }
}
