import { Slots } from '@svc/common';
import type { BuildLog } from './build-log.ts';

/**
 * The builds one master runs at once; the others wait, the teams taking turns (common's Slots):
 * a team that queued twenty builds does not hold every other team's behind all twenty.
 */
export class BuildSlots {
  private readonly slots: Slots;

  constructor(size: number) {
    this.slots = new Slots(size);
  }

  /** Runs `work` once one of the master's build slots is free and it is `teamId`'s turn; a line a minute while it waits. */
  async inSlot<T>(teamId: string, log: BuildLog, work: () => Promise<T>): Promise<T> {
    const release = this.slots.tryAcquire() ?? await this.waitTurn(teamId, log);
    try {
      return await work();
    } finally {
      release();
    }
  }

  private async waitTurn(teamId: string, log: BuildLog): Promise<() => void> {
    // Counted and queued together, so the figure is what is ahead of this build as it joins.
    const running = this.slots.held;
    const ahead = this.slots.waitingAhead(teamId);
    const gaveUp = new AbortController();
    const turn = this.slots.acquire(gaveUp.signal, teamId);
    const ticker = setInterval(() => { void log('info', 'Still queued').catch(() => { /* the next line says it again */ }); }, 60_000);
    try {
      await log('info', `Queued: ${running} build(s) running on this master, ${ahead} waiting before this one (teams take turns)`);
      const release = await turn;
      await log('info', 'Starting: a build slot is free');
      return release;
    } catch (err) {
      // The log is the build's record: a build that cannot write it fails, and gives up its place or slot.
      gaveUp.abort(err);
      turn.then((release) => release(), () => { /* the wait ended with the abort: nothing held */ });
      throw err;
    } finally {
      clearInterval(ticker);
    }
  }
}
