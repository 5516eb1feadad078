import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chmod, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * A template's guest RAM as a file that its clones map copy-on-write (docs/runtimes.md,
 * "Clones that share their template's memory"): QEMU's VM templating, as Kata Containers uses it.
 * The template guest boots with its RAM in `memory.ram` (`share=on`, so the file holds every page
 * the guest wrote) and is saved with the migration capability `x-ignore-shared`, so that its
 * `memory.state` holds device state only. Each clone maps the same file `share=off`: pages load on
 * first touch and stay shared between clones until one writes, and only its device state is read
 * at create. The file is never written again: no guest runs on it with `share=on` after the save,
 * its mode is 0444, and its size, time and SHA-256 are recorded (memory.json) to be checked.
 */

/** How a guest's RAM is backed; absent: QEMU's own anonymous RAM (a cold boot). */
export type GuestMemory =
  /** `readOnly` (QEMU 8.2 and later, qemu-features.ts): a clone's QEMU opens the file read-only (`readonly=on,rom=off`). */
  | { kind: 'template-file'; path: string; share: boolean; readOnly?: boolean }
  /** Anonymous RAM under the backend's name, for a clone's own full state (a pause, a capture). */
  | { kind: 'ram' };

/** The RAM block's name: the same for the file and the anonymous backend, so a clone's saved state loads into either. */
const BACKEND_ID = 'mem';

export const TEMPLATE_MEMORY_FILE = 'memory.ram';
const SEAL_FILE = 'memory.json';

/**
 * QEMU's options for a backend. No balloon and no free-page reporting go with a file backend:
 * QEMU 7.2 discards a file-backed page by punching a hole in the file, even one mapped
 * `share=off`, which would empty the template's page for every clone.
 */
export function memoryArgs(memory: GuestMemory | undefined, memoryMB: number): string[] {
  if (!memory) return [];
  const object = memory.kind === 'ram'
    ? `memory-backend-ram,id=${BACKEND_ID},size=${memoryMB}M`
    : `memory-backend-file,id=${BACKEND_ID},size=${memoryMB}M,mem-path=${memory.path},share=${memory.share ? 'on' : 'off'}${memory.readOnly && !memory.share ? ',readonly=on,rom=off' : ''}`;
  return ['-object', object, '-machine', `memory-backend=${BACKEND_ID}`];
}

/** Whether a command line maps a template's memory file copy-on-write (a clone's). */
export function mapsTemplateMemory(argv: string[]): boolean {
  return argv.some((a) => a.startsWith('memory-backend-file,') && a.includes(',share=off'));
}

/**
 * A clone's command line once its whole RAM is in its own saved state (a pause): anonymous RAM
 * under the same block name, so that the resume needs nothing of the template's file, which a
 * template's removal may take away meanwhile.
 */
export function withOwnMemory(argv: string[], memoryMB: number): string[] {
  return argv.map((a) => (a.startsWith('memory-backend-file,') ? memoryArgs({ kind: 'ram' }, memoryMB)[1] : a));
}

interface Seal { sha256: string; size: number; mtimeMs: number }

/** Makes the saved template's memory file read-only and records what it is (memory.json). */
export async function sealTemplateMemory(dir: string): Promise<Seal> {
  const file = join(dir, TEMPLATE_MEMORY_FILE);
  await chmod(file, 0o444);
  const s = await stat(file);
  const seal: Seal = { sha256: await sha256Of(file), size: s.size, mtimeMs: s.mtimeMs };
  await writeFile(join(dir, SEAL_FILE), JSON.stringify(seal) + '\n');
  return seal;
}

/**
 * Whether the memory file is as sealed, by size and time (cheap enough for every create); the
 * full checksum is `templateMemoryChecksum`. A template without a seal is of an older kind.
 */
export async function templateMemoryUnchanged(dir: string): Promise<boolean> {
  const seal = await readSeal(dir);
  if (!seal) return false;
  const s = await stat(join(dir, TEMPLATE_MEMORY_FILE)).catch(() => { /* no memory file: not a shareable template */ return undefined; });
  return !!s && s.size === seal.size && s.mtimeMs === seal.mtimeMs;
}

/** The recorded and the current SHA-256 of the memory file (tests and bench/microvm.ts). */
export async function templateMemoryChecksum(dir: string): Promise<{ recorded?: string; now: string }> {
  return { recorded: (await readSeal(dir))?.sha256, now: await sha256Of(join(dir, TEMPLATE_MEMORY_FILE)) };
}

async function readSeal(dir: string): Promise<Seal | undefined> {
  return readFile(join(dir, SEAL_FILE), 'utf8').then((t) => JSON.parse(t) as Seal, () => { /* no seal: an older or half-made template */ return undefined; });
}

function sha256Of(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    createReadStream(file).on('data', (c) => h.update(c)).once('error', reject).once('end', () => resolve(h.digest('hex')));
  });
}
