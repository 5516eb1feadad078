import { spawn } from 'node:child_process';
import { open, rm } from 'node:fs/promises';
import type { TreeSize } from './measure.ts';

const ROOTFS_LABEL = 'svc-rootfs';
const MiB = 1024 * 1024;

export class NoSpaceError extends Error {}
export class ImageTooSmallError extends Error {}

/**
 * Size of an image that holds `tree` with room to spare: data plus ~10 %, inode tables, the
 * journal and a fixed headroom. Sandboxes write to their own overlay, so the headroom only has
 * to absorb ext4's own bookkeeping, not user data.
 */
export function fitSizeMB(tree: TreeSize): number {
  const inodeBytes = inodeCount(tree) * 256;
  const journal = tree.dataBytes > 1024 * MiB ? 64 * MiB : 16 * MiB;
  return Math.ceil((tree.dataBytes * 1.1 + inodeBytes + journal + 32 * MiB) / MiB);
}

const inodeCount = (tree: TreeSize) => Math.ceil(tree.inodes * 1.2) + 4096;

export interface MkfsOptions {
  staging: string;
  image: string;
  sizeMB: number;
  tree: TreeSize;
  signal?: AbortSignal;
}

/** mkfs.ext4 -d: the staging tree becomes the file system, ownership, modes and links included. */
export async function makeExt4(o: MkfsOptions): Promise<void> {
  // 0600: with an S3 store the scratch directory is no store directory of its own; the image is
  // a team's until it is uploaded.
  const fh = await open(o.image, 'w', 0o600);
  try {
    await fh.truncate(o.sizeMB * MiB); // sparse: only written blocks take space
  } finally {
    await fh.close();
  }
  const args = ['-q', '-F', '-t', 'ext4', '-L', ROOTFS_LABEL, '-m', '0', '-N', String(inodeCount(o.tree)),
    '-E', 'lazy_itable_init=0,lazy_journal_init=0', '-d', o.staging, o.image];
  const result = await run('mkfs.ext4', args, o.signal);
  if (result.code === 0) return;
  const { code } = result;
  // mkfs names the image and the staging tree by their host paths; its words reach the team.
  const output = result.output.split(o.image).join('<image>').split(o.staging).join('<rootfs>');
  await rm(o.image, { force: true });
  if (/No space left on device/i.test(output)) throw new NoSpaceError(`no space left on device while writing the root filesystem (${o.sizeMB} MB image)`);
  if (/Could not allocate block|No free space|too many|inode table|Could not allocate inode/i.test(output)) {
    throw new ImageTooSmallError(`the root filesystem does not fit in ${o.sizeMB} MB: ${lastLine(output)}`);
  }
  throw new Error(`mkfs.ext4 failed: ${lastLine(output) || `exit ${code}`}`);
}

function run(cmd: string, args: string[], signal?: AbortSignal): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], signal });
    let output = '';
    const take = (d: Buffer) => { if (output.length < 8000) output += d.toString(); };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, output }));
  });
}

function lastLine(s: string): string {
  return s.trim().split('\n').filter(Boolean).pop() ?? '';
}
