import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { BuildSource } from '@svc/contracts/template-center';
import { imageInfo, ImageSourceError, type ResolvedImage } from './resolved-image.ts';

type RootfsTarSource = Extract<BuildSource, { kind: 'rootfs-tar' }>;

/** A root filesystem tarball (plain, gzip or zstd) is one layer without whiteouts. */
export async function resolveRootfsTar(src: RootfsTarSource): Promise<ResolvedImage> {
  const st = await stat(src.path).catch(() => { throw new ImageSourceError(`root filesystem tarball ${src.path} does not exist`); });
  if (!st.isFile()) throw new ImageSourceError(`root filesystem tarball ${src.path} is not a file`);
  return {
    whiteouts: false,
    layers: [{
      size: st.size,
      label: src.path,
      open: async () => createReadStream(src.path, { highWaterMark: 1024 * 1024 }),
    }],
    info: imageInfo(undefined, { layers: 1, sizeBytes: st.size }),
  };
}
