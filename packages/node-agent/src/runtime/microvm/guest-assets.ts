import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { link, mkdir, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SvcError } from '@svc/common';
import { run } from '../../host/exec.ts';
import type { RuntimeBundle } from '../runtime-bundle.ts';
import { CPIO_DIR, CPIO_FILE, cpioArchive, type CpioEntry } from './cpio.ts';

/** Where scripts/guest-kernel.sh puts the guest kernel: vmlinuz, and modules/ with modules.order. */
export const DEFAULT_GUEST_KERNEL_DIR = '/var/lib/svc/guest-kernel/current';
/** The static busybox of Debian's busybox-static: the initramfs's shell and tools. */
const BUSYBOX = '/bin/busybox';

export interface GuestBoot {
  kernel: string;
  initrd: string;
}

/** The guest's init script: beside this module in the checkout, beside the bundle in dist/. */
function initScript(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [join(here, '../../../guest/init.sh'), join(here, 'guest-init.sh')];
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new SvcError(503, `the microvm guest init (guest-init.sh) is missing beside ${here} (run npm run build)`);
  return found;
}

/**
 * The kernel and an initramfs for microvm guests. The initramfs (busybox, the kernel's few
 * modules, svc's init) is made once per content under `<stateDir>/guest/` and kept.
 */
export async function ensureGuestBoot(stateDir: string, kernelDir: string): Promise<GuestBoot> {
  const kernel = join(kernelDir, 'vmlinuz');
  if (!existsSync(kernel)) throw new SvcError(503, `no guest kernel at ${kernel}: run scripts/guest-kernel.sh (scripts/setup.sh runs it)`);
  if (!existsSync(BUSYBOX)) throw new SvcError(503, `${BUSYBOX} is missing: install busybox-static (scripts/install-system-deps.sh)`);
  const init = await readFile(initScript());
  const busybox = await readFile(BUSYBOX);
  const order = (await readFile(join(kernelDir, 'modules', 'modules.order'), 'utf8').catch(() => { /* a kernel built without modules: the initramfs has none */ return ''; })).split(/\s+/).filter(Boolean);
  const modules = await Promise.all(order.map(async (m) => ({ name: m, data: await readFile(join(kernelDir, 'modules', `${m}.ko`)) })));
  const hash = createHash('sha256').update(init).update(busybox).update(order.join(' '));
  for (const m of modules) hash.update(m.data);
  const initrd = join(stateDir, 'guest', `initramfs-${hash.digest('hex').slice(0, 12)}.cpio`);
  if (!existsSync(initrd)) {
    const entries: CpioEntry[] = [
      { path: 'bin', mode: CPIO_DIR | 0o755 },
      { path: 'bin/busybox', mode: CPIO_FILE | 0o755, data: busybox },
      { path: 'init', mode: CPIO_FILE | 0o755, data: init },
      { path: 'modules', mode: CPIO_DIR | 0o755 },
      { path: 'modules.order', mode: CPIO_FILE | 0o644, data: Buffer.from(order.join('\n') + '\n') },
      ...modules.map((m) => ({ path: `modules/${m.name}.ko`, mode: CPIO_FILE | 0o644, data: m.data })),
    ];
    await writeAtomically(initrd, cpioArchive(entries));
  }
  return { kernel, initrd };
}

/**
 * svc's runtime directory (/.svc) as a read-only ext4 image the guests share, made once per
 * runtime bundle beside it.
 */
export function ensureRuntimeDisk(bundle: RuntimeBundle): Promise<string> {
  const image = `${bundle.dir}.ext4`;
  if (existsSync(image)) return Promise.resolve(image);
  let building = runtimeDisksBuilding.get(image);
  if (!building) {
    building = buildRuntimeDisk(bundle.dir, image).finally(() => runtimeDisksBuilding.delete(image));
    runtimeDisksBuilding.set(image, building);
  }
  return building;
}

/**
 * Runtime disks being made in this process, so that concurrent boots share one. Two mkfs runs of
 * one tree make two different filesystems (each its own UUID, from which ext4 seeds its metadata
 * checksums): a guest saved on one and restored on the other reads every directory it had not
 * cached as corrupt (seen: "directory fails checksum" on /.svc in every clone of a template whose
 * saved guest booted while a second build replaced the disk, and no terminal could start).
 */
const runtimeDisksBuilding = new Map<string, Promise<string>>();

async function buildRuntimeDisk(dir: string, image: string): Promise<string> {
  const bytes = await treeBytes(dir);
  const size = Math.ceil((bytes * 1.3 + 16 * 1024 * 1024) / (1024 * 1024));
  const tmp = `${image}.tmp-${randomBytes(4).toString('hex')}`;
  try {
    await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-O', '^has_journal', '-L', 'svc-runtime', '-d', dir, tmp, `${size}M`], { timeoutMs: 120_000 });
    // A link, not a rename: a disk that another process finished first stays as it is, since
    // guests and saved template guests hold its superblock (above).
    await link(tmp, image).catch((err: NodeJS.ErrnoException) => { if (err.code !== 'EEXIST') throw err; });
  } finally {
    await rm(tmp, { force: true });
  }
  return image;
}

async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) total += await treeBytes(p) + 4096;
    else total += (await stat(p)).size + 4096;
  }
  return total;
}

async function writeAtomically(path: string, data: Buffer): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${randomBytes(4).toString('hex')}`;
  await writeFile(tmp, data, { mode: 0o644 });
  await rename(tmp, path);
}

/**
 * The host's TSC rate in kHz, which a TCG guest's TSC runs at: what /proc/cpuinfo says of the
 * first CPU (a guest host reports its TSC there; on bare metal, where KVM runs guests, it is not
 * needed). Undefined when unknown: the guest measures it then.
 */
export async function hostTscKhz(): Promise<number | undefined> {
  const text = await readFile('/proc/cpuinfo', 'utf8').catch(() => { /* unknown rate: the guest measures it */ return ''; });
  const mhz = Number(/^cpu MHz\s*:\s*([\d.]+)/m.exec(text)?.[1]);
  return mhz > 0 ? Math.round(mhz * 1000) : undefined;
}
