import { badRequest, conflict, randomId, SvcError, toSvcError, wrapError, type Logger } from '@svc/common';
import {
  MAX_FORK_COUNT, type CreateSandboxInput, type CreateSnapshotInput, type ForkInput, type ForkResult, type SnapshotRecord,
} from '@svc/contracts/master';
import type { LayerOnNode } from '@svc/contracts/node-agent';
import type { TeamQuotas, TemplateResolver } from '../sandboxes/ports.ts';
import type { MasterSandboxes } from '../sandboxes/service.ts';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { SnapshotDbRow, SnapshotRepo } from './repo.ts';
import type { SnapshotRow } from './tables.ts';
import { toRecord, type SnapshotCatalog } from './catalog.ts';
import { copyLayerToStore } from './layer-copy.ts';
import { LEASE_RENEW_MS, whileLeased } from './lease.ts';
import type { LayerStorage } from './ports.ts';

/** A snapshot name: letters, digits, '.', '_' and '-', as a template alias. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export interface SnapshotServiceDeps {
  repo: SnapshotRepo;
  sandboxes: MasterSandboxes;
  nodes: NodeRegistry;
  /** Templates alone (not snapshots): a snapshot name may not be a template's. */
  templates: TemplateResolver;
  storage: LayerStorage;
  catalog: SnapshotCatalog;
  logger: Logger;
  /** Teams' limits (maxSnapshots); absent: none. */
  quotas?: TeamQuotas;
  /** How often a build capture's copy renews its pending row (lease.ts); tests shorten it. */
  leaseRenewMs?: number;
}

/**
 * Taking snapshots and forks (docs/api.md, "Snapshots"). A snapshot is a running sandbox's
 * writable layer captured by its node agent, recorded as pending, copied into the artifact store
 * and only then ready (listed, usable); a create names it where a template goes
 * (SnapshotAwareResolver); SnapshotCatalog lists and deletes them. A fork captures once and
 * starts `count` sandboxes from that capture on the origin's node; the capture is then dropped.
 */
export class SnapshotService {
  constructor(private readonly d: SnapshotServiceDeps) {}

  async create(sandboxId: string, input: CreateSnapshotInput, caller?: string): Promise<SnapshotRecord> {
    const name = await this.checkName(input?.name, caller);
    const snapshot = await this.capture(sandboxId, { purpose: 'snapshot', name: name ?? null });
    await this.d.sandboxes.snapshotted(sandboxId, snapshot.snapshot_id);
    return toRecord(snapshot);
  }

  /**
   * Captures a running sandbox's files as a stored snapshot: recorded pending, copied into the
   * artifact store, then ready. A build's capture (purpose 'build') carries its cache key, its
   * build and the environment its steps set instead of the sandbox's own.
   */
  async capture(sandboxId: string, o: { purpose: SnapshotRow['purpose']; name?: string | null; cacheKey?: string; buildId?: string; envVars?: Record<string, string> }): Promise<SnapshotDbRow> {
    const src = await this.d.sandboxes.snapshotSource(sandboxId);
    const teamId = src.record.teamId;
    const limit = o.purpose === 'snapshot' && this.d.quotas ? (await this.d.quotas.limits(teamId)).maxSnapshots : 0;
    if (limit) this.within(limit, await this.d.repo.teamCount(teamId));
    const snapshotId = `snap-${randomId(16)}`;
    // A user's snapshot keeps the machine where the node's runtime can (microvm: memory and
    // processes too); a build's keeps files, which any runtime starts from.
    const layer = await src.node.snapshotSandbox(sandboxId, { layerId: snapshotId, memory: o.purpose !== 'build' });
    const row = {
      snapshot_id: snapshotId, sandbox_id: sandboxId, template_id: src.record.templateId,
      artifact_id: layer.artifactId, layer_id: layer.layerId, layer_sha256: layer.sha256, size_bytes: layer.sizeBytes,
      node_id: src.record.nodeId, contents: layer.contents, cpu_count: src.record.cpuCount, memory_mb: src.record.memoryMB,
      disk_size_mb: src.record.diskSizeMB, env_vars: JSON.stringify(o.envVars ?? src.envVars), created_at: Date.now(),
      purpose: o.purpose, cache_key: o.cacheKey ?? null, build_id: o.buildId ?? null, team_id: src.record.teamId,
      volume_mounts: src.volumeMounts.length ? JSON.stringify(src.volumeMounts) : null,
    };
    try {
      await this.d.repo.insertPending({ ...row, wanted_name: o.name ?? null });
    } catch (err) {
      // Nothing half-made is kept: a layer without its record would never be listed or collected.
      await src.node.deleteLayer(layer.layerId).catch((e: Error) => this.d.logger.warn({ snapshotId, err: e.message }, 'layer of an unrecorded snapshot left on its node'));
      // The database's words stay in the log: they may name its host, and the caller can only retry.
      this.d.logger.error({ snapshotId, sandboxId, err: (err as Error).message }, 'snapshot could not be recorded');
      throw new SvcError(503, `snapshot of ${sandboxId} could not be recorded; nothing was kept, retry`, { headers: { 'Retry-After': '2' } });
    }
    try {
      // Counted again once recorded: captures taken together all passed the count before theirs.
      if (limit) this.within(limit, await this.d.repo.teamCount(teamId, { createdAt: row.created_at, id: snapshotId }));
      // A capture may copy for longer than the pending sweep waits (a big sandbox's files, an
      // image's whole layer): its row's lease is renewed meanwhile, so the sweep (which finishes
      // the rows a stopped master left) does not copy it a second time under this copy.
      const what = o.purpose === 'build' ? 'build capture' : 'snapshot';
      await whileLeased(this.d.repo, this.d.logger, snapshotId, this.d.leaseRenewMs ?? LEASE_RENEW_MS, what, () => copyLayerToStore(src.node, this.d.storage, layer));
      await this.d.repo.markReady(snapshotId, o.name ? { name: o.name, teamId: src.record.teamId } : null);
    } catch (err) {
      await this.d.catalog.discard(snapshotId, layer.layerId);
      const e = toSvcError(err);
      // The store's 507, a name taken (409), the team's maxSnapshots (429): the caller's to read as they are.
      if (e.status === 507 || e.status === 409 || e.status === 429) throw e;
      throw wrapError(e, `snapshot of ${sandboxId} could not be stored; nothing was kept, retry`);
    }
    this.d.logger.info({ snapshotId, sandboxId, name: o.name, purpose: o.purpose, sizeBytes: layer.sizeBytes }, 'snapshot taken');
    return { ...row, name: o.name ?? null, wanted_name: null, status: 'ready', lease_at: null };
  }

