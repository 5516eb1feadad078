/** What the snapshot module needs from the rest of the master, as small interfaces. */
import type { Readable } from 'node:stream';

/**
 * The artifact store (the template center's) as snapshots use it: a layer is copied in once
 * it is captured, nodes download it from there for a create, and it goes with its snapshot.
 */
export interface LayerStorage {
  /** Copies a layer's archive in; the same layer again stores nothing new. 507 when there is no room. */
  put(layerId: string, meta: { sha256: string; sizeBytes: number }, archive: Readable): Promise<void>;
  /** Removes it; nothing there is not an error. */
  delete(layerId: string): Promise<void>;
  /** Where a node agent downloads it (through the master). */
  downloadUrl(layerId: string): string;
}
