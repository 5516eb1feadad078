import type { Kysely } from 'kysely';
import type { Logger, SvcError } from '@svc/common';
import type { TemplateCenterClient } from '@svc/contracts/template-center';
import type { Database } from '../db/schema.ts';
import type { NodeRegistry } from '../nodes/registry.ts';
import { countReferences, type ArtifactStore, type DefinitionStore } from './store/artifacts.ts';

export type CleanupOutcome = 'deleted' | 'referenced' | 'retry' | 'gone';

export interface CleanupDeps {
  db: Kysely<Database>;
  artifacts: ArtifactStore;
  definitions: DefinitionStore;
  nodes: NodeRegistry;
  templateCenter: TemplateCenterClient;
  logger: Logger;
  /** How long an unreferenced artifact (or a superseded definition) is kept before the sweep removes it. */
  graceMs: number;
}

/**
 * Artifact deletion in three phases (docs/design.md, "Build jobs"):
 *   1. count references and mark the artifact CLEANUP_PENDING;
 *   2. destroy the copies on the placement nodes (idempotent);
 *   3. re-check references and status, drop the placement rows, ask the template center to delete
 *      the stored data, then remove the row.
 * An interrupted deletion stays CLEANUP_PENDING and the sweep carries it on.
 */
export class ArtifactCleanup {
  constructor(private readonly d: CleanupDeps) {}

  async deleteIfUnreferenced(artifactId: string, now = Date.now()): Promise<CleanupOutcome> {
    const log = this.d.logger.child({ artifactId });
    // Phase 1
    const a = await this.d.artifacts.get(artifactId);
    if (!a) return 'gone';
    if (await this.references(artifactId, now) > 0) return 'referenced';
    if (a.status !== 'CLEANUP_PENDING' && !(await this.d.artifacts.transition(artifactId, [a.status as never], { status: 'CLEANUP_PENDING' }))) {
      return 'retry';
    }
    // Phase 2
    const placements = await this.d.artifacts.placements(artifactId);
    const live = new Set(await this.d.nodes.liveNodeIds());
    const targets = new Set([...placements.map((p) => p.node_id), ...live]);
    const stuck: string[] = [];
    for (const nodeId of targets) {
      if (placements.some((p) => p.node_id === nodeId)) await this.d.artifacts.setPlacement(artifactId, nodeId, 'DELETING');
      try {
        await (await this.d.nodes.client(nodeId)).deleteArtifact(artifactId);
      } catch (err) {
        const e = err as SvcError;
        if (e.status === 404) continue;
        // A node that is down removes unknown artifacts when it registers again (Distributor.syncNode).
        if (live.has(nodeId)) stuck.push(nodeId);
        else log.info({ nodeId }, 'artifact copy left on an unreachable node; it is removed when the node registers again');
      }
    }
    if (stuck.length) {
      log.warn({ nodes: stuck }, 'artifact deletion waits for nodes that did not confirm; the sweep retries');
      return 'retry';
    }
    // Phase 3
    const again = await this.d.artifacts.get(artifactId);
    if (!again) return 'gone';
    if (again.status !== 'CLEANUP_PENDING') return 'retry';
    if (await this.references(artifactId, Date.now()) > 0) {
      // Something took it up again; the stored data is intact, so it is usable once more.
      if (again.sha256) await this.d.artifacts.transition(artifactId, ['CLEANUP_PENDING'], { status: 'READY', gc_deadline_at: null });
      return 'referenced';
    }
    await this.d.artifacts.dropPlacements(artifactId);
    try {
      await this.d.templateCenter.deleteArtifact(artifactId);
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'template center did not delete the artifact; the sweep retries');
      return 'retry';
    }
    if (again.storage === 'legacy-local') {
      log.warn({ path: again.location }, 'legacy artifact file on the master was not migrated and is left on disk; remove it by hand');
    }
    await this.d.artifacts.deleteIfCleanupPending(artifactId);
    log.info('artifact deleted');
    return 'deleted';
  }

  /**
   * The background GC: unreferenced artifacts get a deadline (now + grace); past it they are
   * deleted in the same three phases. Interrupted deletions are carried on.
   */
  async sweep(now = Date.now()): Promise<{ deleted: string[] }> {
    await this.d.definitions.pruneSuperseded(now - this.d.graceMs);
    const deleted: string[] = [];
    for (const a of await this.d.artifacts.list()) {
      if (a.status !== 'CLEANUP_PENDING') {
        const refs = await this.references(a.artifact_id, now);
        if (refs > 0) {
          if (a.gc_deadline_at !== null) await this.d.artifacts.update(a.artifact_id, { gc_deadline_at: null });
          continue;
        }
        if (a.gc_deadline_at === null) {
          await this.d.artifacts.update(a.artifact_id, { gc_deadline_at: now + this.d.graceMs });
          continue;
        }
        if (Number(a.gc_deadline_at) > now) continue;
      }
      if (await this.deleteIfUnreferenced(a.artifact_id, now) === 'deleted') deleted.push(a.artifact_id);
    }
    return { deleted };
  }

  private references(artifactId: string, now: number): Promise<number> {
    return countReferences(this.d.db, artifactId, now, this.d.graceMs);
  }
}
