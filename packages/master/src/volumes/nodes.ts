import { NODE_FEATURE_VOLUMES } from '@svc/contracts/volumes';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { VolumeNodes } from './ports.ts';

/** The registry's live nodes whose agents support volumes (older agents hold none). */
export function volumeNodesOf(nodes: NodeRegistry): VolumeNodes {
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
  };
}
