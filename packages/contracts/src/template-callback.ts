import { badRequest, sameSecret } from '@svc/common';
import { JOB_PHASES, JOB_STATUSES } from './template-route-schemas.ts';
import type { JobStatusReport } from './template-center.ts';

export type TokenCheck = { ok: true } | { ok: false; status: 401 | 503; message: string };

/**
 * The template callback token check, identical on both ends (template center routes and the
 * master's status callback): constant-time comparison, fail closed with 503 when no token is
 * configured unless the explicit development opt-in `insecure` is set.
 */
export function verifyCallbackToken(header: string | string[] | undefined, configuredToken: string, insecure: boolean): TokenCheck {
  if (!configuredToken) {
    if (insecure) return { ok: true };
    return { ok: false, status: 503, message: 'template callback token is not configured (set SVC_TEMPLATE_CALLBACK_TOKEN)' };
  }
  const presented = Array.isArray(header) ? header[0] : header;
  if (!presented) return { ok: false, status: 401, message: 'missing X-Svc-Template-Callback-Token' };
  if (!sameSecret(presented, configuredToken)) return { ok: false, status: 401, message: 'wrong X-Svc-Template-Callback-Token' };
  return { ok: true };
}

const STATUSES = new Set<string>(JOB_STATUSES);
const PHASES = new Set<string>(JOB_PHASES);

/** A status callback's body, as the master takes it (and the template center's test double); anything else is a 400. */
export function checkJobStatusReport(body: unknown): JobStatusReport {
  const r = body as JobStatusReport | undefined;
  if (!r || typeof r !== 'object' || !STATUSES.has(r.status)) throw badRequest('body must be a JobStatusReport with status PENDING, RUNNING, BUILT or FAILED');
  if (r.phase !== undefined && r.phase !== null && !PHASES.has(r.phase)) throw badRequest(`unknown phase ${String(r.phase)}`);
  if (r.status === 'BUILT') {
    const a = r.artifact;
    if (!a || typeof a.artifactId !== 'string' || !a.artifactId || typeof a.sha256 !== 'string' || typeof a.sizeBytes !== 'number'
      || (a.storage !== 'local' && a.storage !== 's3') || typeof a.location !== 'string') {
      throw badRequest('a BUILT report needs artifact {artifactId, sha256, sizeBytes, storage: local|s3, location}');
    }
  }
  return r;
}
