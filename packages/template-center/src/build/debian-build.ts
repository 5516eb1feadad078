import { spawnSync } from 'node:child_process';
import { chmod, copyFile, mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { BuildRequest, ImageInfo } from '@svc/contracts/template-center';
import { baseRootfsPath } from '../base-template.ts';
import { ensureDebianImage } from '../debian-image.ts';
import { ImageSourceError } from '../image/resolved-image.ts';
import { injectSandboxEssentials, withCaEnv } from '../rootfs/inject.ts';
import { ImageTooSmallError } from '../rootfs/mkfs.ts';
import { stage } from './build-error.ts';
import type { BuildContext, BuildResult } from './build-context.ts';
import { readCa, storeImage } from './store-image.ts';

type DebianSource = Extract<BuildRequest['source'], { kind: 'debian-rootfs' }>;

/**
 * A build of a `debian_rootfs` source (svc up's own templates, docs/templates.md): PULLING makes
 * or finds the machine-wide image of the flavor (debian-image.ts: mmdebstrap, the sandbox
 * essentials, ext4), BUILDING copies it, grows or shrinks the copy to the asked disk size, and
 * writes this template center's egress CA into it through a loop mount (the same
 * injectSandboxEssentials as every build: what it already holds stays), then hashes and stores
 * it. Like every build this runs as root (mmdebstrap --mode=root needs it too).
 */
export async function buildDebianArtifact(req: BuildRequest, src: DebianSource, ctx: BuildContext): Promise<BuildResult> {
  const { signal, progress } = ctx;
  const want = baseRootfsPath({ flavor: src.flavor });
  if (src.recipe && src.recipe !== want.key) {
    throw new ImageSourceError(`debian-rootfs ${src.flavor}@${src.recipe}: this template center makes recipe ${want.key} of ${src.flavor}; ask for that one`);
  }
  const made = await stage(`making the ${src.flavor} image from Debian's packages`, signal, () => ensureDebianImage({
    flavor: src.flavor, signal, cacheDir: ctx.debianImageDir,
    onProgress: (p) => progress.setMessage(`${src.flavor} from Debian's packages: ${p.phase}${p.message && p.phase !== 'cached' && p.phase !== 'done' ? ` (${p.message.slice(0, 120)})` : ''}`),
  }));

  ctx.onPhase('BUILDING');
  await mkdir(ctx.store.scratchDir, { recursive: true, mode: 0o700 });
  const imagePath = join(ctx.store.scratchDir, `${req.artifactId}.${process.pid}.${Date.now()}.ext4`);
  try {
    progress.setMessage(`copying the ${src.flavor} image`);
    await stage('copying the image', signal, async () => {
      await copyFile(made.path, imagePath);
      await chmod(imagePath, 0o600); // the copy has the cached image's mode; scratch files are 0600 (mkfs.ts)
    });
    if (req.diskSizeMB > 0) await stage('resizing the image', signal, async () => resize(imagePath, req.diskSizeMB));
    const caPem = req.withSvcCa ? await readCa(ctx) : undefined;
    let info: ImageInfo = made.imageInfo;
    if (caPem) {
      progress.setMessage('writing the egress CA into the image');
      await stage('writing the egress CA into the image', signal, () => withMounted(imagePath, ctx.workDir, async (root) => {
        if ((await injectSandboxEssentials(root, { caPem, signal })).caInstalled) info = { ...info, env: withCaEnv(info.env, caPem) };
      }));
    }
    const artifact = await storeImage(req, ctx, imagePath, (await stat(imagePath)).size);
    return { artifact, imageInfo: info };
  } finally {
    await rm(imagePath, { force: true }).catch((err: Error) => ctx.logger.warn({ imagePath, err: err.message }, 'could not remove a build\'s image file'));
  }
}

/** resize2fs to exactly `sizeMB` (a fresh copy, so the check before it is quick); too small is the build's own error. */
function resize(image: string, sizeMB: number): void {
  const check = spawnSync('e2fsck', ['-f', '-p', image], { encoding: 'utf8' });
  if (check.status !== 0 && check.status !== 1) throw new Error(`e2fsck of the copied image failed: ${withoutPath(`${check.stdout}${check.stderr}`, image, '<image>')}`.trim());
  const r = spawnSync('resize2fs', [image, `${sizeMB}M`], { encoding: 'utf8' });
  if (r.status === 0) return;
  const out = `${r.stdout}${r.stderr}`;
  if (/No space left|New size smaller than minimum|too small/i.test(out)) throw new ImageTooSmallError(`the root filesystem does not fit in diskSizeMB ${sizeMB}`);
  throw new Error(`resize2fs failed: ${withoutPath(out, image, '<image>').trim().split('\n').pop()}`);
}

/** A tool's words with a host path of the build's replaced: they reach the team, the path does not (the log has it). */
function withoutPath(text: string, path: string, name: string): string {
  return text.split(path).join(name);
}

/** Runs `fn` on the image mounted read-write at a directory of its own, unmounted whatever happens. */
async function withMounted(image: string, workDir: string, fn: (root: string) => Promise<void>): Promise<void> {
  await mkdir(workDir, { recursive: true });
  const dir = await mkdtemp(join(workDir, 'ca-'));
  try {
    const m = spawnSync('mount', ['-t', 'ext4', '-o', 'loop', image, dir], { encoding: 'utf8' });
    if (m.status !== 0) throw new Error(`mounting the image to write the CA failed (the template center runs as root): ${withoutPath(withoutPath(m.stderr || m.error?.message || '', dir, '<mount point>'), image, '<image>').trim()}`);
    try {
      await fn(dir);
    } finally {
      const u = spawnSync('umount', [dir], { encoding: 'utf8' });
      // Busy for a moment after the writes: detached now, released by the kernel when idle.
      if (u.status !== 0) spawnSync('umount', ['-l', dir]);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
