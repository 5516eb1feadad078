import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '@svc/common';
import type { InstanceSpec } from '../driver.ts';

/**
 * Guests saved once their envd was up, one per template and sandbox shape: a create with that
 * template and shape starts QEMU on the saved state instead of booting (E2B's and CubeSandbox's
 * way to create fast), then gets its identity through envd's /init as any create does. Each
 * lives in `<root>/<key>/` (the writable layer's image `disk.ext4`, the RAM file `memory.ram`
 * that clones map copy-on-write and its seal `memory.json`, and the device state
 * `memory.state`: template-memory.ts), written under a temporary name and renamed when
 * complete; what a key covers is in `templateKey`.
 */
export class TemplateSnapshots {
  private readonly making = new Map<string, Promise<void>>();
  /** When the last try to make each key's saved guest failed. */
  private readonly failedAt = new Map<string, number>();

  constructor(private readonly root: string, private readonly logger: Logger) {}

  /** The saved guest's directory for this key, when there is one. */
  find(key: string): string | undefined {
    const dir = join(this.root, key);
    return existsSync(join(dir, 'memory.state')) ? dir : undefined;
  }

  /**
   * Makes the saved guest for `key` in the background, once: `make` boots a guest in the
   * directory it is given and saves it there. A failure is logged; the next create tries again.
   */
  makeSoon(key: string, uses: string[], make: (dir: string) => Promise<void>): void {
    if (this.making.has(key) || this.find(key)) return;
    const job = (async () => {
      const tmp = join(this.root, `${key}.tmp-${randomBytes(4).toString('hex')}`);
      const started = Date.now();
      try {
        await make(tmp);
        await writeFile(join(tmp, 'uses.json'), JSON.stringify(uses) + '\n');
        await rename(tmp, join(this.root, key));
        this.logger.info({ key, ms: Date.now() - started }, 'template snapshot saved: creates of this template and shape restore it');
      } catch (err) {
        this.failedAt.set(key, Date.now());
        this.logger.warn({ key, err: (err as Error).message }, 'template snapshot could not be made; creates boot cold');
        await rm(tmp, { recursive: true, force: true });
      }
    })().finally(() => this.making.delete(key));
    this.making.set(key, job);
  }

  /** When the last try to make the saved guest of `key` failed, if one did since the agent started. */
  lastFailure(key: string): number | undefined {
    return this.failedAt.get(key);
  }

  /** Resolves when the saved guest of `key` being made (if it is) is made or has failed (find says which). */
  async made(key: string): Promise<void> {
    await this.making.get(key);
  }

  /** Removes the saved guest of this key (its memory file is not as sealed); running clones keep their mapping. */
  async discard(key: string): Promise<void> {
    await rm(join(this.root, key), { recursive: true, force: true });
  }

  /** Resolves when no snapshot is being made (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.making.size) await Promise.all(this.making.values());
  }

  /**
   * Removes half-made saved guests (an agent that ended while making one; its QEMU, if still
   * there, is killed) and those whose template image, runtime disk, kernel or initramfs is gone.
   */
  async sweep(): Promise<void> {
    for (const name of await readdir(this.root).catch(() => { /* no saved guests made yet */ return [] as string[]; })) {
      const dir = join(this.root, name);
      let stale = name.includes('.tmp-');
      if (stale) await killQemuOf(dir);
      else {
        const uses = await readFile(join(dir, 'uses.json'), 'utf8').then((t) => JSON.parse(t) as string[], () => { /* no uses.json (or a torn one): the saved guest is stale */ return undefined; });
        // Without a sealed memory file (memory.json) it is of the kind before clones shared it.
        stale = !uses || uses.some((p) => !existsSync(p)) || !existsSync(join(dir, 'memory.json'));
      }
      if (stale) {
        this.logger.info({ dir }, 'removing a saved template guest that is half-made or outdated');
        await rm(dir, { recursive: true, force: true });
      }
    }
  }
}

/**
 * What a saved guest depends on: the template's image (path, size and time), the shape, svc's runtime disk, the
 * guest kernel and initramfs, PID 1's environment and command line, the files placed at boot, and how QEMU
 * runs. A create that differs in any of them boots cold. Creates with a captured layer or with
 * volumes always boot cold (their disks are their own).
 */
export function templateKey(spec: InstanceSpec, parts: { runtimeDisk: string; kernel: string; initrd: string; accel: string; imageStamp: string; bootScript: string; machine: string }): string {
  const h = createHash('sha256');
  h.update(JSON.stringify([parts.imageStamp, spec.rootfs.imagePath, spec.resources, parts.runtimeDisk, parts.kernel, parts.initrd, parts.accel, parts.machine, parts.bootScript, spec.files, spec.hostname]));
  return h.digest('hex').slice(0, 16);
}

/** The QEMU a pid file in `dir` names, when its command line is about `dir`. */
async function killQemuOf(dir: string): Promise<void> {
  const pid = Number((await readFile(join(dir, 'qemu.pid'), 'utf8').catch(() => { /* QEMU never started for it */ return ''; })).trim());
  if (!pid) return;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => { /* no such process: it has ended */ return ''; });
  if (!cmdline.includes(dir)) return;
  try { process.kill(pid, 'SIGKILL'); } catch { /* gone meanwhile */ }
}
