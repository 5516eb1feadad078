import { ErrorCodes, SvcError } from '@svc/common';

export interface MemoryHolder {
  state: 'running' | 'paused';
  memoryMB: number;
}

/** Memory a paused sandbox gives back to the node's quota under the release ratio. */
const releasedMB = (memoryMB: number, ratio: number) => Math.round(memoryMB * ratio);

/** Memory the node counts as used: running sandboxes in full, paused ones minus what they released. */
export function usedMemoryMB(sandboxes: MemoryHolder[], ratio: number): number {
  let used = 0;
  for (const s of sandboxes) used += s.state === 'running' ? s.memoryMB : s.memoryMB - releasedMB(s.memoryMB, ratio);
  return used;
}

/**
 * `host.quota.paused_resource_release_ratio` (docs/configuration.md): a paused sandbox's released share of memory
 * is counted as free, so resuming it must get that share back. With a ratio of 0 nothing was
 * released and resume is always admitted. `all` includes the sandbox being resumed (paused).
 */
export function checkResumeAdmission(resuming: MemoryHolder, all: MemoryHolder[], capacityMB: number, ratio: number): void {
  if (!(ratio > 0)) return;
  const need = releasedMB(resuming.memoryMB, ratio);
  const quota = capacityMB - usedMemoryMB(all, ratio);
  if (need > quota) {
    throw new SvcError(409, `resume rejected by paused_resource_release_ratio policy: need ${need}MB > quota ${Math.max(0, quota)}MB`, { code: ErrorCodes.conflict });
  }
}
