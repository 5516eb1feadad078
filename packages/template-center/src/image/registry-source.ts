import type { BuildSource } from '@svc/contracts/template-center';
import { RegistryClient } from '../registry/registry-client.ts';
import { formatReference, parseReference } from '../registry/reference.ts';
import { RegistryError } from '../registry/registry-error.ts';
import { isFilesystemLayer, isIndex, isManifest, type ImageConfig } from './oci-types.ts';
import { formatPlatform, hostPlatform, selectPlatform } from './platform.ts';
import { imageInfo, ImageSourceError, type ResolvedImage } from './resolved-image.ts';

type RegistrySource = Extract<BuildSource, { kind: 'registry' }>;

/** Resolves a registry reference to its manifest for the wanted platform and its config. */
export async function resolveRegistryImage(src: RegistrySource, signal: AbortSignal): Promise<ResolvedImage> {
  let ref;
  try { ref = parseReference(src.ref); } catch (err) { throw new ImageSourceError((err as Error).message); }
  const want = src.platform ?? hostPlatform();
  const client = new RegistryClient(ref, { auth: src.auth, insecure: src.insecure, signal });
  const name = formatReference(ref);

  let fetched = await client.manifest(ref.digest ?? ref.tag!);
  if (isIndex(fetched.mediaType, fetched.doc)) {
    let chosen;
    try { chosen = selectPlatform(fetched.doc, want, name); } catch (err) { throw new ImageSourceError((err as Error).message); }
    fetched = await client.manifest(chosen.digest);
  }
  if (!isManifest(fetched.mediaType, fetched.doc)) {
    throw new RegistryError(`${name} is not an image (media type ${fetched.mediaType ?? 'unknown'})`);
  }
  const manifest = fetched.doc;
  const config = JSON.parse((await client.blobBytes(manifest.config.digest)).toString('utf8')) as ImageConfig;
  if (config.architecture && config.os && (config.architecture !== want.architecture || config.os !== want.os)) {
    throw new ImageSourceError(`${name} is a ${config.os}/${config.architecture} image; this build needs ${formatPlatform(want)}`);
  }
  for (const l of manifest.layers) {
    if (!isFilesystemLayer(l.mediaType)) throw new ImageSourceError(`${name} has a layer of unsupported type ${l.mediaType}`);
  }
  return {
    whiteouts: true,
    layers: manifest.layers.map((l) => ({
      digest: l.digest,
      size: l.size,
      label: l.digest,
      remote: true,
      open: (signal) => client.blobStream(l.digest, signal),
    })),
    info: imageInfo(config, {
      digest: fetched.digest,
      layers: manifest.layers.length,
      sizeBytes: manifest.layers.reduce((n, l) => n + (l.size ?? 0), 0),
    }),
  };
}
