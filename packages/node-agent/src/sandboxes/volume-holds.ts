import type { AttachedVolume } from '../volumes/attachments.ts';
import type { Instance } from './instances.ts';

/** The holder a sandbox's volume attachments are counted under. */
export const sandboxHolder = (sandboxId: string) => ({ id: sandboxId, kind: 'sandbox' as const });

/** The volumes a sandbox holds attached now (none after a filesystem pause). */
export function attachedVolumeIds(inst: Instance): string[] {
  return inst.record.volumesDetached ? [] : (inst.record.volumes ?? []).map((v: AttachedVolume) => v.volumeId);
}
