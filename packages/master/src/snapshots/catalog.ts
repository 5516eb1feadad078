import { badRequest, conflict, notFound, type Logger, type SvcError } from '@svc/common';
import type { ListSnapshotsQuery, SnapshotPage, SnapshotRecord } from '@svc/contracts/master';
import type { LayerRef } from '@svc/contracts/node-agent';
import type { NodeRegistry } from '../nodes/registry.ts';
import { copyLayerToStore } from './layer-copy.ts';
import type { LayerStorage } from './ports.ts';
import type { SnapshotDbRow, SnapshotRepo } from './repo.ts';

/** How old a layer no snapshot names must be before the sweep removes it (a capture takes less). */
const ORPHAN_MIN_AGE_MS = 15 * 60_000;

/**
 * The snapshots there are: listed, found, deleted (with their layer, in the artifact store and on
 * every node that has a copy), and the sweeps that finish or clear what a crash left half-done.
 * Needs no sandbox service, so the template module can use it (E2B deletes a snapshot through
 * DELETE /templates/{id}).
 */
export class SnapshotCatalog {
  constructor(private readonly repo: SnapshotRepo, private readonly nodes: NodeRegistry, private readonly storage: LayerStorage, private readonly logger: Logger) {}

  /** A team's snapshots (undefined: every team's, the operator's view). */
  async list(q: ListSnapshotsQuery, caller?: string): Promise<SnapshotPage> {
    const limit = q.limit === undefined ? 100 : Number(q.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw badRequest('limit must be an integer from 1 to 1000');
    const after = q.nextToken ? decodeToken(q.nextToken) : undefined;
    const rows = await this.repo.list({ sandboxId: q.sandboxId || undefined, ref: q.name || undefined, after, limit: limit + 1, teamId: caller });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      snapshots: page.map(toRecord),
      ...(rows.length > limit && last ? { nextToken: encodeToken({ createdAt: Number(last.created_at), id: last.snapshot_id }) } : {}),
    };
  }

  /** A build snapshot's layer, as a template the builder made starts from it. */
  async layerOf(snapshotId: string): Promise<{ artifactId: string; envVars: Record<string, string>; ref: LayerRef } | undefined> {
    const s = await this.repo.get(snapshotId);
    if (!s) return undefined;
    return { artifactId: s.artifact_id, envVars: JSON.parse(s.env_vars) as Record<string, string>, ref: layerRefOf(s, this.storage) };
  }

  /**
   * 404 when unknown or another team's; 409 while a create from it is reading its layer. The
   * name is resolved within `caller`'s team (undefined: the operator's, any team): the ownership
   * guard resolved it before the handler, and another team's capture that took the name in
   * between was deleted, until 2026-12-01 (docs/security.md, "Isolation").
   */
  async delete(ref: string, caller?: string): Promise<void> {
    const row = await this.repo.resolve(ref, caller);
    if (!row) throw notFound(`snapshot ${ref} not found`);
    await this.deleteRow(row, ref, caller);
  }

  /** Deletes a build snapshot by its id (its template was deleted); nothing there is not an error. */
  async deleteBuildSnapshot(snapshotId: string): Promise<void> {
    const row = await this.repo.get(snapshotId);
    if (row) await this.deleteRow(row, snapshotId);
  }

  /** Deletes the snapshot `ref` names (id or name) in `caller`'s team if there is one; false when there is none (as delete). */
  async deleteIfSnapshot(ref: string, caller?: string): Promise<boolean> {
    const row = await this.repo.resolve(ref, caller);
    if (!row) return false;
    await this.deleteRow(row, ref, caller);
    return true;
  }

  /**
   * Copies on nodes first (a node where a create is reading it answers 409, and the snapshot
   * stays), then the record, then the store's copy: a crash in between leaves a layer that no
   * record names, never a record without its layer.
   */
  private async deleteRow(row: SnapshotDbRow, ref: string, caller?: string): Promise<void> {
    await this.deleteFromNodes(row.layer_id, (err) => { throw conflict(`snapshot ${ref}: ${err.message}`); });
    // By id and team: the row found is the one deleted. Gone already (a delete at the same time): its layer goes all the same.
    if (!(await this.repo.delete(row.snapshot_id, caller))) this.logger.info({ snapshotId: row.snapshot_id }, 'snapshot deleted by another request meanwhile');
    await this.storage.delete(row.layer_id).catch((err: Error) => {
      this.logger.warn({ snapshotId: row.snapshot_id, err: err.message }, 'snapshot deleted; its layer stays in the artifact store');
    });
    this.logger.info({ snapshotId: row.snapshot_id }, 'snapshot deleted');
  }

  /** Drops a capture that could not be made ready: its copies, its record. Failures are logged; the sweeps finish the job. */
  async discard(snapshotId: string, layerId: string): Promise<void> {
    await this.deleteFromNodes(layerId, (err) => this.logger.warn({ snapshotId, err: err.message }, 'discarded capture still read on a node; the orphan sweep removes it'));
    await this.storage.delete(layerId).catch((err: Error) => this.logger.warn({ snapshotId, err: err.message }, 'discarded capture stays in the artifact store'));
    await this.repo.delete(snapshotId).catch((err: Error) => this.logger.warn({ snapshotId, err: err.message }, 'discarded capture still recorded as pending; the pending sweep retries'));
  }

