import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { BuildSource } from '@svc/contracts/template-center';
import { isFilesystemLayer, isIndex, isManifest, type Descriptor, type ImageConfig, type ImageIndex } from './oci-types.ts';
import { hostPlatform, selectPlatform } from './platform.ts';
import { imageInfo, ImageSourceError, type ResolvedImage } from './resolved-image.ts';

type OciLayoutSource = Extract<BuildSource, { kind: 'oci-layout' }>;

const REF_NAME = 'org.opencontainers.image.ref.name';
const DIGEST_RE = /^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$/;

/** Resolves an OCI image layout directory (index.json; a tag chosen by ref.name annotation). */
export async function resolveOciLayout(src: OciLayoutSource): Promise<ResolvedImage> {
  const dir = src.path;
  const layoutFile = await readJson<{ imageLayoutVersion?: string }>(join(dir, 'oci-layout'), `${dir} is not an OCI image layout (no oci-layout file)`);
  if (!layoutFile.imageLayoutVersion?.startsWith('1.')) throw new ImageSourceError(`${dir}: unsupported OCI layout version ${layoutFile.imageLayoutVersion}`);
  const index = await readJson<ImageIndex>(join(dir, 'index.json'), `${dir}: cannot read index.json`);
  const want = src.platform ?? hostPlatform();

  const top = pickFromIndex(index, src.ref, dir);
  let desc: Descriptor | undefined = 'manifests' in top ? undefined : top;
  let doc: unknown = desc ? parseBlob(await readBlob(dir, desc)) : top;
  const mediaTypeOf = () => desc?.mediaType ?? (doc as { mediaType?: string }).mediaType;
  for (let depth = 0; isIndex(mediaTypeOf(), doc); depth++) {
    if (depth > 4) throw new ImageSourceError(`${dir}: indexes nested too deep`);
    try { desc = selectPlatform(doc, want, `OCI layout ${dir}`); } catch (err) { throw new ImageSourceError((err as Error).message); }
    doc = parseBlob(await readBlob(dir, desc));
  }
  if (!desc || !isManifest(mediaTypeOf(), doc)) {
    throw new ImageSourceError(`${dir}: ${desc?.digest ?? 'index.json'} is not an image manifest`);
  }
  const manifest = doc;
  const config = parseBlob(await readBlob(dir, manifest.config)) as ImageConfig;
  for (const l of manifest.layers) {
    if (!isFilesystemLayer(l.mediaType)) throw new ImageSourceError(`${dir}: layer of unsupported type ${l.mediaType}`);
  }
  return {
    whiteouts: true,
    layers: manifest.layers.map((l) => ({
      digest: l.digest,
      size: l.size,
      label: l.digest,
      open: async () => {
        const path = blobPath(dir, l.digest);
        await stat(path).catch(() => { throw new ImageSourceError(`${dir}: layer blob ${l.digest} is missing`); });
        return createReadStream(path, { highWaterMark: 1024 * 1024 });
      },
    })),
    info: imageInfo(config, {
      digest: desc.digest,
      layers: manifest.layers.length,
      sizeBytes: manifest.layers.reduce((n, l) => n + (l.size ?? 0), 0),
    }),
  };
}

/** The descriptor named by `ref`, the only one, or index.json itself when it lists platforms. */
function pickFromIndex(index: ImageIndex, ref: string | undefined, dir: string): Descriptor | ImageIndex {
  const manifests = index.manifests ?? [];
  if (manifests.length === 0) throw new ImageSourceError(`${dir}: index.json lists no images`);
  const names = manifests.map((m) => m.annotations?.[REF_NAME]).filter((n): n is string => !!n);
  if (ref) {
    const hit = manifests.find((m) => m.annotations?.[REF_NAME] === ref);
    if (!hit) throw new ImageSourceError(`tag '${ref}' not found in OCI layout ${dir} (tags: ${names.join(', ') || 'none'})`);
    return hit;
  }
  if (manifests.length === 1) return manifests[0];
  // Several entries without names are the platforms of one image: treat index.json as that index.
  if (names.length === 0) return index;
  throw new ImageSourceError(`OCI layout ${dir} holds several images (tags: ${names.join(', ')}); choose one with ref`);
}

function parseBlob(data: Buffer): unknown {
  try { return JSON.parse(data.toString('utf8')); } catch { throw new ImageSourceError('OCI layout blob is not valid JSON'); }
}

async function readBlob(dir: string, d: Descriptor): Promise<Buffer> {
  const path = blobPath(dir, d.digest);
  const data = await readFile(path).catch(() => { throw new ImageSourceError(`${dir}: blob ${d.digest} is missing`); });
  const [algo] = d.digest.split(':');
  const got = `${algo}:${createHash(algo).update(data).digest('hex')}`;
  if (got !== d.digest) throw new ImageSourceError(`${dir}: blob ${d.digest} digest mismatch: content hashes to ${got}`);
  return data;
}

function blobPath(dir: string, digest: string): string {
  if (!DIGEST_RE.test(digest)) throw new ImageSourceError(`${dir}: invalid digest ${JSON.stringify(digest)}`);
  const [algo, hex] = digest.split(':');
  return join(dir, 'blobs', algo, hex);
}

async function readJson<T>(path: string, problem: string): Promise<T> {
  let text: string;
  try { text = await readFile(path, 'utf8'); } catch { throw new ImageSourceError(problem); }
  try { return JSON.parse(text) as T; } catch { throw new ImageSourceError(`${path} is not valid JSON`); }
}
