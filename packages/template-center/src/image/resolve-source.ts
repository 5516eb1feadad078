import type { BuildSource } from '@svc/contracts/template-center';
import { resolveDockerArchive } from './docker-archive-source.ts';
import { resolveOciLayout } from './oci-layout-source.ts';
import { resolveRegistryImage, type RegistryOptions } from './registry-source.ts';
import { ImageSourceError, type ResolvedImage } from './resolved-image.ts';
import { resolveRootfsTar } from './rootfs-tar-source.ts';
import { resolveDebianRootfs } from './debian-rootfs-source.ts';

/** How a source that is made rather than fetched (debian-rootfs) says what it is doing. */
export interface SourceProgress {
  onMessage?: (message: string) => void;
}

export function resolveSource(source: BuildSource, signal: AbortSignal, registry: RegistryOptions & SourceProgress = {}): Promise<ResolvedImage> {
  switch (source?.kind) {
    case 'debian-rootfs': return resolveDebianRootfs(source, signal, registry.onMessage);
    case 'registry': return resolveRegistryImage(source, signal, registry);
    case 'oci-layout': return resolveOciLayout(source);
    case 'docker-archive': return resolveDockerArchive(source);
    case 'rootfs-tar': return resolveRootfsTar(source);
    default: return Promise.reject(new ImageSourceError(`unknown build source kind ${JSON.stringify((source as { kind?: unknown })?.kind)}`));
  }
}

/** A short human name for a source, for logs and the job's source_image_ref. */
export function describeSource(source: BuildSource): string {
  switch (source.kind) {
    case 'registry': return source.ref;
    case 'oci-layout': return `oci:${source.path}${source.ref ? `:${source.ref}` : ''}`;
    case 'docker-archive': return `docker-archive:${source.path}`;
    case 'rootfs-tar': return `rootfs-tar:${source.path}`;
    case 'debian-rootfs': return `debian-rootfs:${source.flavor}${source.recipe ? `@${source.recipe}` : ''}`;
  }
}
