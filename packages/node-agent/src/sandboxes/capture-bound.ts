import type { LayerContents } from '@svc/contracts/node-agent';
import type { InstanceRecord } from './record.ts';

const MiB = 1024 * 1024;
/**
 * Over the bytes a sandbox can hold, what tar adds: a 512-byte header for each file (an empty
 * file or a hard link takes no block on the disk but a header in the archive), long names and
 * a sparse file's map. A file's data fills 4 KiB blocks on the disk but only 512-byte records in
 * the archive, which pays for the headers of ordinary trees; the margin is the rest.
 */
const MARGIN_FIXED_BYTES = 64 * MiB;
const MARGIN_SHARE = 0.02;

/**
 * The most a capture of this sandbox may write (docs/runtimes.md, "How much a capture may write"): its disk, and
 * its memory where the capture holds the machine (memory.state is the guest's RAM), with a
 * margin. A sandbox's files cannot honestly hold more than its disk; a capture that reaches the
 * bound is stopped there (capped-tar.ts) and fails, and its free-room check asks for this much.
 */
export function captureBoundBytes(r: Pick<InstanceRecord, 'diskSizeMB' | 'memoryMB'>, contents: LayerContents): number {
  const held = (r.diskSizeMB + (contents === 'memory' ? r.memoryMB : 0)) * MiB;
  return Math.ceil(held * (1 + MARGIN_SHARE)) + MARGIN_FIXED_BYTES;
}

/** The guest's memory as a machine's pause writes it (memory.state) before the capture reads it. */
export function memoryStateBytes(r: Pick<InstanceRecord, 'memoryMB'>): number {
  return r.memoryMB * MiB;
}
