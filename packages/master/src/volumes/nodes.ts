import { NODE_FEATURE_VOLUMES } from '@svc/contracts/volumes';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { VolumeNodes } from './ports.ts';

/** The registry's live nodes whose agents support volumes (older agents hold none). */
export function volumeNodesOf(nodes: NodeRegistry): VolumeNodes {
  return {
    async live() {
      const out: Array<{ nodeId: string; baseUrl: string }> = [];
      for (const nodeId of await nodes.liveNodeIds()) {
        if ((await nodes.features(nodeId)).includes(NODE_FEATURE_VOLUMES)) out.push({ nodeId, baseUrl: (await nodes.client(nodeId)).baseUrl });
      }
      return out;
    },
    async attachments(nodeId) {
      return (await nodes.client(nodeId)).volumeAttachments();
    },
  };
}
