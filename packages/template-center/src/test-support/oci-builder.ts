import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { pack, type Header } from 'tar-stream';

/** Builds OCI image layouts for tests, layer by layer, from lists of tar entries. */
export interface TestEntry {
  name: string;
  type?: Header['type'];
  content?: string | Buffer;
  mode?: number;
  uid?: number;
  gid?: number;
  linkname?: string;
  mtime?: Date;
  devmajor?: number;
  devminor?: number;
}

export type Compression = 'gzip' | 'zstd' | 'none';

export interface LayerSpec {
  entries: TestEntry[];
  compression?: Compression;
}

export interface ImageSpec {
  layers: LayerSpec[];
  platform?: { os: string; architecture: string; variant?: string };
  config?: { Env?: string[]; Cmd?: string[]; WorkingDir?: string; User?: string; Entrypoint?: string[] };
}

export interface Blob { digest: string; size: number; mediaType: string }

const MT = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: { gzip: 'application/vnd.oci.image.layer.v1.tar+gzip', zstd: 'application/vnd.oci.image.layer.v1.tar+zstd', none: 'application/vnd.oci.image.layer.v1.tar' },
};

export async function tarOf(entries: TestEntry[]): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  const done = new Promise<Buffer>((resolve, reject) => {
    p.on('data', (c: unknown) => { chunks.push(c as Buffer); });
    p.on('end', () => resolve(Buffer.concat(chunks)));
    p.on('error', reject);
  });
  for (const e of entries) {
    const type = e.type ?? (e.name.endsWith('/') ? 'directory' : 'file');
    const content = e.content === undefined ? undefined : Buffer.from(e.content);
    const header: Header = {
      name: e.name, type, mode: e.mode ?? (type === 'directory' ? 0o755 : 0o644), uid: e.uid ?? 0, gid: e.gid ?? 0,
      mtime: e.mtime ?? new Date('2024-01-02T03:04:05Z'), linkname: e.linkname ?? '', size: content?.length ?? 0,
      uname: '', gname: '', devmajor: e.devmajor ?? 0, devminor: e.devminor ?? 0,
    };
    await new Promise<void>((resolve, reject) => {
      p.entry(header, content ?? Buffer.alloc(0), (err) => (err ? reject(err) : resolve()));
    });
  }
  p.finalize();
  return done;
}

/** The smallest root filesystem a rootfs-tar build accepts (a shell and /etc/passwd), written to `path`. */
export async function writeMinimalRootfsTar(path: string): Promise<void> {
  await writeFile(path, await tarOf([
    { name: './', type: 'directory' },
    { name: './bin/', type: 'directory' },
    { name: './bin/sh', content: '#!fake', mode: 0o755 },
    { name: './etc/', type: 'directory' },
    { name: './etc/passwd', content: 'root:x:0:0:root:/root:/bin/sh\n' },
  ]));
}

export function compress(data: Buffer, c: Compression): Buffer {
  if (c === 'gzip') return gzipSync(data);
  if (c === 'zstd') {
    const r = spawnSync('zstd', ['-q', '-c', '-3'], { input: data, maxBuffer: 1 << 30 });
    if (r.status !== 0) throw new Error(`zstd: ${r.stderr}`);
    return r.stdout;
  }
  return data;
}

export const sha256 = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

export class OciLayoutWriter {
  private readonly manifests: Array<Blob & { annotations?: Record<string, string>; platform?: ImageSpec['platform'] }> = [];
  constructor(readonly dir: string) {}

  async blob(data: Buffer, mediaType: string): Promise<Blob> {
    const digest = sha256(data);
    await mkdir(join(this.dir, 'blobs', 'sha256'), { recursive: true });
    await writeFile(join(this.dir, 'blobs', 'sha256', digest.slice(7)), data);
    return { digest, size: data.length, mediaType };
  }

  async image(spec: ImageSpec): Promise<Blob & { layers: Blob[]; diffIds: string[] }> {
    const layers: Blob[] = [];
    const diffIds: string[] = [];
    for (const l of spec.layers) {
      const tar = await tarOf(l.entries);
      diffIds.push(sha256(tar));
      const c = l.compression ?? 'gzip';
      layers.push(await this.blob(compress(tar, c), MT.layer[c]));
    }
    const platform = spec.platform ?? { os: 'linux', architecture: 'amd64' };
    const config = {
      architecture: platform.architecture, os: platform.os, ...(platform.variant ? { variant: platform.variant } : {}),
      config: spec.config ?? { Env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'], Cmd: ['/bin/sh'] },
      rootfs: { type: 'layers', diff_ids: diffIds },
      history: [],
    };
    const configBlob = await this.blob(Buffer.from(JSON.stringify(config)), MT.config);
    const manifest = { schemaVersion: 2, mediaType: MT.manifest, config: configBlob, layers };
    const m = await this.blob(Buffer.from(JSON.stringify(manifest)), MT.manifest);
    return { ...m, layers, diffIds };
  }

  async tag(spec: ImageSpec, tag: string) {
    const m = await this.image(spec);
    this.manifests.push({ ...m, annotations: { 'org.opencontainers.image.ref.name': tag } });
    return m;
  }

  async tagIndex(specs: ImageSpec[], tag: string) {
    const entries = [];
    for (const s of specs) {
      const m = await this.image(s);
      entries.push({ mediaType: MT.manifest, digest: m.digest, size: m.size, platform: s.platform ?? { os: 'linux', architecture: 'amd64' } });
    }
    const index = await this.blob(Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MT.index, manifests: entries })), MT.index);
    this.manifests.push({ ...index, annotations: { 'org.opencontainers.image.ref.name': tag } });
    return index;
  }

  async write(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    await writeFile(join(this.dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    await writeFile(join(this.dir, 'index.json'), JSON.stringify({
      schemaVersion: 2, mediaType: MT.index,
      manifests: this.manifests.map(({ mediaType, digest, size, annotations }) => ({ mediaType, digest, size, annotations })),
    }));
  }
}
