import type { E2bBuildStatusAnswer, JobInfo } from '@svc/contracts/template-routes';
import { jobStatus } from './template-builds.ts';

export type StatusQuery = { logsOffset?: number; limit?: number; level?: string };

const LEVELS = ['debug', 'info', 'warn', 'error'];
/** At most this many entries an answer (E2B's limit and the route's maximum). */
const STATUS_ENTRIES = 100;

/**
 * E2B's build status of a build job (an image template's). A job keeps no log, only its current
 * progress message: that is its one log entry, paged by `logsOffset`, `limit` and `level` as a
 * builder build's log is, so a client that counts the entries it saw gets none twice.
 */
export function jobStatusAnswer(templateId: string, info: JobInfo, q: StatusQuery): E2bBuildStatusAnswer {
  const entries = info.progress.message ? [{ timestamp: info.updated_at, level: 'info' as const, message: info.progress.message }] : [];
  const lowest = Math.max(0, LEVELS.indexOf(q.level ?? 'debug'));
  const offset = q.logsOffset ?? 0;
  const paged = entries.filter((e) => LEVELS.indexOf(e.level) >= lowest).slice(offset, offset + Math.min(q.limit ?? STATUS_ENTRIES, STATUS_ENTRIES));
  return {
    // `logs` is E2B's deprecated string list, empty since E2B removed its V1 builds (its openapi).
    templateID: templateId, buildID: info.job_id, status: jobStatus(info.status), logs: [], logEntries: paged,
    ...(info.error ? { reason: { message: info.error, ...(info.phase ? { step: info.phase } : {}) } } : {}),
  };
}
