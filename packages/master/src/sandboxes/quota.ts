import { SvcError } from '@svc/common';
import type { TeamLimits } from '@svc/contracts/teams';
import type { TeamQuotas } from './ports.ts';

export interface Usage {
  sandboxes: number;
  memoryMB: number;
  vcpus: number;
}

/**
 * A team's sandbox quotas (docs/security.md, "Quotas"): concurrent sandboxes, their memory and
 * their vCPUs. What a create or resume under way will take is reserved here until its row says
 * so, so two requests of one team at once cannot both pass the last free place on this master.
 * Over a limit: E2B's 429, naming the limit and the use, and nothing is started.
 */
export class SandboxQuota {
  private readonly reserved = new Map<string, Usage>();

  constructor(private readonly quotas: TeamQuotas | undefined, private readonly usage: (teamId: string) => Promise<Usage>) {}

  /** Reserves one sandbox of this size for the team; the returned function gives it back. */
  async admit(teamId: string, need: { memoryMB: number; cpuCount: number }): Promise<() => void> {
    const limits = this.quotas ? await this.quotas.limits(teamId) : undefined;
    if (limits && (limits.maxSandboxes || limits.maxMemoryMB || limits.maxVcpus)) {
      const used = await this.usage(teamId);
      const held = this.reserved.get(teamId) ?? { sandboxes: 0, memoryMB: 0, vcpus: 0 };
      check(limits, 'maxSandboxes', used.sandboxes + held.sandboxes, 1, 'concurrent sandboxes');
      check(limits, 'maxMemoryMB', used.memoryMB + held.memoryMB, need.memoryMB, 'MB of sandbox memory');
      check(limits, 'maxVcpus', used.vcpus + held.vcpus, need.cpuCount, 'vCPUs');
    }
    const cur = this.reserved.get(teamId) ?? { sandboxes: 0, memoryMB: 0, vcpus: 0 };
    this.reserved.set(teamId, { sandboxes: cur.sandboxes + 1, memoryMB: cur.memoryMB + need.memoryMB, vcpus: cur.vcpus + need.cpuCount });
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const now = this.reserved.get(teamId)!;
      const left = { sandboxes: now.sandboxes - 1, memoryMB: now.memoryMB - need.memoryMB, vcpus: now.vcpus - need.cpuCount };
      if (left.sandboxes <= 0) this.reserved.delete(teamId);
      else this.reserved.set(teamId, left);
    };
  }
}

function check(limits: TeamLimits, key: 'maxSandboxes' | 'maxMemoryMB' | 'maxVcpus', used: number, need: number, what: string): void {
  const limit = limits[key];
  if (limit && used + need > limit) {
    throw new SvcError(429, `team quota ${key} reached: the team may hold ${limit} ${what}, uses ${used} now, and this sandbox needs ${need} more; nothing was started`);
  }
}
