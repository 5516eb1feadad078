import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ImageInfo } from '@svc/contracts/template-center';
import { baseRootfsPath, makeDebianTree, type BaseProgress, type RootfsFlavor } from './base-template.ts';
import { imageInfo } from './image/resolved-image.ts';
import { injectSandboxEssentials } from './rootfs/inject.ts';
import { measureTree } from './rootfs/measure.ts';
import { fitSizeMB, ImageTooSmallError, makeExt4 } from './rootfs/mkfs.ts';
import { whenMissing } from '@svc/common';

/**
 * Bump when what goes into the image besides the packages changes: injectSandboxEssentials
 * (rootfs/inject.ts) without a CA, or how the file system is made (rootfs/mkfs.ts).
 */
const IMAGE_RECIPE_VERSION = 1;

export interface DebianImage {
  /** The ext4 image: read it, copy it; never write it. */
  path: string;
  key: string;
  sizeBytes: number;
  imageInfo: ImageInfo;
  cached: boolean;
}

export interface DebianImageOptions {
  flavor: RootfsFlavor;
  cacheDir?: string;
  rebuild?: boolean;
  onProgress?: (p: BaseProgress) => void;
  signal?: AbortSignal;
}

const making = new Map<string, Promise<DebianImage>>();
const execFileAsync = promisify(execFile);

/** Where the image of the current recipe lives, built or not (its name carries the key of everything that shapes it). */
export function debianImagePath(flavor: RootfsFlavor, cacheDir = '/var/cache/svc'): { path: string; key: string } {
  const rootfs = baseRootfsPath({ flavor, cacheDir });
  const key = createHash('sha256').update(JSON.stringify({ rootfs: rootfs.key, image: IMAGE_RECIPE_VERSION })).digest('hex').slice(0, 16);
  return { path: join(cacheDir, `${flavor}-image-${rootfs.suite}-${key}.ext4`), key };
}

/**
 * The image svc's own templates start from (`debian_rootfs`, docs/templates.md): Debian's
 * packages made by mmdebstrap straight into a directory, the sandbox essentials added without an
 * egress CA, and an ext4 file system that fits, cached machine-wide beside the root filesystem
 * tarballs. Every data directory has its own egress CA; a build copies this image and writes its
 * CA into the copy (debian-build.ts), instead of unpacking 0.7 GB and making the file system again
 * (30 s of each `base` build on the 2-core machine, docs/benchmarks.md, "First start"). Two
 * callers in one process share one making; `svc prepare` makes it ahead of the first start.
 */
export async function ensureDebianImage(o: DebianImageOptions): Promise<DebianImage> {
  const cacheDir = o.cacheDir ?? '/var/cache/svc';
  const { path, key } = debianImagePath(o.flavor, cacheDir);
  const started = Date.now();
  if (!o.rebuild) {
    const found = await readCached(path, key);
    if (found) {
      o.onProgress?.({ phase: 'cached', message: path, elapsedMs: Date.now() - started });
      return found;
    }
  }
  const inflight = making.get(path);
  if (inflight) return inflight;
  const run = makeImage(o, cacheDir, path, key, started);
  making.set(path, run);
  try {
    return await run;
  } finally {
    making.delete(path);
  }
}

async function readCached(path: string, key: string): Promise<DebianImage | undefined> {
  const st = await stat(path).catch(whenMissing(undefined));
  if (!st?.isFile()) return undefined;
  const meta = await readFile(`${path}.json`, 'utf8').then((t) => JSON.parse(t) as { imageInfo: ImageInfo }, whenMissing(undefined));
  // An image without its description (a crash between the two renames) is made again.
  if (!meta) return undefined;
  return { path, key, sizeBytes: st.size, imageInfo: meta.imageInfo, cached: true };
}

