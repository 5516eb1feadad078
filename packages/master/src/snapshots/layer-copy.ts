import { errorFromStream } from '@svc/common';
import type { LayerOnNode, NodeAgentClient } from '@svc/contracts/node-agent';
import type { LayerStorage } from './ports.ts';

/** Streams a captured layer from the node that holds it into the artifact store. */
export async function copyLayerToStore(node: NodeAgentClient, storage: LayerStorage, layer: Pick<LayerOnNode, 'layerId' | 'sha256' | 'sizeBytes'>): Promise<void> {
  const archive = await node.layerArchive(layer.layerId);
  if (archive.statusCode !== 200) throw await errorFromStream(archive);
  await storage.put(layer.layerId, { sha256: layer.sha256, sizeBytes: layer.sizeBytes }, archive);
}
