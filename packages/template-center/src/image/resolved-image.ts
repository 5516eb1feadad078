import type { ImageInfo } from '@svc/contracts/template-center';
import type { LayerBlob } from '../layers/layer-blob.ts';
import type { ImageConfig } from './oci-types.ts';

/** An image reduced to what the build needs: its layers in order and what to report about it. */
export interface ResolvedImage {
  layers: LayerBlob[];
  /** Whether `.wh.*` entries are whiteouts (true for image layers). */
  whiteouts: boolean;
  info: ImageInfo;
}

export function imageInfo(config: ImageConfig | undefined, extra: { digest?: string; layers: number; sizeBytes: number }): ImageInfo {
  const c = config?.config ?? {};
  return {
    digest: extra.digest,
    os: config?.os,
    architecture: config?.architecture,
    layers: extra.layers,
    sizeBytes: extra.sizeBytes,
    env: c.Env ?? undefined,
    workingDir: c.WorkingDir || undefined,
    user: c.User || undefined,
    entrypoint: c.Entrypoint ?? undefined,
    cmd: c.Cmd ?? undefined,
  };
}

export class ImageSourceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ImageSourceError';
  }
}
