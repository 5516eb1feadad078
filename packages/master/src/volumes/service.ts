import { randomUUID, timingSafeEqual } from 'node:crypto';
import { badRequest, conflict, notFound, SvcError, unauthorized, unavailable, wrapError, type Logger } from '@svc/common';
import type { VolumeMount } from '@svc/contracts/master';
import {
  checkVolumeName, UNKNOWN_DRIVER, VOLUME_CODES, VOLUME_LIMITS,
  type NewVolume, type VolumeAndToken, type VolumeInfo, type VolumeMountOnNode, type VolumeRefFlip, type VolumeRefcount,
} from '@svc/contracts/volumes';
import type { VolumeDbRow, VolumeRepo } from './repo.ts';
import type { ControllerPlugins, VolumeNodes } from './ports.ts';

export interface VolumeServiceDeps {
  repo: VolumeRepo;
  plugins: ControllerPlugins;
  nodes: VolumeNodes;
  logger: Logger;
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

  constructor(private readonly d: VolumeServiceDeps) {}

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
    if (await this.d.repo.byName(teamId, name)) throw badRequest(`Volume with name '${name}' already exists`);
    const out = await hooks.create({ volumeId, name }).catch((err: Error) => { throw pluginFailure(driver, 'create', err); });
    const row = { volume_id: volumeId, team_id: teamId, name, driver, token: out.token, private_data: out.privateData, refcount: 0, created_at: Date.now() };
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
   * DELETE: 409 (code 130409) while a node holds it; then the plugin's Destroy, then the record.
   * The nodes' own lists decide, since the refcount may lag an answer that was lost either way:
   * a volume a node holds is never destroyed under it, and one none holds is not kept by a stale count.
   */
  async destroy(teamId: string | undefined, ref: string): Promise<void> {
    const row = await this.find(teamId, ref);
    const id = row.volume_id;
    const holding = await this.nodesHolding(id);
    if (holding.length > 0) throw inUse(row.name, holding.length);
    // No node holds it, whatever the count says (a lost answer): the nodes decide. A create that
    // attaches it from here on moves the count again, and the guarded delete below sees that.
    if (Number(row.refcount) !== 0) await this.d.repo.setRefcount(id, 0);
    await this.destroyBackend(row.driver, id, true);
    if (!(await this.d.repo.deleteUnmounted(id))) {
      // A create attached it between the check and here: its data is gone, say so loudly.
      this.d.logger.error({ volumeId: id }, 'a volume was attached while it was being destroyed; its record stays, its data may be gone');
      throw inUse(row.name, 1);
    }
    this.d.logger.info({ volumeId: id, name: row.name, driver: row.driver }, 'volume destroyed');
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
      out.push({ volumeId: row.volume_id, driver: row.driver, privateData: row.private_data, path: m.path, readOnly: m.readOnly });
    }
    return out;
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
    if (teamId !== undefined || bearer === undefined) return this.find(teamId, ref);
    const row = await this.d.repo.byId(ref);
    if (!row || !row.token || !sameSecret(row.token, bearer)) throw unauthorized('invalid volume token: send the token Volume.create or Volume.getInfo gave, as Authorization: Bearer <token>');
    return row;
  }

  /** A live node with volume support to serve a content call (any: it attaches the volume for the call). */
  async contentNode(): Promise<{ nodeId: string; baseUrl: string; headers: Record<string, string> }> {
    const live = await this.d.nodes.live();
    if (live.length === 0) throw unavailable('no node agent with volume support is available to serve the volume\'s content', 5);
    return live[Math.floor(Math.random() * live.length)];
  }

  private async nodesHolding(volumeId: string): Promise<string[]> {
    const out: string[] = [];
    for (const n of await this.d.nodes.live()) {
      const list = await this.d.nodes.attachments(n.nodeId).catch((err: Error) => {
        throw wrapError(err, `node ${n.nodeId} did not say whether it holds volume ${volumeId}; retry the delete`);
      });
      if (list.some((a) => a.volumeId === volumeId)) out.push(n.nodeId);
    }
    return out;
  }

  private async find(teamId: string | undefined, ref: string): Promise<VolumeDbRow> {
    if (typeof ref !== 'string' || ref === '' || ref.length > VOLUME_LIMITS.nameChars) throw notFound(`volume ${ref} not found`);
    const row = await this.d.repo.byId(ref, teamId) ?? (teamId !== undefined ? await this.d.repo.byName(teamId, ref) : undefined);
    if (!row) throw notFound(`volume ${ref} not found`);
    return row;
  }

  /** The plugin's Destroy; `strict` fails the caller, else a failure is logged (a create's cleanup). */
  private async destroyBackend(driver: string, volumeId: string, strict = false): Promise<void> {
    try {
      await this.d.plugins.controller(driver).destroy({ volumeId });
    } catch (err) {
      if (strict) throw pluginFailure(driver, 'destroy', err as Error);
      this.d.logger.error({ volumeId, driver, err: (err as Error).message }, 'volume plugin destroy failed while cleaning up a create; its backend data may stay');
    }
  }
}

function inUse(name: string, nodes: number): SvcError {
  return conflict(`volume ${name} is mounted (held on ${nodes} node${nodes === 1 ? '' : 's'}); kill the sandboxes that mount it, then delete it`, VOLUME_CODES.inUse);
}

function pluginFailure(driver: string, op: string, err: Error): SvcError {
  if (err instanceof SvcError) return err;
  return new SvcError(500, `volume plugin ${driver}: ${op} failed: ${err.message}`);
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
