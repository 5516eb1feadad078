import type { SvcError } from '@svc/common';
import type { NodeAgentClient } from '@svc/contracts/node-agent';
import type { VolumeMount } from '@svc/contracts/master';
import { NODE_FEATURE_VOLUMES, type ExtInfo, type VolumeMountOnNode } from '@svc/contracts/volumes';
import type { SandboxContext } from './context.ts';
import type { Row } from './repo.ts';

type Deleter = { deleteSandbox(id: string, timeoutMs?: number): Promise<ExtInfo> };

/** A node's destroy, whose answer moves the volume counts. */
export async function deleteOnNode(c: SandboxContext, client: Deleter, sandboxId: string, timeoutMs?: number): Promise<void> {
  const ext = await client.deleteSandbox(sandboxId, timeoutMs);
  await c.d.volumes?.applyFlips(ext?.volumeRefFlips);
}

/** Removes a sandbox from its node in the background, logging what fails (create rollbacks). */
export function discardOnNode(c: SandboxContext, client: Deleter, nodeId: string, sandboxId: string, why: string): void {
  deleteOnNode(c, client, sandboxId).catch((err: SvcError) => {
    if (err.status === 404) return;
    c.d.logger.warn({ sandboxId, nodeId, why, err: err.message }, 'could not remove a sandbox after a failed create; the orphan sweep removes it later');
  });
}

/** What placeSandbox needs: the registry, and how to leave nothing on a node a create failed on. */
export function placing(c: SandboxContext, sandboxId: string) {
  return { nodes: c.d.nodes, logger: c.d.logger, discard: (client: NodeAgentClient, nodeId: string, why: string) => discardOnNode(c, client, nodeId, sandboxId, why) };
}

/** In the background: a package its sandbox no longer needs (it runs again, or was killed). */
export function dropPausePackage(c: SandboxContext, sandboxId: string, snapshotId: string | null): Promise<void> {
  if (!snapshotId || !c.d.pausePackages) return Promise.resolve();
  return c.d.pausePackages.drop(snapshotId).catch((err: Error) => {
    c.d.logger.warn({ sandboxId, snapshotId, err: err.message }, 'pause package not dropped; the stale package sweep removes it');
  });
}

/**
 * The volumes a node is sent: all of them where the agent supports volumes; none on an older
 * agent, where the mounts are a no-op and the create goes on (docs/volumes.md).
 */
export async function volumesFor(c: SandboxContext, nodeId: string, volumes: VolumeMountOnNode[]): Promise<VolumeMountOnNode[]> {
  if (volumes.length === 0) return [];
  if ((await c.d.nodes.features(nodeId)).includes(NODE_FEATURE_VOLUMES)) return volumes;
  c.d.logger.warn({ nodeId, volumes: volumes.map((v) => v.volumeId) }, 'node agent without volume support: the sandbox starts without its volume mounts');
  return [];
}

/**
 * A node call that attaches volumes, run with them claimed (a DELETE refuses until it ends:
 * docs/volumes.md, "Lifecycle and counts"); `call` applies its answer's flips before it returns.
 */
export function attaching<T>(c: SandboxContext, volumeIds: string[], call: () => Promise<T>): Promise<T> {
  return volumeIds.length > 0 && c.d.volumes ? c.d.volumes.whileAttaching(volumeIds, call) : call();
}

/** The current records of a sandbox's volumes, for a boot on `nodeId` that attaches them again. */
export async function recordedVolumes(c: SandboxContext, row: Row, nodeId: string): Promise<VolumeMountOnNode[]> {
  if (!(await c.d.nodes.features(nodeId)).includes(NODE_FEATURE_VOLUMES)) return [];
  return currentVolumes(c, row);
}

/** The current records of a sandbox's volumes, whatever node it boots on: 404 for one deleted since. */
export async function currentVolumes(c: SandboxContext, row: Row): Promise<VolumeMountOnNode[]> {
  const recorded = JSON.parse(row.volume_mounts) as Array<VolumeMount & { volumeId?: string }>;
  if (recorded.length === 0 || !c.d.volumes) return [];
  return c.d.volumes.current(recorded, row.team_id);
}
