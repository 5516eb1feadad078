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
 * bound is stopped there (capped-tar.ts) and fails. Its free-room check asks for less
 * (captureRoomBytes).
 */
export function captureBoundBytes(r: Pick<InstanceRecord, 'diskSizeMB' | 'memoryMB'>, contents: LayerContents): number {
  const held = (r.diskSizeMB + (contents === 'memory' ? r.memoryMB : 0)) * MiB;
  return Math.ceil(held * (1 + MARGIN_SHARE)) + MARGIN_FIXED_BYTES;
}

/**
 * The room a capture reserves where layers go (docs/runtimes.md, "How much a capture may write"):
 * what it will likely write, the bytes the sandbox's disk holds (`diskUsedBytes`: its writable
 * layer's used blocks, a microvm's disk image's allocated ones) and its memory where the capture
 * holds the machine (once: memory.state is in the tar), with the bound's margin, and never more
 * than the bound. Unknown use (its stats could not be read) reserves the bound. Until 2026-12-01
 * the bound itself was reserved, and memory twice for a running machine: a 20 GB disk holding
 * 100 MB was refused (507) on a node with 15 GB free, and captures at once each held their whole disk.
 */
export function captureRoomBytes(r: Pick<InstanceRecord, 'diskSizeMB' | 'memoryMB'>, contents: LayerContents, diskUsedBytes: number | undefined): number {
  const bound = captureBoundBytes(r, contents);
  if (diskUsedBytes === undefined || !Number.isFinite(diskUsedBytes) || diskUsedBytes < 0) return bound;
  const likely = diskUsedBytes + (contents === 'memory' ? r.memoryMB * MiB : 0);
  return Math.min(bound, Math.ceil(likely * (1 + MARGIN_SHARE)) + MARGIN_FIXED_BYTES);
}
