/**
 * For the node agent's microvm tests: why this host cannot run microvm guests (no QEMU, or no
 * guest kernel), if so; the QEMU processes of one agent's state dir; and polling until a value
 * comes, as a guest booting under TCG takes seconds.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DEFAULT_GUEST_KERNEL_DIR } from '../runtime/microvm/guest-assets.ts';

const QEMU = 'qemu-system-x86_64';
/** The reason the microvm tests are skipped here, or undefined where they run. */
export const microvmMissing = spawnSync(QEMU, ['--version']).status !== 0 ? `${QEMU} is missing (scripts/install-system-deps.sh installs qemu-system-x86)`
  : !existsSync(join(DEFAULT_GUEST_KERNEL_DIR, 'vmlinuz')) ? `no guest kernel in ${DEFAULT_GUEST_KERNEL_DIR} (scripts/guest-kernel.sh installs it)` : undefined;

/** QEMU processes whose command line names this state dir. */
export async function qemuProcesses(stateDir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => { /* it ended while /proc was read */ return ''; });
    if (cmdline.startsWith(QEMU) && cmdline.includes(stateDir)) pids.push(Number(pid));
  }
  return pids;
}

/** Calls `fn` every 200 ms until it gives a value (an error counts as not yet); fails naming `what` after the timeout. */
export async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await fn().catch(() => { /* not yet: tried again until the deadline, which names what was awaited */ return undefined; });
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}`);
}