async function makeImage(o: DebianImageOptions, cacheDir: string, path: string, key: string, started: number): Promise<DebianImage> {
  await mkdir(cacheDir, { recursive: true });
  const tmp = `${path}.tmp-${process.pid}-${Date.now()}`;
  const tree = `${tmp}.tree`;
  const progress = (phase: BaseProgress['phase'], message?: string) => o.onProgress?.({ phase, message, elapsedMs: Date.now() - started });
  try {
    await makeTree(o, cacheDir, tree, progress);
    await injectSandboxEssentials(tree, { signal: o.signal });
    const size = await measureTree(tree);
    progress('packing', 'making the ext4 image');
    const fit = fitSizeMB(size);
    // The estimate is generous; one larger try covers trees with unusual block usage, as a build's does.
    await makeExt4({ staging: tree, image: tmp, sizeMB: fit, tree: size, signal: o.signal }).catch((err) => {
      if (!(err instanceof ImageTooSmallError)) throw err;
      return makeExt4({ staging: tree, image: tmp, sizeMB: Math.ceil(fit * 1.5), tree: size, signal: o.signal });
    });
    const info = imageInfo(undefined, { layers: 1, sizeBytes: size.dataBytes });
    await writeFile(`${path}.json.tmp`, JSON.stringify({ imageInfo: info, flavor: o.flavor, madeAt: new Date().toISOString() }) + '\n');
    await rename(tmp, path);
    await rename(`${path}.json.tmp`, `${path}.json`);
    await removeStaleImages(cacheDir, o.flavor, path);
    progress('done', path);
    return { path, key, sizeBytes: (await stat(path)).size, imageInfo: info, cached: false };
  } finally {
    await rm(tree, { recursive: true, force: true, maxRetries: 3 }).catch(() => {
      // A making cut short can find mmdebstrap's children still writing into the tree (ENOTEMPTY):
      // the error that cut it is the one to report, and removeStaleImages takes the rest later.
    });
    await rm(tmp, { force: true });
    await rm(`${path}.json.tmp`, { force: true });
  }
}

/**
 * The flavor's tree: unpacked from the root filesystem tarball of the same recipe when one is
 * cached (an svc from before these images, or base-template.test.ts, made it: 20 s instead of
 * mmdebstrap's two minutes), else made by mmdebstrap straight into the directory.
 */
async function makeTree(o: DebianImageOptions, cacheDir: string, tree: string, progress: (phase: BaseProgress['phase'], message?: string) => void): Promise<void> {
  const tarball = baseRootfsPath({ flavor: o.flavor, cacheDir }).path;
  if (!o.rebuild && (await stat(tarball).catch(whenMissing(undefined)))?.isFile()) {
    progress('extracting', `unpacking ${tarball}`);
    await mkdir(tree);
    // Our own tarball, made by mmdebstrap as root: owners, modes and attributes as they are.
    await execFileAsync('tar', ['--extract', `--file=${tarball}`, '--numeric-owner', '--same-owner', '--same-permissions', '--xattrs', '--xattrs-include=*', '-C', tree], { signal: o.signal, maxBuffer: 16 * 1024 * 1024 });
    return;
  }
  await makeDebianTree(tree, { flavor: o.flavor, signal: o.signal, onProgress: (p) => progress(p.phase, p.message) });
}

/** Images of an older recipe of the same flavor, and the leftovers of a making that was killed an hour ago or more. */
async function removeStaleImages(dir: string, flavor: RootfsFlavor, keep: string): Promise<void> {
  const ours = new RegExp(`^${flavor}-image-.*\\.ext4`);
  for (const name of await readdir(dir).catch(whenMissing([] as string[]))) {
    const p = join(dir, name);
    if (!ours.test(name) || p === keep || p === `${keep}.json`) continue;
    const st = await stat(p).catch(whenMissing(undefined));
    if (st && (!name.includes('.tmp-') || Date.now() - st.mtimeMs > 3600_000)) await rm(p, { recursive: true, force: true });
  }
}
