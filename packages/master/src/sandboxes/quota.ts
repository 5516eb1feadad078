import { randomId, SvcError, unavailable, withLockWaiting, type Coordination, type Logger } from '@svc/common';
import type { TeamLimits } from '@svc/contracts/teams';
import type { TeamQuotas } from './ports.ts';

export interface Usage {
  /** Running, and being paused or resumed: what maxSandboxes, maxMemoryMB and maxVcpus count. */
  sandboxes: number;
  memoryMB: number;
  vcpus: number;
  /** Every sandbox not terminated, paused ones too: what maxKeptSandboxes counts. */
  kept: number;
}

/** What an admission asks for: a new sandbox (a create, a fork) is one more kept; a resume is not. */
export interface Need {
  memoryMB: number;
  cpuCount: number;
  newSandbox: boolean;
}

/** A reservation outlives a master that stopped mid-create by at most this long. */
const HELD_TTL_MS = 15 * 60_000;
/** How long an admission waits for another master's admission of the same team. */
const LOCK_WAIT_MS = 5_000;
const LOCK_TTL_MS = 5_000;

interface Held extends Omit<Usage, 'kept'> {
  /** 1 for a new sandbox's; absent in a reservation a master before maxKeptSandboxes wrote. */
  kept?: number;
  until: number;
}

/**
 * A team's sandbox quotas (docs/security.md, "Quotas"): concurrent sandboxes, their memory and
 * their vCPUs, and the sandboxes it keeps, paused ones too (a team could otherwise create, fill,
 * pause and create again until the nodes' disks were full). What a create or resume under way will take is reserved until its row says so,
 * so two requests of one team at once cannot both pass the last free place. Reservations live
 * in the coordination store (Redis in a cluster), taken under a per-team lock, so this holds
 * across masters too. Over a limit: E2B's 429, naming the limit and the use, and nothing is
 * started.
 */
export class SandboxQuota {
  private readonly holder = `quota-${process.pid}-${randomId(6)}`;

  constructor(
    private readonly quotas: TeamQuotas | undefined, private readonly usage: (teamId: string) => Promise<Usage>,
    private readonly coordination: Coordination, private readonly logger: Logger,
  ) {}

  /**
   * Reserves one sandbox of this size for the team; the returned function gives it back (it
   * never throws: a reservation it cannot drop is logged and expires after HELD_TTL_MS).
   */
  async admit(teamId: string, need: Need): Promise<() => Promise<void>> {
    const limits = this.quotas ? await this.quotas.limits(teamId) : undefined;
    if (!limits || !(limits.maxSandboxes || limits.maxMemoryMB || limits.maxVcpus || (need.newSandbox && limits.maxKeptSandboxes))) return async () => {};
    const id = randomId(12);
    await this.withTeam(teamId, async (held) => {
      const used = await this.usage(teamId);
      const sum = Object.values(held).reduce((a, h) => ({
        sandboxes: a.sandboxes + h.sandboxes, memoryMB: a.memoryMB + h.memoryMB, vcpus: a.vcpus + h.vcpus, kept: a.kept + (h.kept ?? 0),
      }), { sandboxes: 0, memoryMB: 0, vcpus: 0, kept: 0 });
      check(limits, 'maxSandboxes', used.sandboxes + sum.sandboxes, 1, 'concurrent sandboxes');
      check(limits, 'maxMemoryMB', used.memoryMB + sum.memoryMB, need.memoryMB, 'MB of sandbox memory');
      check(limits, 'maxVcpus', used.vcpus + sum.vcpus, need.cpuCount, 'vCPUs');
      if (need.newSandbox) check(limits, 'maxKeptSandboxes', used.kept + sum.kept, 1, 'sandboxes running or paused');
      held[id] = { sandboxes: 1, memoryMB: need.memoryMB, vcpus: need.cpuCount, kept: need.newSandbox ? 1 : 0, until: Date.now() + HELD_TTL_MS };
    });
    let released = false;
    return async () => {
      if (released) return;
      released = true;
      await this.withTeam(teamId, async (held) => { delete held[id]; }).catch((err: Error) => {
        this.logger.warn({ teamId, err: err.message }, 'a quota reservation could not be given back; it holds its place until it expires (15 min)');
      });
    };
  }

  /**
   * Whether the team could start one more sandbox of this size now (admit, given back at once):
   * a fork asks it before its capture, so a team at its limit gets its 429 before anything is
   * written on the node, and each of the fork's creates then admits its own.
   */
  async check(teamId: string, need: Omit<Need, 'newSandbox'>): Promise<void> {
    await (await this.admit(teamId, { ...need, newSandbox: true }))();
  }

  /** Runs `change` on the team's live reservations under its lock, then writes them back. */
  private async withTeam(teamId: string, change: (held: Record<string, Held>) => Promise<void>): Promise<void> {
    const key = `quota-held:${teamId}`;
    const busy = () => unavailable(`the quota of team ${teamId} is being checked by another request; retry`, 1);
    await withLockWaiting(this.coordination, `quota:${teamId}`, this.holder, { ttlMs: LOCK_TTL_MS, waitMs: LOCK_WAIT_MS, busy }, async (lock) => {
      const raw = await this.coordination.kvGet(key);
      const now = Date.now();
      const held = Object.fromEntries(Object.entries(raw ? JSON.parse(raw) as Record<string, Held> : {}).filter(([, h]) => h.until > now));
      await change(held);
      // The whole list is written back: with the lock lapsed, another master's reservation made
      // since the read would be erased, and its team could pass its limit.
      if (!(await lock.stillHeld())) throw unavailable(`the quota check of team ${teamId} lost its lock to the coordination store; retry`, 1);
      if (Object.keys(held).length) await this.coordination.kvSet(key, JSON.stringify(held), HELD_TTL_MS);
      else await this.coordination.kvDel(key);
    });
  }
}

function check(limits: TeamLimits, key: 'maxSandboxes' | 'maxMemoryMB' | 'maxVcpus' | 'maxKeptSandboxes', used: number, need: number, what: string): void {
  const limit = limits[key];
  if (limit && used + need > limit) {
    throw new SvcError(429, `team quota ${key} reached: the team may hold ${limit} ${what}, uses ${used} now, and this sandbox needs ${need} more; nothing was started`);
  }
}
