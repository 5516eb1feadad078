import type { Logger } from '@svc/common';
import type { NodeRegistry } from '../nodes/registry.ts';
import { artifactRef } from './artifact-url.ts';
import type { ArtifactStore } from './store/artifacts.ts';
import type { TemplateStore } from './store/templates.ts';
import type { ArtifactRow } from './tables.ts';

export interface DistributionResult {
  placed: string[];
  failed: Array<{ nodeId: string; message: string }>;
}

export interface DistributorDeps {
  nodes: NodeRegistry;
  artifacts: ArtifactStore;
  templates: TemplateStore;
  masterAddr: string;
  logger: Logger;
}

const CONCURRENCY = 4;

/** Puts artifacts on node agents (ensureArtifact) and keeps the placement rows in step. */
export class Distributor {
  constructor(private readonly d: DistributorDeps) {}

  /** Ensures the artifact on every node; a placement row is written for each node that has it. */
  async toNodes(artifact: ArtifactRow, nodeIds: string[], onNodeDone: () => void = () => {}): Promise<DistributionResult> {
    const ref = artifactRef(this.d.masterAddr, artifact);
    const result: DistributionResult = { placed: [], failed: [] };
    const queue = [...nodeIds];
    const worker = async () => {
      for (let nodeId = queue.shift(); nodeId !== undefined; nodeId = queue.shift()) {
        try {
          const client = await this.d.nodes.client(nodeId);
          await client.ensureArtifact(ref.artifactId, { sha256: ref.sha256, sizeBytes: ref.sizeBytes, downloadUrl: ref.downloadUrl, ...(ref.localPath ? { localPath: ref.localPath } : {}) });
          await this.d.artifacts.setPlacement(ref.artifactId, nodeId, 'READY');
          result.placed.push(nodeId);
        } catch (err) {
          result.failed.push({ nodeId, message: (err as Error).message });
        }
        onNodeDone();
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, nodeIds.length) }, worker));
    return result;
  }

  /**
   * Brings a (re-)registered node in line: copies the artifacts of ready templates it lacks, records
   * the ones it already has, and removes copies of artifacts that are being deleted or are gone.
   */
  async syncNode(nodeId: string): Promise<void> {
    const client = await this.d.nodes.client(nodeId);
    const onNode = await client.listArtifacts();
    const present = new Set<string>();
    for (const a of onNode) {
      const row = await this.d.artifacts.get(a.artifactId);
      if (!row || row.status === 'CLEANUP_PENDING') {
        await client.deleteArtifact(a.artifactId).catch((err) =>
          this.d.logger.warn({ nodeId, artifactId: a.artifactId, err: (err as Error).message }, 'could not remove a stale artifact from a node'));
        if (row) await this.d.artifacts.dropPlacements(a.artifactId, [nodeId]);
        continue;
      }
      present.add(a.artifactId);
      if (row.status === 'READY') await this.d.artifacts.setPlacement(a.artifactId, nodeId, 'READY');
    }
    for (const p of await this.d.artifacts.placementsOnNode(nodeId)) {
      if (!present.has(p.artifact_id)) await this.d.artifacts.dropPlacements(p.artifact_id, [nodeId]);
    }
    const wanted = new Set((await this.d.templates.list()).filter((t) => t.status === 'ready' && t.artifact_id).map((t) => t.artifact_id!));
    for (const artifactId of wanted) {
      if (present.has(artifactId)) continue;
      const row = await this.d.artifacts.get(artifactId);
      if (!row || row.status !== 'READY') continue;
      const r = await this.toNodes(row, [nodeId]);
      for (const f of r.failed) this.d.logger.warn({ nodeId, artifactId, err: f.message }, 'could not copy an artifact to a registered node');
    }
  }
}
