import type { Logger } from '@svc/common';
import type { ArtifactStored, ImageInfo, JobPhase } from '@svc/contracts/template-center';
import type { BlobCache } from '../blobs/blob-cache.ts';
import type { ArtifactStore } from '../store/artifact-store.ts';
import type { ProgressReporter } from './progress-reporter.ts';

/** What one build works with: where it writes, what it reports to, when it must stop (build-job.ts, debian-build.ts). */
export interface BuildContext {
  store: ArtifactStore;
  /** Where staging trees are unpacked. */
  workDir: string;
  /** Where registry layers are downloaded to, and found again by later builds. */
  blobs: BlobCache;
  caCertPath?: string;
  /** Registries that serve Docker Hub's images, tried before Docker Hub. */
  registryMirrors?: string[];
  /** template_center.host_registries (registry-source.ts). */
  hostRegistries?: string[];
  /** template_center.max_image_mb in bytes: an image's layers past it, downloaded or unpacked, fail the build (absent: none). */
  maxImageBytes?: number;
  /** svclet_conf.max_disk_size_mb: an image sized to fit its tree is held to it (absent: none). */
  maxDiskSizeMB?: number;
  /** Where the images of `debian-rootfs` sources are cached (debian-image.ts; default /var/cache/svc). */
  debianImageDir?: string;
  logger: Logger;
  progress: ProgressReporter;
  signal: AbortSignal;
  onPhase: (phase: JobPhase) => void;
}

export interface BuildResult {
  artifact: ArtifactStored;
  imageInfo: ImageInfo;
}
