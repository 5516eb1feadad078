import type { BuildSource } from '@svc/contracts/template-center';
import { baseRootfsPath, buildBaseRootfs } from '../base-template.ts';
import { ImageSourceError, type ResolvedImage } from './resolved-image.ts';
import { resolveRootfsTar } from './rootfs-tar-source.ts';

type DebianRootfsSource = Extract<BuildSource, { kind: 'debian-rootfs' }>;

/**
 * A root filesystem made here from Debian's packages (base-template.ts: mmdebstrap, its tarball
 * cached machine-wide), then read as a rootfs tarball. Making it is the build's PULLING phase,
 * its steps the job's progress message. A recipe key that is not this template center's
 * (svc was updated between the request and the build) is refused rather than built otherwise.
 */
export async function resolveDebianRootfs(src: DebianRootfsSource, signal: AbortSignal, onMessage?: (message: string) => void): Promise<ResolvedImage> {
  const want = baseRootfsPath({ flavor: src.flavor });
  if (src.recipe && src.recipe !== want.key) {
    throw new ImageSourceError(`debian-rootfs ${src.flavor}@${src.recipe}: this template center makes recipe ${want.key} of ${src.flavor}; ask for that one`);
  }
  const tar = await buildBaseRootfs({
    flavor: src.flavor, signal,
    onProgress: (p) => onMessage?.(`${src.flavor} root filesystem from Debian's packages: ${p.phase}${p.message && p.phase !== 'cached' && p.phase !== 'done' ? ` (${p.message.slice(0, 120)})` : ''}`),
  }).catch((err: Error) => {
    if (signal.aborted) throw err;
    throw new ImageSourceError(`making the ${src.flavor} root filesystem from Debian's packages failed: ${err.message}`);
  });
  return resolveRootfsTar({ kind: 'rootfs-tar', path: tar.path });
}
