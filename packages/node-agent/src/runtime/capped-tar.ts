import { run } from '../host/exec.ts';

/**
 * `tar --create` that cannot write more than `maxBytes`: run under RLIMIT_FSIZE (prlimit), so
 * the kernel stops it (SIGXFSZ) at the bound whatever the files it reads claim to hold. A
 * microvm guest writes its ext4 raw: an inode whose indirect blocks all point at one block reads
 * as gigabytes of data from 52 kB on disk, and tar wrote terabytes of it onto the node's disk
 * (docs/runtimes.md, "How much a capture may write"). The caller sizes the
 * bound (sandboxes/capture-bound.ts) and removes the cut archive. No core file either: its
 * writes would count against the same limit, and nobody reads it.
 */
export async function createCappedTar(archivePath: string, args: string[], o: { maxBytes: number; what: string }): Promise<void> {
  await run('prlimit', [`--fsize=${Math.floor(o.maxBytes)}`, '--core=0', '--', 'tar', '--create', `--file=${archivePath}`, ...args], { timeoutMs: 600_000, what: o.what });
}
