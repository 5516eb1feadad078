import { randomUUID, timingSafeEqual } from 'node:crypto';
import {
  badRequest, MemoryCoordination, notFound, randomId, SvcError, unauthorized, unavailable, withLockWaiting, type Coordination, type Logger,
} from '@svc/common';
import type { VolumeMount } from '@svc/contracts/master';
import {
  checkVolumeName, UNKNOWN_DRIVER, VOLUME_CODES, VOLUME_LIMITS,
  type NewVolume, type VolumeAndToken, type VolumeControllerHooks, type VolumeInfo, type VolumeMountOnNode, type VolumeRefFlip, type VolumeRefcount,
} from '@svc/contracts/volumes';
import type { TeamQuotas } from '../sandboxes/ports.ts';
import type { VolumeDbRow, VolumeRepo } from './repo.ts';
import type { ControllerPlugins, VolumeNodes } from './ports.ts';
import { beingDeleted, MIN_ATTACH_CLAIM_TTL_MS, whileAttaching } from './attach-claims.ts';
import { deleteVolume } from './deletion.ts';
import { ContentNodes } from './holders.ts';
import { pluginFailure } from './plugin-failure.ts';

/** How long a team's create waits for another of its creates that holds the team's count (maxVolumes). */
const CREATE_LOCK_WAIT_MS = 10_000;
const CREATE_LOCK_TTL_MS = 5_000;

export interface VolumeServiceDeps {
  repo: VolumeRepo;
  plugins: ControllerPlugins;
  nodes: VolumeNodes;
  logger: Logger;
  /** Locks across masters (one DELETE of a volume at a time; a team's creates against maxVolumes); default: this process's alone. */
  coordination?: Coordination;
  /** Teams' limits (maxVolumes); absent: none. */
  quotas?: TeamQuotas;
  /** How long an attach's claim counts at most (attachClaimTtlMs); default: the least, enough for the default create timeout. */
  attachClaimTtlMs?: number;
}

/** A mount of a sandbox resolved to its volume: what its record keeps, and what its node is sent. */
export interface ResolvedMount {
  mount: VolumeMount & { volumeId: string };
  onNode: VolumeMountOnNode;
}

/**
 * Persistent volumes (docs/volumes.md): records, the plugins' controller hooks, and the
 * master's refcount, which moves by the flips node agents report and guards DELETE.
 * `teamId` undefined is the operator, who sees every team's volumes.
 */
export class VolumeService {
  /** Differences the last recount saw, mended only when the next one sees the same (see recount). */
  private readonly suspect = new Map<string, { was: number; want: number }>();
  private readonly coordination: Coordination;
  private readonly holder = `volumes-${process.pid}-${randomId(6)}`;
  private readonly contentNodes: ContentNodes;

  constructor(private readonly d: VolumeServiceDeps) {
    this.coordination = d.coordination ?? new MemoryCoordination();
    this.contentNodes = new ContentNodes(d.nodes, d.logger);
  }

  /**
   * POST: the plugin's Create, then the record. With the team's maxVolumes set, counted and
   * made under the team's lock, across masters, so that creates at once cannot all take the
   * last place (docs/security.md, "Quotas"); E2B's 429 past it, with nothing made.
   */
  async create(teamId: string, input: NewVolume): Promise<VolumeAndToken> {
    const volumeId = randomUUID();
    const name = input.name === undefined ? volumeId : checkVolumeName(input.name);
    const driver = input.driver ?? this.d.plugins.defaultDriver();
    if (driver === undefined) throw badRequest(`${UNKNOWN_DRIVER}: the master has no volume_plugins configured (docs/volume-plugins.md)`, VOLUME_CODES.unknownDriver);
    if (typeof driver !== 'string' || driver === '' || driver.length > VOLUME_LIMITS.driverChars) throw badRequest('driver must be a plugin name', VOLUME_CODES.unknownDriver);
    let hooks: ReturnType<ControllerPlugins['controller']>;
    try {
      hooks = this.d.plugins.controller(driver);
    } catch (err) {
      // The `unknown driver` diagnostic of docs/volume-plugins.md "Diagnostics": the master lacks the entry, or the names differ.
      this.d.logger.warn({ driver, teamId, err: (err as Error).message }, 'volume create names a driver the master has no plugin for');
      throw err;
    }
    const limit = this.d.quotas ? (await this.d.quotas.limits(teamId)).maxVolumes ?? 0 : 0;
    const make = async () => {
      if (limit) {
        const kept = await this.d.repo.countByTeam(teamId);
        if (kept >= limit) throw new SvcError(429, `team quota maxVolumes reached: the team may keep ${limit} volumes and keeps ${kept}; delete one (svc volume delete) and retry; nothing was created`);
      }
      return this.createNow(teamId, { volumeId, name, driver }, hooks);
    };
    if (!limit) return make();
    const busy = () => unavailable(`another volume of team ${teamId} is being created; retry`, 1);
    return withLockWaiting(this.coordination, `volume-create:${teamId}`, this.holder, { ttlMs: CREATE_LOCK_TTL_MS, waitMs: CREATE_LOCK_WAIT_MS, busy }, make);
  }

