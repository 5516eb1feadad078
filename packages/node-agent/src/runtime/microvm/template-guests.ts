import { randomBytes } from 'node:crypto';
import { readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '@svc/common';
import type { InstanceRef, InstanceSpec } from '../driver.ts';
import { consoleTailOf } from '../console-file.ts';
import { ENVD_WARM_UP_ENV, type RuntimeBundle } from '../runtime-bundle.ts';
import { sandboxLimits } from '../sandbox-limits.ts';
import { microvmPaths } from './instance-files.ts';
import type { MachineState } from './machine-state.ts';
import { bootEnv, bootScript, MACHINE_REVISION, type MachineOptions } from './qemu-command.ts';
import type { QemuFeatures } from './qemu-features.ts';
import { endQemu, qemuPid } from './qemu-process.ts';
import { sealTemplateMemory, templateMemoryUnchanged, TEMPLATE_MEMORY_FILE, type GuestMemory } from './template-memory.ts';
import { TemplateSnapshots, templateKey } from './template-snapshots.ts';

/** How long warm starts leave a template whose saved guest failed to be made before they boot one again. */
const SAVED_GUEST_RETRY_MS = 600_000;

/** What making and finding saved template guests needs of the node (MicrovmOptions holds it). */
export interface TemplateGuestOptions extends MachineOptions {
  logger: Logger;
  /** The read-only ext4 image of svc's runtime directory (guest-assets.ts ensureRuntimeDisk). */
  runtimeDisk: (bundle: RuntimeBundle) => Promise<string>;
  /** A scratch network namespace for booting a template guest, and its removal. */
  scratchNetns: () => Promise<{ path: string; remove: () => Promise<void> }>;
  /** What the node's QEMU offers (qemu-features.ts). */
  qemu: QemuFeatures;
}

/**
 * The saved template guests clones start from (docs/runtimes.md, "Template snapshots" and "Clones
 * that share their template's memory"): their key, finding one whose memory file is as sealed,
 * and making one: a guest booted like a create's in a scratch namespace, its RAM in the file
 * every clone maps, saved once its envd listens and has run its warm-up. Where they live on disk
 * is template-snapshots.ts.
 */
export class TemplateGuests {
  constructor(
    private readonly o: TemplateGuestOptions,
    private readonly snapshots: TemplateSnapshots,
    private readonly d: {
      machines: MachineState;
      /** Boots a guest as a create does, its RAM backed as given (MicrovmDriver.boot). */
      boot: (spec: InstanceSpec, memory: GuestMemory) => Promise<void>;
    },
  ) {}

  /** Has the saved guest of `key` made in the background, from a guest like `like` (after a cold create). */
  async makeSoon(key: string, like: InstanceSpec): Promise<void> {
    this.snapshots.makeSoon(key, await this.usesOf(like), (dir) => this.make(like, dir));
  }

  /**
   * The saved guest of `key` whose memory file is as it was sealed (one that is not is removed:
   * clones of it would start from pages nobody saved). `makeFor`: a warm start, which waits for
   * the saved guest to be made when there is none, rather than holding a booted guest's whole
   * RAM in the pool (docs/runtimes.md, "The warm pool of parked clones").
   */
  async find(key: string, makeFor?: InstanceSpec): Promise<string | undefined> {
    let saved = this.snapshots.find(key);
    if (saved && !(await templateMemoryUnchanged(saved))) {
      this.o.logger.warn({ key, dir: saved }, 'a saved template guest\'s memory file changed; it is removed and made again');
      await this.snapshots.discard(key);
      saved = undefined;
    }
    if (saved || !makeFor) return saved;
    // A guest that failed to be saved is not booted again for every warm start (the pool retries
    // each 30 s): a cold create tries again, as before clones had a pool.
    const failed = this.snapshots.lastFailure(key);
    if (failed && Date.now() - failed < SAVED_GUEST_RETRY_MS) throw new Error(`the template's saved guest could not be made at ${new Date(failed).toISOString()}; warm clones wait until a create makes it`);
    this.snapshots.makeSoon(key, await this.usesOf(makeFor), (dir) => this.make(makeFor, dir));
    await this.snapshots.made(key);
    saved = this.snapshots.find(key);
    if (!saved) throw new Error('the template\'s saved guest could not be made, so no warm clone can wait on it (the agent\'s log says why)');
    return saved;
  }

  /** What a saved guest is made of: when one of them is gone, the saved guest is stale (TemplateSnapshots.sweep). */
  private async usesOf(spec: InstanceSpec): Promise<string[]> {
    return [spec.rootfs.imagePath, await this.o.runtimeDisk(spec.runtime), this.o.guest.kernel, this.o.guest.initrd];
  }

  /**
   * Warm and cold creates of one template and shape share one saved guest: the warm-up variable
   * is left out of the key, and the template guest always runs envd's warm-up (make).
   */
  async keyOf(spec: InstanceSpec): Promise<string> {
    const image = await stat(spec.rootfs.imagePath);
    const runtimeDisk = await this.o.runtimeDisk(spec.runtime);
    // The disk's identity too, not only its path: a guest saved on one mkfs of the runtime reads
    // another's directories as corrupt (guest-assets.ts ensureRuntimeDisk).
    const disk = await stat(runtimeDisk);
    const { [ENVD_WARM_UP_ENV]: _warmUp, ...env } = spec.env;
    return templateKey(spec, {
      runtimeDisk: `${runtimeDisk} ${disk.ino}:${disk.mtimeMs}`, kernel: this.o.guest.kernel, initrd: this.o.guest.initrd, accel: this.o.accel,
      // A saved guest loads only into the QEMU that saved it: microvm is not a versioned machine type.
      imageStamp: `${image.size}:${image.mtimeMs}`, bootScript: bootScript(bootEnv({ ...spec, env }), spec.runtime.initArgs), machine: `${MACHINE_REVISION} ${this.o.qemu.version}`,
    });
  }

  /**
   * Boots a guest like a create's, in a scratch namespace of its own, waits until its envd
   * listens and has run its warm-up command (untilConsoleSays), and saves it into `dir`.
   */
  private async make(like: InstanceSpec, dir: string): Promise<void> {
    const netns = await this.o.scratchNetns();
    const ref: InstanceRef = { instanceId: `tpl-${randomBytes(4).toString('hex')}`, dir, netnsPath: netns.path };
    try {
      await microvmPaths(dir).layer.create(sandboxLimits(like.resources).diskBytes);
      // Its RAM in a file of the template's that every clone maps (template-memory.ts). Its envd
      // runs one command before the save, so that no clone's first command is its first
      // (packages/envd/src/warm-up.ts), whether a warm or a cold create restores it.
      const env = { ...like.env, [ENVD_WARM_UP_ENV]: '1' };
      await this.d.boot({ ...like, ...ref, env, layerArchive: undefined, mounts: undefined }, { kind: 'template-file', path: join(dir, TEMPLATE_MEMORY_FILE), share: true });
      await this.untilConsoleSays(ref, /listening on 0\.0\.0\.0:49983/, 'its envd listened', 180_000);
      await this.untilConsoleSays(ref, /warm-up command done/, 'its envd\'s warm-up command ended', 60_000);
      await this.d.machines.save(ref, { ignoreShared: true });
      await rm(microvmPaths(dir).launch, { force: true });
      await sealTemplateMemory(dir);
    } catch (err) {
      await endQemu(ref);
      throw err;
    } finally {
      await netns.remove();
    }
  }

  /** Waits until the console of a guest being made says `what` (envd's log lines go there: the scratch namespace is not reachable from here). */
  private async untilConsoleSays(ref: InstanceRef, line: RegExp, what: string, limitMs: number): Promise<void> {
    const deadline = Date.now() + limitMs;
    while (!line.test(await readFile(microvmPaths(ref.dir).console, 'utf8').catch(() => { /* not written yet */ return ''; }))) {
      if (!(await qemuPid(ref))) throw new Error(`the template guest ended before ${what}: ${await consoleTailOf(microvmPaths(ref.dir).console, 3)}`);
      if (Date.now() > deadline) throw new Error(`the template guest: not ${what} within ${limitMs / 1000} s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
