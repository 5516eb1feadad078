import { createReadStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import type { BuildSource } from '@svc/contracts/template-center';
import type { ImageConfig } from './oci-types.ts';
import { imageInfo, ImageSourceError, type ResolvedImage } from './resolved-image.ts';
import { indexTar, resolveMember, type TarMember } from './tar-index.ts';

type DockerArchiveSource = Extract<BuildSource, { kind: 'docker-archive' }>;

interface ArchiveManifestEntry { Config: string; RepoTags?: string[] | null; Layers: string[] }

/**
 * Resolves a `docker save` tarball (the classic layout and the OCI-flavoured one of Docker 25+,
 * both described by manifest.json). Layers stream straight out of the archive; each is checked
 * against its diff id from the image config. An archive of several images builds the first.
 */
export async function resolveDockerArchive(src: DockerArchiveSource): Promise<ResolvedImage> {
  const archive = src.path;
  await stat(archive).catch(() => { throw new ImageSourceError(`docker archive ${archive} does not exist`); });
  let members: Map<string, TarMember>;
  try { members = await indexTar(archive); } catch (err) { throw new ImageSourceError(`docker archive ${archive}: ${(err as Error).message}`); }

  const manifestList = JSON.parse((await readMember(archive, members, 'manifest.json')).toString('utf8')) as ArchiveManifestEntry[];
  const entry = manifestList?.[0];
  if (!entry?.Config || !Array.isArray(entry.Layers)) throw new ImageSourceError(`docker archive ${archive}: manifest.json lists no image`);
  const config = JSON.parse((await readMember(archive, members, entry.Config)).toString('utf8')) as ImageConfig;
  const diffIds = config.rootfs?.diff_ids ?? [];
  if (diffIds.length !== entry.Layers.length) {
    throw new ImageSourceError(`docker archive ${archive}: ${entry.Layers.length} layers but the config lists ${diffIds.length} diff ids`);
  }
  const layers = entry.Layers.map((name, i) => {
    const m = resolveMember(members, name);
    if (!m) throw new ImageSourceError(`docker archive ${archive}: layer ${name} is missing`);
    const blobDigest = /(?:^|\/)blobs\/sha256\/([a-f0-9]{64})$/.exec(m.name);
    return {
      digest: blobDigest ? `sha256:${blobDigest[1]}` : undefined,
      size: m.size,
      diffId: diffIds[i],
      label: diffIds[i],
      open: async () => createReadStream(archive, { start: m.offset, end: m.offset + m.size - 1, highWaterMark: 1024 * 1024 }),
    };
  });
  return {
    whiteouts: true,
    layers,
    info: imageInfo(config, { layers: layers.length, sizeBytes: layers.reduce((n, l) => n + l.size, 0) }),
  };
}

async function readMember(archive: string, members: Map<string, TarMember>, name: string): Promise<Buffer> {
  const m = resolveMember(members, name);
  if (!m) throw new ImageSourceError(`docker archive ${archive} has no ${name} (is it a \`docker save\` tarball?)`);
  if (m.size > 16 * 1024 * 1024) throw new ImageSourceError(`docker archive ${archive}: ${name} is too large`);
  const fh = await open(archive, 'r');
  try {
    const buf = Buffer.alloc(m.size);
    await fh.read(buf, 0, m.size, m.offset);
    return buf;
  } finally {
    await fh.close();
  }
}