  /** A 429 when the team keeps `count` snapshots already and may keep `limit` (docs/security.md, "Quotas"). */
  private within(limit: number, count: number): void {
    if (count >= limit) throw new SvcError(429, `team quota maxSnapshots reached: the team may keep ${limit} snapshots and keeps ${count}; delete one (svc snapshot rm) and retry; nothing was kept`);
  }

  /**
   * E2B's fork: one capture of the origin (which keeps running and sees none of their writes),
   * `count` sandboxes started from it with the origin's settings, each reported on its own.
   */
  async fork(sandboxId: string, input: ForkInput): Promise<ForkResult[]> {
    const count = input?.count ?? 1;
    if (!Number.isInteger(count) || count < 1 || count > MAX_FORK_COUNT) throw badRequest(`count must be an integer from 1 to ${MAX_FORK_COUNT}`);
    const src = await this.d.sandboxes.snapshotSource(sandboxId);
    // The admission a create makes, before the capture: until 2026-12-01 a team at maxSandboxes
    // had the origin captured (its whole machine, on the node's disk) before every create was refused.
    await this.d.sandboxes.checkCreateQuota(src.record.teamId, { memoryMB: src.record.memoryMB, cpuCount: src.record.cpuCount });
    const layerId = `fork-${randomId(16)}`;
    const layer: LayerOnNode = await src.node.snapshotSandbox(sandboxId, { layerId });
    try {
      const o = src.record;
      const resolved = {
        templateId: o.templateId, ...(o.alias ? { alias: o.alias } : {}), artifact: await this.d.templates.artifactRef(layer.artifactId),
        cpuCount: o.cpuCount, memoryMB: o.memoryMB, diskSizeMB: o.diskSizeMB, envVars: src.envVars,
        layer: { snapshotId: layerId, ref: { layerId, sha256: layer.sha256, sizeBytes: layer.sizeBytes, ...(layer.contents ? { contents: layer.contents } : {}) }, nodeId: o.nodeId },
        // Forks run where the origin runs (a saved machine restores only on its runtime).
        ...(o.runtime ? { runtime: o.runtime } : {}),
      };
      const create: CreateSandboxInput = {
        template: o.templateId, ...(input?.timeout === undefined ? {} : { timeout: input.timeout }),
        onTimeout: o.lifecycle.onTimeout, autoResume: o.lifecycle.autoResume, metadata: o.metadata, envVars: {},
        secure: o.secure, ...(o.allowInternetAccess === undefined ? {} : { allowInternetAccess: o.allowInternetAccess }),
        // Forks share the origin's volumes (docs/volumes.md), found again by their ids.
        network: src.network, volumeMounts: src.volumeMounts.map((m) => ({ name: m.volumeId ?? m.name, path: m.path, readOnly: m.readOnly })),
        cpuCount: o.cpuCount, memoryMB: o.memoryMB,
      };
      // Forks are the origin's team's, and count against its quota.
      const outcomes = await Promise.allSettled(Array.from({ length: count }, () => this.d.sandboxes.create(create, resolved, o.teamId)));
      return outcomes.map((r): ForkResult => r.status === 'fulfilled'
        ? { sandbox: r.value }
        : { error: { code: toSvcError(r.reason).status, message: toSvcError(r.reason).message } });
    } finally {
      await src.node.deleteLayer(layerId).catch((err: Error) => this.d.logger.warn({ sandboxId, layerId, err: err.message }, 'fork layer could not be removed from its node'));
    }
  }

  private async checkName(name: unknown, caller: string | undefined): Promise<string | undefined> {
    if (name === undefined || name === null || name === '') return undefined;
    if (typeof name !== 'string' || !NAME.test(name)) throw badRequest(`name ${JSON.stringify(name)} is not valid: letters, digits, '.', '_' and '-', at most 128, starting with a letter or digit`);
    const holder = await this.d.repo.resolve(name);
    // Ids are looked up before names: a name that is another snapshot's id would never be found.
    if (holder?.snapshot_id === name) throw badRequest(`name ${name} is a snapshot's id; choose another`);
    // A name moves to the newest snapshot given it, but never from another team's (docs/security.md).
    if (holder && caller !== undefined && holder.team_id !== caller) throw conflict(`the snapshot name ${name} is taken: choose another`);
    const isTemplate = await this.d.templates.resolveForCreate(name).then(() => true, (err: SvcError) => err.status !== 404);
    if (isTemplate) throw badRequest(`name ${name} is a template's; choose another`);
    return name;
  }
}