  private async deleteFromNodes(layerId: string, onBusy: (err: SvcError) => void): Promise<void> {
    for (const nodeId of await this.nodes.liveNodeIds()) {
      const node = await this.nodes.client(nodeId);
      await node.deleteLayer(layerId).catch((err: SvcError) => {
        if (err.status === 404) return; // this node has no copy
        if (err.status === 409) return onBusy(err);
        this.logger.warn({ nodeId, layerId, err: err.message }, 'layer copy not removed from a node; the orphan sweep removes it');
      });
    }
  }

  /**
   * Finishes users' captures (purpose 'snapshot') and builds' (purpose 'build', never named) a
   * master stopped before it copied their layer into the store (and rows from before layers
   * were stored): copied now and made ready under the name they asked for, or, when their node
   * no longer has the layer, removed. A capture younger than `minAgeMs` may be under way and
   * waits; a build's capture whose copy runs longer renews its row's lease (lease.ts), so only
   * one a stopped master left is this old (until 2026-12-01 those stayed pending, with their
   * node's layer, for good). Pause packages are not this sweep's (their stale sweep drops them:
   * pause-packages.ts): until 2026-12-01 it copied those again under their own copy.
   */
  async finishPending(minAgeMs = ORPHAN_MIN_AGE_MS): Promise<{ ready: string[]; removed: string[] }> {
    const ready: string[] = [];
    const removed: string[] = [];
    const live = new Set(await this.nodes.liveNodeIds());
    for (const row of await this.repo.pending(['snapshot', 'build'], Date.now() - minAgeMs)) {
      if (!live.has(row.node_id)) continue; // its node may come back with the layer
      try {
        await copyLayerToStore(await this.nodes.client(row.node_id), this.storage, { layerId: row.layer_id, sha256: row.layer_sha256, sizeBytes: Number(row.size_bytes) });
        await this.repo.markReady(row.snapshot_id, row.wanted_name && row.team_id ? { name: row.wanted_name, teamId: row.team_id } : null);
        ready.push(row.snapshot_id);
      } catch (err) {
        // Its name went to another team or a template meanwhile: nothing kept, as the capture itself does (repo.ts markReady).
        if ((err as SvcError).status === 409) this.logger.warn({ snapshotId: row.snapshot_id, name: row.wanted_name, err: (err as Error).message }, 'pending snapshot dropped: its name was taken');
        else if ((err as SvcError).status !== 404) {
          this.logger.warn({ snapshotId: row.snapshot_id, err: (err as Error).message }, 'pending snapshot not stored yet; the next sweep tries again');
          continue;
        }
        await this.discard(row.snapshot_id, row.layer_id);
        removed.push(row.snapshot_id);
      }
    }
    if (ready.length || removed.length) this.logger.info({ ready, removed }, 'pending snapshots finished');
    return { ready, removed };
  }

  /**
   * Removes layers that nodes keep but no snapshot names: what a master that stopped between a
   * capture and its record, or a fork that could not clean up, left behind. A layer younger than
   * `minAgeMs` may belong to a capture under way and stays.
   */
  async sweepOrphanLayers(minAgeMs = ORPHAN_MIN_AGE_MS): Promise<string[]> {
    const known = await this.repo.layerIds();
    const removed: string[] = [];
    for (const nodeId of await this.nodes.liveNodeIds()) {
      const node = await this.nodes.client(nodeId);
      for (const layer of await node.listLayers()) {
        if (known.has(layer.layerId) || Date.now() - Date.parse(layer.createdAt) < minAgeMs) continue;
        await node.deleteLayer(layer.layerId).then(() => removed.push(layer.layerId), (err: SvcError) => {
          if (err.status !== 404) this.logger.warn({ nodeId, layerId: layer.layerId, err: err.message }, 'orphan layer not removed; the next sweep tries again');
        });
      }
    }
    if (removed.length) this.logger.info({ removed }, 'orphan snapshot layers removed');
    return removed;
  }
}

/** How a node finds a stored snapshot's layer: its id and sha256, downloaded through the master. */
export function layerRefOf(s: SnapshotDbRow, storage: LayerStorage): LayerRef {
  return {
    layerId: s.layer_id, sha256: s.layer_sha256, sizeBytes: Number(s.size_bytes), downloadUrl: storage.downloadUrl(s.layer_id),
    ...(s.contents === 'memory' ? { contents: 'memory' as const } : {}),
  };
}

export function toRecord(r: SnapshotDbRow): SnapshotRecord {
  return {
    snapshotId: r.snapshot_id, ...(r.name ? { name: r.name } : {}), sandboxId: r.sandbox_id, templateId: r.template_id,
    contents: r.contents === 'memory' ? 'memory' : 'filesystem', sizeBytes: Number(r.size_bytes), nodeId: r.node_id, createdAt: new Date(Number(r.created_at)).toISOString(),
  };
}

function encodeToken(a: { createdAt: number; id: string }): string {
  return Buffer.from(`${a.createdAt}:${a.id}`).toString('base64url');
}

function decodeToken(t: string): { createdAt: number; id: string } {
  // At most 13 digits (epoch ms to the year 2286): a longer run is no token this master wrote,
  // and PostgreSQL's bigint refused it with a 500.
  const m = /^(\d{1,13}):(snap-[a-z0-9]+)$/.exec(Buffer.from(t, 'base64url').toString());
  if (!m) throw badRequest('nextToken is not valid: pass the token the previous page gave, as it came');
  return { createdAt: Number(m[1]), id: m[2] };
}
