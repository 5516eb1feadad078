import { existsSync, lstatSync, statfsSync, statSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { run } from '../host/exec.ts';
import { isMountPoint, unmount } from '../host/mounts.ts';

/**
 * tar of an overlay upper directory: numeric owners, and the extended attributes that make it a
 * layer (trusted.overlay.opaque on a directory that hides the template's) besides the files' own;
 * whiteouts are character devices 0/0, which tar keeps as they are. Overlay's origin and impure
 * markers name the template's inodes on this mount and are left out. Both drivers write and read
 * layers with it, so a layer captured on one boots on the other.
 */
/**
 * How the host mounts a layer's image. A microvm guest writes its image raw (/dev/vdb), so after
 * a pause the host mounts a filesystem whose every entry guest root chose: with `upper` or
 * `boot/volumes` a symbolic link to a host path, the host wrote its boot files into /etc and
 * tarred a host directory into a snapshot (found by a helper reading the node agent as an
 * attacker, 2026-11-30). nosymfollow (Linux 5.10) makes every path through the mount refuse a
 * link; nosuid and nodev, what it holds grants nothing. Paths through the overlay above it are
 * the overlay mount's, which follows links as the sandbox's own filesystem must.
 */
export const LAYER_MOUNT_OPTIONS = 'loop,nodev,nosuid,nosymfollow';

/** Refuses a layer whose upper or work directory, or a boot directory, is anything but a directory (see LAYER_MOUNT_OPTIONS). */
export function assertLayerDirs(layer: { upper: string; work: string; mountDir: string }): void {
  for (const [path, needed] of [[layer.upper, true], [layer.work, true], [join(layer.mountDir, 'boot'), false]] as const) {
    let st;
    try { st = lstatSync(path); } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' && !needed) continue;
      throw new Error(`the sandbox's layer has no ${path}: ${(err as Error).message}`);
    }
    if (!st.isDirectory()) throw new Error(`the sandbox's layer holds ${path} as something other than a directory (the guest wrote it): refused`);
  }
}

/** What a failed extraction of a captured layer tells the team (sandboxes/public-reason.ts). */
export const RESTORE_FILES = 'restoring the snapshot\'s filesystem';

export const LAYER_TAR_FLAGS = ['--numeric-owner', '--xattrs', '--xattrs-include=*', '--xattrs-exclude=trusted.overlay.origin', '--xattrs-exclude=trusted.overlay.impure'];

/**
 * A sandbox's writable layer, capped at its disk size: a sparse file holding a fresh ext4,
 * loop-mounted, with the overlay's upper and work directories inside. Writing past the cap
 * fails with ENOSPC in the sandbox, and `df /` there shows the cap (overlayfs reports its
 * upper filesystem). The loop device is set to clear itself on unmount, so unmounting is
 * all a teardown (or a sweep after a crash) has to do. Costs ~45 ms (mkfs) + ~45 ms (mount).
 */
export class DiskLayer {
  readonly image: string;
  readonly mountDir: string;
  readonly upper: string;
  readonly work: string;

  constructor(dir: string) {
    this.image = join(dir, 'disk.ext4');
    this.mountDir = join(dir, 'disk');
    this.upper = join(this.mountDir, 'upper');
    this.work = join(this.mountDir, 'work');
  }

  async create(sizeBytes: number): Promise<void> {
    await mkdir(this.mountDir, { recursive: true });
    await run('truncate', ['-s', String(sizeBytes), this.image]);
    // No journal (the layer dies with its sandbox), no reserved blocks (the sandbox gets all
    // of its size), lazy inode tables: a 512 MB layer takes ~45 ms and ~400 kB of real disk.
    await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-O', '^has_journal', '-E', 'lazy_itable_init=1,nodiscard', this.image]);
    await run('mount', ['-t', 'ext4', '-o', LAYER_MOUNT_OPTIONS, this.image, this.mountDir]);
    await mkdir(this.upper);
    await mkdir(this.work);
  }

  /**
   * Whether the layer is there to boot from, mounting its image again when it is not mounted
   * (after the host restarted). False: no image.
   */
  async ensureMounted(): Promise<boolean> {
    if (await isMountPoint(this.mountDir)) return true;
    if (!existsSync(this.image)) return false;
    await mkdir(this.mountDir, { recursive: true });
    await run('mount', ['-t', 'ext4', '-o', LAYER_MOUNT_OPTIONS, this.image, this.mountDir]);
    return true;
  }

  /** Unmounts the image and keeps it (a microvm guest mounts it itself), its loop device released too; safe to repeat. */
  async unmount(): Promise<void> {
    if (await isMountPoint(this.mountDir)) await unmount(this.mountDir);
    await this.releaseLoopDevice();
  }

  /**
   * A loop mount's device goes after the unmount, not with it (autoclear acts at its last close,
   * which lags on a busy host): waits up to 2 s for it, then detaches one still there.
   */
  private async releaseLoopDevice(): Promise<void> {
    const deadline = Date.now() + 2_000;
    for (;;) {
      const r = await run('losetup', ['--associated', this.image], { allowFail: true });
      const devs = r.stdout.split('\n').map((l) => /^(\/dev\/loop\d+):/.exec(l)?.[1]).filter((d): d is string => !!d);
      if (devs.length === 0) return;
      if (Date.now() > deadline) {
        for (const dev of devs) await detachLoopDevice(dev);
        return;
      }
      await new Promise((res) => setTimeout(res, 50));
    }
  }

  /** Unmounts (the loop device goes with it) and removes the image; safe to repeat. */
  async destroy(): Promise<void> {
    if (await isMountPoint(this.mountDir)) await unmount(this.mountDir);
    await rm(this.image, { force: true });
  }

  /** Bytes used in the layer, from the filesystem's own count (no tree walk). */
  async usedBytes(): Promise<number | undefined> {
    // Mounted when its device is not its parent's: two stats, where reading the mount table costs
    // a line per mount of every sandbox; synchronous, as they cost a tenth of the asynchronous
    // ones (bench/sampler.ts reads every running sandbox every 5 s).
    const dir = statSync(this.mountDir, { throwIfNoEntry: false });
    const parent = statSync(dirname(this.mountDir), { throwIfNoEntry: false });
    if (!dir || !parent || dir.dev === parent.dev) return undefined;
    const s = statfsSync(this.mountDir);
    return (s.blocks - s.bfree) * s.bsize;
  }
}

/**
 * Loop devices whose backing file lies under `root` (`losetup` shows a detached file as
 * "path (deleted)"). Used after a crash: a device that a lazy unmount left attached.
 */
export async function loopDevicesUnder(root: string): Promise<Array<{ dev: string; backingFile: string }>> {
  const r = await run('losetup', ['--list', '--noheadings', '--output', 'NAME,BACK-FILE'], { allowFail: true });
  if (r.code !== 0) return [];
  return r.stdout.split('\n').map((l) => l.trim().split(/\s+/))
    .filter(([dev, file]) => dev && file?.startsWith(root + '/'))
    .map(([dev, backingFile]) => ({ dev, backingFile }));
}

export async function detachLoopDevice(dev: string): Promise<void> {
  await run('losetup', ['--detach', dev], { allowFail: true });
}
