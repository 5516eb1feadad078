import { errorFromResponse } from '@svc/common';
import type { LayerOnNode, NodeAgentClient } from '@svc/contracts/node-agent';
import type { LayerStorage } from './ports.ts';

/** Streams a captured layer from the node that holds it into the artifact store. */
export async function copyLayerToStore(node: NodeAgentClient, storage: LayerStorage, layer: Pick<LayerOnNode, 'layerId' | 'sha256' | 'sizeBytes'>): Promise<void> {
  const res = await node.layerArchive(layer.layerId);
  if (!res.ok || !res.body) throw errorFromResponse(res, await res.text());
  await storage.put(layer.layerId, { sha256: layer.sha256, sizeBytes: layer.sizeBytes }, res.body);
}
