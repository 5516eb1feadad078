import type { BuildSource } from '@svc/contracts/template-center';
import { resolveDockerArchive } from './docker-archive-source.ts';
import { resolveOciLayout } from './oci-layout-source.ts';
import { resolveRegistryImage, type RegistryOptions } from './registry-source.ts';
import { ImageSourceError, type ResolvedImage } from './resolved-image.ts';
import { resolveRootfsTar } from './rootfs-tar-source.ts';

export function resolveSource(source: BuildSource, signal: AbortSignal, registry: RegistryOptions = {}): Promise<ResolvedImage> {
  switch (source?.kind) {
    // Made, not fetched: its build takes its own path (build/debian-build.ts).
    case 'debian-rootfs': return Promise.reject(new ImageSourceError('a debian-rootfs source is made by its own build path, not resolved as an image'));
    case 'registry': return resolveRegistryImage(source, signal, registry);
    case 'oci-layout': return resolveOciLayout(source);
    case 'docker-archive': return resolveDockerArchive(source);
    case 'rootfs-tar': return resolveRootfsTar(source);
    default: return Promise.reject(new ImageSourceError(`unknown build source kind ${JSON.stringify((source as { kind?: unknown })?.kind)}`));
  }
}