  private async createNow(teamId: string, v: { volumeId: string; name: string; driver: string }, hooks: VolumeControllerHooks): Promise<VolumeAndToken> {
    const { volumeId, name, driver } = v;
    const taken = await this.d.repo.byName(teamId, name);
    if (taken) throw nameTaken(taken);
    const out = await hooks.create({ volumeId, name }).catch((err: Error) => { throw pluginFailure(this.d.logger, driver, 'create', v, err); });
    if (out.token !== '' && await this.d.repo.tokenTaken(out.token)) {
      // The token opens one volume's content: a plugin that gives two volumes one token would
      // open each to the other's holders (docs/volume-plugins.md: random, unique per volume).
      await this.destroyBackend(driver, volumeId);
      this.d.logger.error({ volumeId, driver }, 'volume plugin answered a token another volume has; the create was undone');
      throw new SvcError(500, `the volume plugin '${driver}' could not create volume ${name}: it answered a token another volume has, and a volume's token must be unique`);
    }
    const row = { volume_id: volumeId, team_id: teamId, name, driver, token: out.token, private_data: out.privateData, refcount: 0, created_at: Date.now(), deleting_at: null, attach_claims_until: null };
    if (!(await this.d.repo.insert(row))) {
      await this.destroyBackend(driver, volumeId);
      throw badRequest(`Volume with name '${name}' already exists`);
    }
    this.d.logger.info({ volumeId, name, driver, teamId }, 'volume created');
    return { volumeID: volumeId, name, token: out.token };
  }

  async get(teamId: string | undefined, ref: string): Promise<VolumeAndToken> {
    const row = await this.find(teamId, ref);
    return { volumeID: row.volume_id, name: row.name, token: row.token };
  }

  async list(teamId: string | undefined): Promise<VolumeInfo[]> {
    return (await this.d.repo.list(teamId)).map((r) => ({ volumeID: r.volume_id, name: r.name }));
  }

  /** The operator's view of the counts (tests, `svc volume list --json`). */
  async refcounts(): Promise<VolumeRefcount[]> {
    return (await this.d.repo.list()).map((r) => ({ volumeID: r.volume_id, refcount: Number(r.refcount) }));
  }

  /**
   * DELETE: marked deleting, 409 (code 130409) while a node may hold it, then the plugin's
   * Destroy, then the record (deletion.ts). A DELETE of a volume whose Destroy failed goes on from there.
   */
  async destroy(teamId: string | undefined, ref: string): Promise<void> {
    const row = await this.find(teamId, ref);
    await deleteVolume({ ...this.d, coordination: this.coordination, holder: this.holder }, row);
  }

  /**
   * The volumes of a create, resolved in the team: by id first, then by name (E2B's SDK sends a
   * volume's name). 404 for any that the team has not.
   */
  async resolveMounts(teamId: string, mounts: VolumeMount[]): Promise<ResolvedMount[]> {
    const out: ResolvedMount[] = [];
    const seen = new Set<string>();
    for (const m of mounts) {
      const row = await this.d.repo.byId(m.name, teamId) ?? await this.d.repo.byName(teamId, m.name);
      if (!row) throw notFound(`volume ${m.name} not found`);
      if (row.deleting_at !== null) throw beingDeleted(m.name);
      if (seen.has(row.volume_id)) throw badRequest(`volume ${m.name} is mounted twice; a sandbox may attach a volume only once`);
      seen.add(row.volume_id);
      out.push({
        mount: { ...m, volumeId: row.volume_id },
        onNode: { volumeId: row.volume_id, driver: row.driver, privateData: row.private_data, path: m.path, readOnly: m.readOnly },
      });
    }
    return out;
  }

  /** Current records of volumes a sandbox recorded (resume, restore): 404 for one deleted since. */
  async current(recorded: Array<VolumeMount & { volumeId?: string }>, teamId: string): Promise<VolumeMountOnNode[]> {
    const out: VolumeMountOnNode[] = [];
    for (const m of recorded) {
      const row = m.volumeId ? await this.d.repo.byId(m.volumeId, teamId) : await this.d.repo.byName(teamId, m.name);
      if (!row) throw notFound(`volume ${m.name} was deleted; the sandbox cannot mount it again`);
      if (row.deleting_at !== null) throw beingDeleted(m.name);
      out.push({ volumeId: row.volume_id, driver: row.driver, privateData: row.private_data, path: m.path, readOnly: m.readOnly });
    }
    return out;
  }

