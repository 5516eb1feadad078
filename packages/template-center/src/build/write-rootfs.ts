import { mkdir, stat } from 'node:fs/promises';
import { measureTree } from '../rootfs/measure.ts';
import { fitSizeMB, ImageTooSmallError, makeExt4 } from '../rootfs/mkfs.ts';
import { BuildError } from './build-error.ts';

export interface WriteRootfsOptions {
  staging: string;
  imagePath: string;
  /** The template's disk_size_mb; 0: a size that fits the tree. */
  diskSizeMB: number;
  /** svclet_conf.max_disk_size_mb: the largest disk a sandbox may have, and so the largest image (absent: none). */
  maxDiskSizeMB?: number;
  scratchDir: string;
  signal: AbortSignal;
}

/**
 * The staging tree made an ext4 image at `imagePath`: of the template's disk size, or of a size
 * that fits it, which is held to svclet_conf.max_disk_size_mb as a template's own disk size is
 * (create-request.ts in the master): a tree of a million small files asked mkfs for an image far
 * past any disk a sandbox may have. Answers the image's size in bytes.
 */
export async function writeRootfs(o: WriteRootfsOptions): Promise<number> {
  const tree = await measureTree(o.staging);
  const fit = fitSizeMB(tree);
  const max = o.maxDiskSizeMB ?? Infinity;
  await mkdir(o.scratchDir, { recursive: true, mode: 0o700 });
  const make = (sizeMB: number) => makeExt4({ staging: o.staging, image: o.imagePath, sizeMB, tree, signal: o.signal });
  if (o.diskSizeMB > 0) {
    await make(o.diskSizeMB).catch((err) => {
      if (err instanceof ImageTooSmallError) err.message = `the root filesystem needs about ${fit} MB but diskSizeMB is ${o.diskSizeMB}`;
      throw err;
    });
  } else {
    if (fit > max) throw new BuildError(`the root filesystem needs about ${fit} MB, more than svclet_conf.max_disk_size_mb (${max} MB), the largest disk a sandbox may have`);
    // The estimate is generous; one larger retry covers trees with unusual block usage.
    await make(fit).catch((err) => {
      if (!(err instanceof ImageTooSmallError)) throw err;
      const retry = Math.min(Math.ceil(fit * 1.5), max);
      if (retry <= fit) throw new BuildError(`the root filesystem does not fit in ${fit} MB, and svclet_conf.max_disk_size_mb (${max} MB) allows no larger image`, { cause: err });
      return make(retry);
    });
  }
  return (await stat(o.imagePath)).size;
}
