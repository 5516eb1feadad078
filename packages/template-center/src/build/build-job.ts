import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { BuildRequest } from '@svc/contracts/template-center';
import { resolveSource } from '../image/resolve-source.ts';
import { shortDigest } from '../layers/layer-blob.ts';
import { ImageTooLargeError, UnpackBudget } from '../layers/unpack-budget.ts';
import { injectSandboxEssentials, withCaEnv } from '../rootfs/inject.ts';
import { stage } from './build-error.ts';
import type { BuildContext, BuildResult } from './build-context.ts';
import { buildDebianArtifact } from './debian-build.ts';
import { pullLayers } from './pull-layers.ts';
import { readCa, storeImage } from './store-image.ts';
import { unpackImage } from './unpack-image.ts';
import { writeRootfs } from './write-rootfs.ts';

export type { BuildContext, BuildResult };

/**
 * One build from source to stored artifact: PULLING (resolve the image, download registry layers
 * into the blob cache), BUILDING (apply the layers, sandbox essentials, mkfs.ext4, sha256),
 * UPLOADING (into the store). A `debian-rootfs` source takes its own path (debian-build.ts). Whatever happens, the staging tree and any partial image are
 * removed; an artifact stored by a build that was then aborted is deleted again.
 */
export async function buildArtifact(req: BuildRequest, ctx: BuildContext): Promise<BuildResult> {
  if (req.source.kind === 'debian-rootfs') return buildDebianArtifact(req, req.source, ctx);
  const { signal, progress } = ctx;
  await mkdir(ctx.workDir, { recursive: true, mode: 0o700 });
  const jobDir = await mkdtemp(join(ctx.workDir, `${req.jobId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 40)}-`));
  const staging = join(jobDir, 'rootfs');
  const imagePath = join(ctx.store.scratchDir, `${req.artifactId}.${process.pid}.${Date.now()}.ext4`);
  // The host's paths go to the log, never into the job's error, which the team reads.
  ctx.logger.debug({ jobId: req.jobId, jobDir, imagePath, blobCache: ctx.blobs.dir }, 'build started');
  const lease = ctx.blobs.lease();
  try {
    await mkdir(staging, { mode: 0o755 });

    const image = await stage('resolving the image', signal, () => resolveSource(req.source, signal, { mirrors: ctx.registryMirrors, hostRegistries: ctx.hostRegistries, logger: ctx.logger }));
    progress.setLayers(image.layers.map((l) => ({ digest: l.digest ?? l.diffId ?? l.label, totalBytes: l.size ?? 0 })));
    // The unpacked tree is held to the template's disk when it names one, and to the operator's
    // limit always; the layers' own sizes are checked before any is downloaded.
    const maxBytes = Math.min(ctx.maxImageBytes ?? Infinity, req.diskSizeMB > 0 ? req.diskSizeMB * 1_048_576 : Infinity);
    // The layers, then the copy of /etc/skel, are charged to one budget: bytes and entries.
    const budget = new UnpackBudget(maxBytes);
    const declared = image.layers.reduce((sum, l) => sum + (l.size ?? 0), 0);
    if (ctx.maxImageBytes !== undefined && declared > ctx.maxImageBytes) throw new ImageTooLargeError(`the image's layers take ${mib(declared)} MiB, more than template_center.max_image_mb (${mib(ctx.maxImageBytes)})`);
    const layerName = (i: number) => {
      const l = image.layers[i];
      return `layer ${i + 1}/${image.layers.length}${l.digest ? ` ${shortDigest(l.digest)}` : ''}`;
    };
    const layers = await pullLayers(image.layers, {
      cache: ctx.blobs, lease, signal, describe: layerName, maxBytes: ctx.maxImageBytes,
      onLayerStart: (i) => progress.setMessage(`downloading ${layerName(i)}`),
      onLayerBytes: (i, n) => progress.addLayerBytes(i, n),
      onLayerDone: (i, hit) => { if (hit) progress.markLayerCached(i); },
    });

    ctx.onPhase('BUILDING');
    let current = 0;
    await stage(() => `unpacking ${layerName(current)}`, signal, () => unpackImage({ ...image, layers }, staging, {
      signal, budget,
      onLayerStart: (i) => { current = i; progress.setMessage(`unpacking ${layerName(i)}`); },
      onLayerBytes: (i, n) => progress.addLayerBytes(i, n),
    }));

    const caPem = req.withSvcCa ? await readCa(ctx) : undefined;
    const injected = await stage('preparing the root filesystem', signal, () => injectSandboxEssentials(staging, { caPem, budget, signal }));
    ctx.logger.debug({ jobId: req.jobId, ...injected }, 'sandbox essentials injected');

    const sizeBytes = await stage('writing the root filesystem', signal, () => writeRootfs({ staging, imagePath, diskSizeMB: req.diskSizeMB, maxDiskSizeMB: ctx.maxDiskSizeMB, scratchDir: ctx.store.scratchDir, signal }));
    await rm(jobDir, { recursive: true, force: true }); // free the disk before the upload
    const artifact = await storeImage(req, ctx, imagePath, sizeBytes);
    return { artifact, imageInfo: injected.caInstalled && caPem ? { ...image.info, env: withCaEnv(image.info.env, caPem) } : image.info };
  } finally {
    await lease.release();
    await rm(jobDir, { recursive: true, force: true }).catch((err) => ctx.logger.warn({ err: err.message, jobDir }, 'cannot remove build directory'));
    await rm(imagePath, { force: true }).catch((err: Error) => ctx.logger.warn({ imagePath, err: err.message }, 'could not remove a build\'s image file'));
  }
}

const mib = (bytes: number) => Math.ceil(bytes / 1_048_576);
