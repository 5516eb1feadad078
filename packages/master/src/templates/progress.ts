import type { Coordination } from '@svc/common';
import { progressKey, type JobProgress } from '@svc/contracts/template-center';

/** Live pull progress the template center keeps in the coordination store, or null. */
export async function readProgress(coordination: Coordination, jobId: string): Promise<JobProgress | null> {
  const raw = await coordination.kvGet(progressKey(jobId)).catch(() => null);
  if (!raw) return null;
  try {
    const p = JSON.parse(raw) as JobProgress;
    return p && typeof p === 'object' ? p : null;
  } catch {
    return null;
  }
}

/** When the template center last reported progress, as epoch ms (0 when unknown). */
export function progressTime(p: JobProgress | null): number {
  const t = p ? Date.parse(p.updatedAt) : NaN;
  return Number.isFinite(t) ? t : 0;
}
