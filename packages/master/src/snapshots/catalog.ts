import { badRequest, conflict, notFound, type Logger, type SvcError } from '@svc/common';
import type { ListSnapshotsQuery, SnapshotPage, SnapshotRecord } from '@svc/contracts/master';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { SnapshotDbRow, SnapshotRepo } from './repo.ts';

/** How old a layer no snapshot names must be before the sweep removes it (a capture takes less). */
const ORPHAN_MIN_AGE_MS = 15 * 60_000;

/**
 * The snapshots there are: listed, found, deleted (with their layer on the node that keeps it).
 * Needs no sandbox service, so the template module can use it (E2B deletes a snapshot through
 * DELETE /templates/{id}).
 */
export class SnapshotCatalog {
  constructor(private readonly repo: SnapshotRepo, private readonly nodes: NodeRegistry, private readonly logger: Logger) {}

  async list(q: ListSnapshotsQuery): Promise<SnapshotPage> {
    const limit = q.limit === undefined ? 100 : Number(q.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw badRequest('limit must be an integer from 1 to 1000');
    const after = q.nextToken ? decodeToken(q.nextToken) : undefined;
    const rows = await this.repo.list({ sandboxId: q.sandboxId || undefined, ref: q.name || undefined, after, limit: limit + 1 });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      snapshots: page.map(toRecord),
      ...(rows.length > limit && last ? { nextToken: encodeToken({ createdAt: Number(last.created_at), id: last.snapshot_id }) } : {}),
    };
  }

  /** 404 when unknown; 409 while a create from it is reading its layer. */
  async delete(ref: string): Promise<void> {
    const row = await this.repo.resolve(ref);
    if (!row) throw notFound(`snapshot ${ref} not found`);
    await this.deleteRow(row, ref);
  }

  /** Deletes the snapshot `ref` names (id or name) if there is one; false when there is none. */
  async deleteIfSnapshot(ref: string): Promise<boolean> {
    const row = await this.repo.resolve(ref);
    if (!row) return false;
    await this.deleteRow(row, ref);
    return true;
  }

  private async deleteRow(row: SnapshotDbRow, ref: string): Promise<void> {
    const node = await this.nodes.client(row.node_id).catch(() => undefined);
    if (node) {
      await node.deleteLayer(row.layer_id).catch((err: SvcError) => {
        if (err.status === 404) return; // already gone from its node
        throw err.status === 409 ? conflict(`snapshot ${ref}: ${err.message}`) : err;
      });
    } else {
      this.logger.warn({ snapshotId: row.snapshot_id, nodeId: row.node_id }, 'snapshot deleted while its node is unknown; its layer stays there');
    }
    await this.repo.delete(row.snapshot_id);
    this.logger.info({ snapshotId: row.snapshot_id }, 'snapshot deleted');
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

export function toRecord(r: SnapshotDbRow): SnapshotRecord {
  return {
    snapshotId: r.snapshot_id, ...(r.name ? { name: r.name } : {}), sandboxId: r.sandbox_id, templateId: r.template_id,
    contents: 'filesystem', sizeBytes: Number(r.size_bytes), nodeId: r.node_id, createdAt: new Date(Number(r.created_at)).toISOString(),
  };
}

function encodeToken(a: { createdAt: number; id: string }): string {
  return Buffer.from(`${a.createdAt}:${a.id}`).toString('base64url');
}

function decodeToken(t: string): { createdAt: number; id: string } {
  const m = /^(\d+):(snap-[a-z0-9]+)$/.exec(Buffer.from(t, 'base64url').toString());
  if (!m) throw badRequest('nextToken is not valid');
  return { createdAt: Number(m[1]), id: m[2] };
}
