import { randomId, SvcError, toSvcError, wrapError, type Logger } from '@svc/common';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { PausePackages, StoredPause } from '../sandboxes/ports.ts';
import { layerRefOf, type SnapshotCatalog } from './catalog.ts';
import { copyLayerToStore } from './layer-copy.ts';
import { LEASE_RENEW_MS, whileLeased } from './lease.ts';
import type { LayerStorage } from './ports.ts';
import type { SnapshotDbRow, SnapshotRepo } from './repo.ts';

/**
 * How long an unreferenced package must have gone without its lease renewed before the sweep
 * drops it: its copy renews it every LEASE_RENEW_MS (lease.ts), so only a master that stopped leaves one
 * that old.
 */
const STALE_MIN_AGE_MS = 15 * 60_000;

/**
 * Pause packages as snapshot rows of purpose 'pause' (never listed, never named): the node
 * captures the paused sandbox as it lies, the layer is copied into the artifact store, and only
 * then is the package ready (docs/cluster.md, "Cross-node restore").
 */
export class PausePackageStore implements PausePackages {
  constructor(
    private readonly repo: SnapshotRepo, private readonly nodes: NodeRegistry, private readonly storage: LayerStorage, private readonly catalog: SnapshotCatalog, private readonly logger: Logger,
    private readonly leaseRenewMs = LEASE_RENEW_MS,
  ) {}

  async store(s: Parameters<PausePackages['store']>[0]): Promise<StoredPause> {
    const node = await this.nodes.client(s.nodeId);
    const snapshotId = `pause-${randomId(16)}`;
    const layer = await node.snapshotSandbox(s.sandboxId, { layerId: snapshotId });
    const row = {
      snapshot_id: snapshotId, sandbox_id: s.sandboxId, template_id: s.templateId, artifact_id: layer.artifactId, layer_id: layer.layerId,
      layer_sha256: layer.sha256, size_bytes: layer.sizeBytes, node_id: s.nodeId, contents: layer.contents, cpu_count: s.cpuCount,
      memory_mb: s.memoryMB, disk_size_mb: s.diskSizeMB, env_vars: '{}', created_at: Date.now(), purpose: 'pause' as const,
      cache_key: null, build_id: null, team_id: s.teamId, volume_mounts: null,
    };
    try {
      await this.repo.insertPending(row);
      // A big package copies for longer than the stale sweep waits: its lease is renewed meanwhile,
      // and a row dropped all the same (a master's clock far off) makes markReady a 404, so the
      // copy just stored is removed below rather than left in the store with no row naming it.
      await whileLeased(this.repo, this.logger, snapshotId, this.leaseRenewMs, 'pause package', () => copyLayerToStore(node, this.storage, layer));
      await this.repo.markReady(snapshotId, null);
    } catch (err) {
      await this.catalog.discard(snapshotId, layer.layerId);
      throw wrapError(err, `the pause package of ${s.sandboxId} could not be stored`, toSvcError(err).status === 507 ? 507 : 503);
    }
    // The node keeps no copy: the paused sandbox itself is there, and another node downloads it.
    await node.deleteLayer(layer.layerId).catch((err: Error) => this.logger.warn({ snapshotId, err: err.message }, 'pause package\'s copy stays on its node; the orphan sweep removes it'));
    this.logger.info({ sandboxId: s.sandboxId, snapshotId, sizeBytes: layer.sizeBytes, contents: layer.contents }, 'pause package stored');
    return this.toStored({ ...row, name: null, wanted_name: null, status: 'ready', lease_at: null });
  }

  async get(snapshotId: string): Promise<StoredPause | undefined> {
    const row = await this.repo.get(snapshotId);
    return row?.purpose === 'pause' ? this.toStored(row) : undefined;
  }

  async drop(snapshotId: string): Promise<void> {
    const row = await this.repo.get(snapshotId);
    if (row?.purpose === 'pause') await this.catalog.discard(snapshotId, row.layer_id);
  }

  /**
   * Drops packages their sandbox no longer names (it resumed, was killed, or a master stopped
   * between storing one and recording it) and whose lease ran out: a package still being copied
   * has its lease renewed (lease.ts), and until 2026-12-01 one that copied for more than
   * 15 minutes was dropped under its copy. `named` answers which package a sandbox names now.
   */
  async sweepStale(named: (sandboxId: string) => Promise<string | null>, minAgeMs = STALE_MIN_AGE_MS): Promise<string[]> {
    const dropped: string[] = [];
    for (const row of await this.repo.byPurpose('pause', Date.now() - minAgeMs)) {
      if ((await named(row.sandbox_id)) === row.snapshot_id) continue;
      await this.catalog.discard(row.snapshot_id, row.layer_id);
      dropped.push(row.snapshot_id);
    }
    if (dropped.length) this.logger.info({ dropped }, 'stale pause packages dropped');
    return dropped;
  }

  private toStored(row: SnapshotDbRow): StoredPause {
    return { snapshotId: row.snapshot_id, artifactId: row.artifact_id, layer: layerRefOf(row, this.storage) };
  }
}
