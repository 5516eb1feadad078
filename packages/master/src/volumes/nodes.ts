import type { Kysely } from 'kysely';
import type { Logger } from '@svc/common';
import { NODE_FEATURE_VOLUMES } from '@svc/contracts/volumes';
import type { Database } from '../db/schema.ts';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { UnreachableHolder, VolumeNodes } from './ports.ts';

/** The registry's live nodes whose agents support volumes (older agents hold none). */
export function volumeNodesOf(nodes: NodeRegistry, db: Kysely<Database>, logger: Logger): VolumeNodes {
  return {
    async live() {
      const out: Array<{ nodeId: string; baseUrl: string; headers: Record<string, string> }> = [];
      for (const nodeId of await nodes.liveNodeIds()) {
        if (!(await nodes.features(nodeId)).includes(NODE_FEATURE_VOLUMES)) continue;
        const client = await nodes.client(nodeId);
        out.push({ nodeId, baseUrl: client.baseUrl, headers: client.authHeaders });
      }
      return out;
    },
    async attachments(nodeId) {
      return (await nodes.client(nodeId)).volumeAttachments();
    },
    async unreachableHolders(volume) {
      const live = new Set(await nodes.liveNodeIds());
      // The team's alone: no other team's sandbox mounts its volume. A node's running sandboxes
      // are terminated (node_lost) once it stays silent for master.node_lost_after_sec; its
      // paused ones stay, and may still hold the mount (a freeze keeps it).
      const rows = await db.selectFrom('t_svc_sandbox').select(['sandbox_id', 'node_id', 'volume_mounts'])
        .where('team_id', '=', volume.teamId).where('state', '!=', 'terminated').execute();
      const out: UnreachableHolder[] = [];
      const features = new Map<string, boolean>();
      for (const r of rows) {
        if (live.has(r.node_id) || !mountsVolume(r.volume_mounts, volume, (err) => logger.warn({ sandboxId: r.sandbox_id, volumeId: volume.volumeId, err }, 'a sandbox record\'s volume mounts are unreadable; taken as not mounting the volume being deleted'))) continue;
        if (!features.has(r.node_id)) features.set(r.node_id, (await nodes.features(r.node_id)).includes(NODE_FEATURE_VOLUMES));
        // An agent without volume support started the sandbox without its mounts (docs/volumes.md).
        if (features.get(r.node_id)) out.push({ nodeId: r.node_id, sandboxId: r.sandbox_id });
      }
      return out;
    },
  };
}

function mountsVolume(json: string, volume: { volumeId: string; name: string }, unreadable: (err: string) => void): boolean {
  let mounts: unknown;
  try {
    mounts = JSON.parse(json);
  } catch (err) {
    unreadable((err as Error).message);
    return false;
  }
  if (!Array.isArray(mounts)) return false;
  return mounts.some((m: { volumeId?: unknown; name?: unknown }) => (typeof m?.volumeId === 'string' ? m.volumeId === volume.volumeId : m?.name === volume.name || m?.name === volume.volumeId));
}
