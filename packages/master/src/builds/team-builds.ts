import type { Kysely } from 'kysely';
import { randomId, SvcError, unavailable, withLockWaiting, type Coordination } from '@svc/common';
import type { Database } from '../db/schema.ts';
import type { TeamQuotas } from '../sandboxes/ports.ts';

const START_LOCK_TTL_MS = 5_000;
const START_LOCK_WAIT_MS = 5_000;
/** A template center job still under way (templates/store/jobs.ts ACTIVE). */
const ACTIVE_JOB = ['PENDING', 'RUNNING'];

/**
 * A team's template builds at once, `maxConcurrentBuilds` (docs/security.md, "Quotas"): the
 * builder's builds and the template center's builds of the team's image templates
 * (`POST /templates`, `svc tpl create`, a redo that rebuilds), counted together. A builder build
 * from an image counts that image's build too while it runs. Counted and started under the
 * team's lock, across masters, so that builds started together cannot all take the last place.
 */
export class TeamBuilds {
  private readonly holder = `build-start-${process.pid}-${randomId(6)}`;

  constructor(private readonly d: { db: Kysely<Database>; quotas?: TeamQuotas; coordination?: Coordination }) {}

  /** Builds of the team under way now, of both kinds. */
  async running(teamId: string): Promise<number> {
    const builder = await this.d.db.selectFrom('t_svc_build').select((eb) => eb.fn.countAll<number | string>().as('n'))
      .where('team_id', '=', teamId).where('status', '=', 'building').executeTakeFirst();
    const images = await this.d.db.selectFrom('t_svc_template_job as j').innerJoin('t_svc_template as t', 't.template_id', 'j.template_id')
      .select((eb) => eb.fn.countAll<number | string>().as('n'))
      .where('t.team_id', '=', teamId).where('j.status', 'in', ACTIVE_JOB).executeTakeFirst();
    return Number(builder?.n ?? 0) + Number(images?.n ?? 0);
  }

  /**
   * Runs `start` (which records the new build as under way) when the team has a place left:
   * E2B's 429 otherwise, with nothing started.
   */
  async admit<T>(teamId: string, start: () => Promise<T>): Promise<T> {
    const limit = this.d.quotas ? (await this.d.quotas.limits(teamId)).maxConcurrentBuilds ?? 0 : 0;
    const checked = async () => {
      if (limit) {
        const building = await this.running(teamId);
        if (building >= limit) throw new SvcError(429, `team quota maxConcurrentBuilds reached: the team may run ${limit} template builds at once and runs ${building}; start this one when one ends`);
      }
      return start();
    };
    if (!this.d.coordination) return checked();
    const busy = () => unavailable(`another build of team ${teamId} is being started; retry`, 1);
    return withLockWaiting(this.d.coordination, `build-start:${teamId}`, this.holder, { ttlMs: START_LOCK_TTL_MS, waitMs: START_LOCK_WAIT_MS, busy }, checked);
  }
}
