/** The parts of the OCI image and Docker v2 schema2 formats a build needs. */
export const MediaTypes = {
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  dockerList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerSchema1: 'application/vnd.docker.distribution.manifest.v1+json',
  dockerSchema1Signed: 'application/vnd.docker.distribution.manifest.v1+prettyjws',
} as const;

export const MANIFEST_ACCEPT = [MediaTypes.ociIndex, MediaTypes.dockerList, MediaTypes.ociManifest, MediaTypes.dockerManifest].join(', ');

export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
}

export interface Descriptor {
  mediaType?: string;
  digest: string;
  size: number;
  platform?: Platform;
  annotations?: Record<string, string>;
  urls?: string[];
}

export interface ImageIndex {
  schemaVersion: number;
  mediaType?: string;
  manifests: Descriptor[];
}

export interface ImageManifest {
  schemaVersion: number;
  mediaType?: string;
  config: Descriptor;
  layers: Descriptor[];
}

export interface ImageConfig {
  os?: string;
  architecture?: string;
  variant?: string;
  config?: {
    Env?: string[];
    WorkingDir?: string;
    User?: string;
    Entrypoint?: string[] | null;
    Cmd?: string[] | null;
  };
  rootfs?: { type: string; diff_ids: string[] };
}

export function isIndex(mediaType: string | undefined, doc: unknown): doc is ImageIndex {
  if (mediaType === MediaTypes.ociIndex || mediaType === MediaTypes.dockerList) return true;
  return !mediaType && Array.isArray((doc as ImageIndex)?.manifests);
}

export function isManifest(mediaType: string | undefined, doc: unknown): doc is ImageManifest {
  if (mediaType === MediaTypes.ociManifest || mediaType === MediaTypes.dockerManifest) return true;
  return !mediaType && typeof (doc as ImageManifest)?.config === 'object' && Array.isArray((doc as ImageManifest)?.layers);
}

/** Layer media types that are not filesystem changesets (e.g. attached artifacts) are refused. */
export function isFilesystemLayer(mediaType: string | undefined): boolean {
  if (!mediaType) return true;
  return /^application\/vnd\.(oci\.image\.layer\.(nondistributable\.)?v1\.tar|docker\.image\.rootfs\.(foreign\.)?diff\.tar)/.test(mediaType);
}
