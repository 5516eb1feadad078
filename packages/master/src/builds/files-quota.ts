import { randomBytes } from 'node:crypto';
import { SvcError, type Logger } from '@svc/common';
import type { BuildFileRepo } from './build-file-repo.ts';

/** The ids of the rows that stand for uploads under way (never an id of the store's: those begin `ctx-`). */
const RESERVATION_PREFIX = 'upl-';
/**
 * A reservation whose upload never ended (its master died mid-body) stops counting after this
 * long: no context-files upload takes a day, and the quota it holds comes back by itself.
 */
const RESERVATION_TTL_MS = 24 * 3600_000;

export const isReservation = (artifactId: string) => artifactId.startsWith(RESERVATION_PREFIX);

/**
 * A team's context files stored at once stay within master.build_files_team_max_mb
 * (docs/templates.md, "Copying files"): before 2026-11-30 a team asked for links to any number of
 * made-up hashes and uploaded until the store's disk, shared with every team's pauses and
 * snapshots, was full. An upload is counted before its body is read: a row of its size is
 * written (a reservation), and only then is the team's total read, so ten uploads at once no
 * longer each pass the check the room of one passed (found by a helper reading the builds as an
 * attacker). On one master the reservations of a team are made one at a time; across masters an
 * upload that finds the total past the quota withdraws its own row, so two at once may both be
 * refused, but never both taken past it.
 */
export class FilesQuota {
  private readonly teamTails = new Map<string, Promise<unknown>>();

  constructor(private readonly d: { records: BuildFileRepo; teamMaxBytes: number; logger: Logger; now: () => number }) {}

  /** Whether the team may upload anything more (an upload link is asked for). */
  async check(team: string): Promise<void> {
    const held = await this.d.records.teamBytes(team);
    if (held < this.d.teamMaxBytes) return;
    throw this.overQuota(held, 0);
  }

  /**
   * Counts an upload of `sizeBytes` (its content-length, which the store holds it to) against the
   * team's quota until `release` is called: a 429 when it does not fit. `replacing` is the id of
   * the team's own earlier upload of the same files, whose bytes it would replace.
   */
  async reserve(team: string, filesHash: string, sizeBytes: number, replacing: string): Promise<() => Promise<void>> {
    const id = `${RESERVATION_PREFIX}${randomBytes(16).toString('hex')}`;
    await this.oneAtATime(team, async () => {
      await this.d.records.insert({ artifact_id: id, team_id: team, files_hash: filesHash, size_bytes: sizeBytes }, this.d.now());
      const held = await this.d.records.teamBytes(team, replacing) - sizeBytes;
      if (held + sizeBytes <= this.d.teamMaxBytes && (sizeBytes > 0 || held < this.d.teamMaxBytes)) return;
      await this.forget(id, team);
      throw this.overQuota(held, sizeBytes);
    });
    let released = false;
    return async () => {
      if (released) return;
      released = true;
      await this.forget(id, team);
    };
  }

  /** Drops the reservations of uploads that never ended (RESERVATION_TTL_MS); answers how many. */
  dropStale(): Promise<number> {
    return this.d.records.forgetOlderWithPrefix(RESERVATION_PREFIX, this.d.now() - RESERVATION_TTL_MS);
  }

  private async forget(id: string, team: string): Promise<void> {
    await this.d.records.forget(id).catch((err: Error) => {
      // Left in place it counts against the team until dropStale takes it (a day at most).
      this.d.logger.warn({ teamId: team, reservation: id, err: err.message }, 'a build files upload reservation could not be removed; it counts against the team\'s quota until the sweep drops it');
    });
  }

  private overQuota(held: number, sizeBytes: number): SvcError {
    const mib = (n: number) => Math.ceil(n / 1_048_576);
    return new SvcError(429, `team quota master.build_files_team_max_mb: the team's build files take ${mib(held)} MiB of the ${mib(this.d.teamMaxBytes)} it may store${sizeBytes ? `, and this upload has ${mib(sizeBytes)} more` : ''}; files no build asked for in master.build_files_keep_days leave the store`);
  }

  /** Runs `task` after the team's earlier ones on this master have finished. */
  private oneAtATime<T>(team: string, task: () => Promise<T>): Promise<T> {
    const prev = this.teamTails.get(team) ?? Promise.resolve();
    const result = prev.then(task);
    const tail = result.catch(() => { /* the task's failure is its caller's, through `result`; the queue only waits for it */ });
    this.teamTails.set(team, tail);
    void tail.then(() => { if (this.teamTails.get(team) === tail) this.teamTails.delete(team); });
    return result;
  }
}
