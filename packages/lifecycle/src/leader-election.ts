import type { Coordination, Logger } from '@svc/common';

export const LEADER_LEASE = 'lifecycle-leader';

/**
 * Holds or waits for the leader lease, renewing it every third of its TTL. Leadership is
 * given up locally as soon as a renewal fails or is overdue, before the lease can pass to
 * another replica, so two replicas never both believe they lead for long.
 */
export class LeaderElection {
  private leader = false;
  private since = 0;
  private lastRenewedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private ticking: Promise<void> = Promise.resolve();

  constructor(
    private readonly coord: Coordination,
    private readonly holder: string,
    private readonly ttlMs: number,
    private readonly logger: Logger,
  ) {}

  start(): void {
    const loop = () => {
      if (this.stopped) return;
      this.ticking = this.tick().finally(() => {
        if (!this.stopped) this.timer = setTimeout(loop, Math.max(50, Math.floor(this.ttlMs / 3)));
      });
    };
    loop();
  }

  isLeader(): boolean {
    return this.leader && Date.now() - this.lastRenewedAt < this.ttlMs * 0.8;
  }

  /** Epoch ms when this replica last became leader (0: never). */
  leaderSince(): number { return this.since; }

  async tick(): Promise<void> {
    let held: boolean;
    // The lease runs from when it was asked for, not from the answer: a reply that came late
    // stretched this replica's leadership past the lease's real end.
    const asked = Date.now();
    try {
      held = await this.coord.acquireLease(LEADER_LEASE, this.holder, this.ttlMs);
    } catch (err) {
      if (this.leader && !this.isLeader()) this.lose(`lease renewal failed: ${(err as Error).message}`);
      return;
    }
    if (held) {
      this.lastRenewedAt = asked;
      if (!this.leader) {
        this.leader = true;
        this.since = this.lastRenewedAt;
        this.logger.info({ holder: this.holder }, 'became leader');
      }
    } else if (this.leader) {
      this.lose('lease held by another replica');
    }
  }

  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
    if (this.leader) {
      this.leader = false;
      await this.coord.releaseLease(LEADER_LEASE, this.holder).catch(() => { /* the lease expires with its TTL: another replica leads a little later */ });
    }
  }

  private lose(reason: string) {
    this.leader = false;
    this.logger.warn({ holder: this.holder, reason }, 'lost leadership');
  }
}