  /**
   * Runs `attach` (a node's create, resume or content call) with the volumes claimed: a DELETE
   * refuses until it ends (attach-claims.ts). 409 for one marked deleting since it was read.
   */
  whileAttaching<T>(volumeIds: string[], attach: () => Promise<T>): Promise<T> {
    return whileAttaching(this.d.repo, this.d.logger, this.d.attachClaimTtlMs ?? MIN_ATTACH_CLAIM_TTL_MS, volumeIds, attach);
  }

  /** Applies a node's count flips (create, destroy, pause, resume answers). */
  async applyFlips(flips: VolumeRefFlip[] | undefined): Promise<void> {
    for (const f of flips ?? []) {
      if (f.delta !== 1 && f.delta !== -1) continue;
      await this.d.repo.addRefcount(f.volumeId, f.delta).catch((err: Error) => {
        this.d.logger.warn({ volumeId: f.volumeId, delta: f.delta, err: err.message }, 'volume refcount flip not recorded; the next recount corrects it');
      });
    }
  }

  /**
   * Mends counts from the nodes' own lists (lost answers, sandboxes that died on a node). Only
   * when every live node answered (a node that did not might hold any volume), and only a
   * difference that two recounts in a row see unchanged: a create whose node attached the volume
   * but whose answer (and its flip) is still on the way looks like drift for a moment.
   */
  async recount(): Promise<void> {
    const counts = new Map<string, number>();
    for (const n of await this.d.nodes.live()) {
      const list = await this.d.nodes.attachments(n.nodeId);
      for (const a of list) if (a.holders.some((h) => !h.startsWith('content:'))) counts.set(a.volumeId, (counts.get(a.volumeId) ?? 0) + 1);
    }
    const seen = new Set<string>();
    for (const r of await this.d.repo.list()) {
      const was = Number(r.refcount);
      const want = counts.get(r.volume_id) ?? 0;
      seen.add(r.volume_id);
      if (was === want) {
        this.suspect.delete(r.volume_id);
        continue;
      }
      const before = this.suspect.get(r.volume_id);
      if (before?.was === was && before.want === want) {
        this.d.logger.info({ volumeId: r.volume_id, was, now: want }, 'volume refcount recounted from the nodes');
        await this.d.repo.setRefcount(r.volume_id, want);
        this.suspect.delete(r.volume_id);
      } else {
        this.suspect.set(r.volume_id, { was, want });
      }
    }
    for (const id of this.suspect.keys()) if (!seen.has(id)) this.suspect.delete(id);
  }

  /**
   * Who may use the content API of a volume: the team (the gateway checked its key), or anyone
   * holding the volume's token, which the plugin gave (compared in constant time).
   */
  async authorizeContent(ref: string, teamId: string | undefined, bearer: string | undefined): Promise<VolumeDbRow> {
    const row = teamId !== undefined || bearer === undefined ? await this.find(teamId, ref) : await this.byToken(ref, bearer);
    // Told only to a caller that may use the volume (after the token's check).
    if (row.deleting_at !== null) throw beingDeleted(row.name);
    return row;
  }

  private async byToken(volumeId: string, bearer: string): Promise<VolumeDbRow> {
    const row = await this.d.repo.byId(volumeId);
    if (!row || !row.token || !sameSecret(row.token, bearer)) throw unauthorized('invalid volume token: send the token Volume.create or Volume.getInfo gave, as Authorization: Bearer <token>');
    return row;
  }

  /**
   * The node to serve a content call: one that holds the volume now, else any live node with
   * volume support, which attaches it for the call (holders.ts).
   */
  async contentNode(volumeId: string): Promise<{ nodeId: string; baseUrl: string; headers: Record<string, string> }> {
    return this.contentNodes.pick(volumeId);
  }

  private async find(teamId: string | undefined, ref: string): Promise<VolumeDbRow> {
    if (typeof ref !== 'string' || ref === '' || ref.length > VOLUME_LIMITS.nameChars) throw notFound(`volume ${ref} not found`);
    const row = await this.d.repo.byId(ref, teamId) ?? (teamId !== undefined ? await this.d.repo.byName(teamId, ref) : undefined);
    if (!row) throw notFound(`volume ${ref} not found`);
    return row;
  }

  /** The plugin's Destroy undoing a create that is not kept; a failure is logged (the caller's answer is the create's). */
  private async destroyBackend(driver: string, volumeId: string): Promise<void> {
    try {
      await this.d.plugins.controller(driver).destroy({ volumeId });
    } catch (err) {
      this.d.logger.error({ volumeId, driver, err: (err as Error).message }, 'volume plugin destroy failed while cleaning up a create; its backend data may stay');
    }
  }
}

function nameTaken(row: VolumeDbRow): SvcError {
  const why = row.deleting_at !== null ? ' (it is being deleted: delete it again if that failed, then retry)' : '';
  return badRequest(`Volume with name '${row.name}' already exists${why}`);
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
