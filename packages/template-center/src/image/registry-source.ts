import { createHash } from 'node:crypto';
import type { BuildSource } from '@svc/contracts/template-center';
import { listedRegistry, registryRefusal, type ResolveHost } from '../registry/hop-guard.ts';
import { RegistryClient } from '../registry/registry-client.ts';
import type { Logger } from '@svc/common';
import { DOCKER_HUB, formatReference, parseReference, type ImageReference } from '../registry/reference.ts';
import { RegistryError } from '../registry/registry-error.ts';
import { isBlobSize } from '../layers/layer-blob.ts';
import { isFilesystemLayer, isIndex, isManifest, type Descriptor, type ImageConfig } from './oci-types.ts';
import { formatPlatform, hostPlatform, selectPlatform } from './platform.ts';
import { imageInfo, ImageSourceError, type ResolvedImage } from './resolved-image.ts';

type RegistrySource = Extract<BuildSource, { kind: 'registry' }>;

export interface RegistryOptions {
  /**
   * Registries that serve Docker Hub's images (Docker's `registry-mirrors`): URLs such as
   * http://mirror.internal:5000, tried in order for docker.io references, Docker Hub last.
   */
  mirrors?: string[];
  /**
   * template_center.host_registries: the registries on this host builds may pull from, as images
   * name them (`localhost:5000`), `*` for any; every other registry on the host is refused.
   */
  hostRegistries?: readonly string[];
  logger?: Logger;
  /** A host's addresses (tests give their own); default: the system's resolver. */
  resolveHost?: ResolveHost;
}

/**
 * Resolves a registry reference to its manifest for the wanted platform and its config. A Docker
 * Hub reference is looked for on each mirror first (without the credentials, which are Docker
 * Hub's), then on Docker Hub; the first that has it serves every layer.
 */
export async function resolveRegistryImage(src: RegistrySource, signal: AbortSignal, opts: RegistryOptions = {}): Promise<ResolvedImage> {
  let ref: ImageReference;
  try { ref = parseReference(src.ref); } catch (err) { throw new ImageSourceError((err as Error).message); }
  const mirrors = ref.registry === DOCKER_HUB ? (opts.mirrors ?? []) : [];
  const tried: string[] = [];
  for (const mirror of mirrors) {
    const m = mirrorAddress(mirror);
    try {
      // A mirror is the operator's own, as a listed registry is: it may be on the host.
      return await resolveFrom({ ...ref, registry: m.host }, src, signal, { insecure: m.insecure, trusted: true });
    } catch (err) {
      if (signal.aborted) throw err;
      tried.push(`${mirror}: ${(err as Error).message}`);
      opts.logger?.warn({ mirror, ref: src.ref, err: (err as Error).message }, 'registry mirror does not serve the image; trying the next');
    }
  }
  const trusted = listedRegistry(ref.registry, opts.hostRegistries ?? []);
  const refusal = trusted ? undefined : await registryRefusal(ref.registry, opts.resolveHost);
  if (refusal) throw new RegistryError(refusal, 403);
  try {
    return await resolveFrom(ref, src, signal, { auth: src.auth, insecure: src.insecure, trusted });
  } catch (err) {
    if (!tried.length || !(err instanceof Error)) throw err;
    err.message = `${err.message} (mirrors tried first: ${tried.join('; ')})`;
    throw err;
  }
}

/**
 * The blob cache's scope of layers pulled with credentials (BlobRequest.scope): the registry and
 * the login, hashed, so that only a pull that could fetch the layer itself is handed the cached
 * copy. The secret never reaches the disk: the key is a digest of a digest.
 */
function credentialScope(registry: string, auth: NonNullable<RegistrySource['auth']>): string {
  return createHash('sha256').update(JSON.stringify([registry.toLowerCase(), auth.username, auth.password])).digest('hex');
}

/** A mirror's host[:port] and scheme; a bare host is HTTPS (plain HTTP on loopback, as always). */
function mirrorAddress(mirror: string): { host: string; insecure?: boolean } {
  const m = /^(https?):\/\/([^/]+)\/?$/.exec(mirror.trim());
  if (m) return { host: m[2], insecure: m[1] === 'http' };
  return { host: mirror.trim().replace(/\/+$/, '') };
}

async function resolveFrom(ref: ImageReference, src: RegistrySource, signal: AbortSignal, access: { auth?: RegistrySource['auth']; insecure?: boolean; trusted: boolean }): Promise<ResolvedImage> {
  const want = src.platform ?? hostPlatform();
  const client = new RegistryClient(ref, { auth: access.auth, insecure: access.insecure, trusted: access.trusted, signal });
  const name = formatReference(ref);
  const cacheScope = access.auth ? credentialScope(ref.registry, access.auth) : undefined;

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
  if (!Array.isArray(manifest.layers)) throw new RegistryError(`${name} has a manifest without a list of layers`);
  const configSize = descriptorSize(manifest.config, 'config', name);
  const layerSizes = manifest.layers.map((l) => descriptorSize(l, 'layer', name));
  const config = JSON.parse((await client.blobBytes(manifest.config.digest, configSize)).toString('utf8')) as ImageConfig;
  if (config.architecture && config.os && (config.architecture !== want.architecture || config.os !== want.os)) {
    throw new ImageSourceError(`${name} is a ${config.os}/${config.architecture} image; this build needs ${formatPlatform(want)}`);
  }
  for (const l of manifest.layers) {
    if (!isFilesystemLayer(l.mediaType)) throw new ImageSourceError(`${name} has a layer of unsupported type ${l.mediaType}`);
  }
  return {
    whiteouts: true,
    layers: manifest.layers.map((l, i) => ({
      digest: l.digest,
      size: layerSizes[i],
      label: l.digest,
      remote: true,
      ...(cacheScope === undefined ? {} : { cacheScope }),
      open: (signal) => client.blobStream(l.digest, signal),
    })),
    info: imageInfo(config, {
      digest: fetched.digest,
      layers: manifest.layers.length,
      sizeBytes: layerSizes.reduce((n, size) => n + size, 0),
    }),
  };
}

/**
 * A descriptor's size, which its download is held to: a registry's manifest whose layer had no
 * size (or a negative, fractional or string one) had the layer downloaded without any limit
 * (found by a helper reading the template center as an attacker). The OCI spec requires it.
 */
function descriptorSize(d: Descriptor, what: 'config' | 'layer', name: string): number {
  if (isBlobSize(d?.size)) return d.size;
  const digest = typeof d?.digest === 'string' ? d.digest.slice(0, 140) : JSON.stringify(d?.digest ?? null);
  throw new ImageSourceError(`${name}: the ${what} ${digest} has no valid size in its manifest (${JSON.stringify(d?.size ?? null)?.slice(0, 40)}); its download could not be held to one`);
}
