import type { Coordination, Logger } from '@svc/common';
import { progressKey, type JobProgress } from '@svc/contracts/template-center';

/**
 * Live pull progress the template center keeps in the coordination store, or null. A store that
 * cannot be read is logged and read as no progress: the job's own row still says where it stands.
 */
export async function readProgress(coordination: Coordination, jobId: string, logger: Logger): Promise<JobProgress | null> {
  const raw = await coordination.kvGet(progressKey(jobId)).catch((err: Error) => {
    logger.warn({ jobId, err: err.message }, 'build job progress not readable from the coordination store; going on without it');
    return null;
  });
  if (!raw) return null;
  try {
    const p = JSON.parse(raw) as JobProgress;
    return p && typeof p === 'object' ? p : null;
  } catch {
    // The template center writes it; a value cut short or of another version is no progress to show.
    return null;
  }
}

/** When the template center last reported progress, as epoch ms (0 when unknown). */
export function progressTime(p: JobProgress | null): number {
  const t = p ? Date.parse(p.updatedAt) : NaN;
  return Number.isFinite(t) ? t : 0;
}
