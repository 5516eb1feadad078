import { sameSecret } from '@svc/common';
import { answers, type RouteTable } from './route-table.ts';
import { JOB_PHASES, JOB_STATUSES } from './template-route-schemas.ts';

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

/** The stored artifact of a BUILT report: what the master registers (ArtifactStored; its other fields are not checked). */
const BuiltArtifact = {
  type: 'object',
  required: ['artifactId', 'sha256', 'sizeBytes', 'storage', 'location'],
  properties: {
    artifactId: { type: 'string', minLength: 1 },
    sha256: { type: 'string' },
    sizeBytes: { type: 'number' },
    storage: { type: 'string', enum: ['local', 's3'] },
    location: { type: 'string' },
  },
} as const;

/**
 * A status report (JobStatusReport) as the master takes it: a known status, a known phase or
 * none, and with BUILT the artifact; anything else is a 400 naming the field. The other fields
 * (error, imageInfo) are the template center's, as JobStatusReport types them.
 */
const JobStatusReportBody = {
  type: 'object',
  required: ['status'],
  properties: {
    status: { type: 'string', enum: JOB_STATUSES },
    phase: { type: ['string', 'null'], enum: [...JOB_PHASES, null] },
  },
  if: { properties: { status: { const: 'BUILT' } } },
  then: { required: ['artifact'], properties: { artifact: BuiltArtifact } },
} as const;

/**
 * The master's status callback (route-table.ts): the master and the template center's test
 * double of it serve it, the template center's CallbackSender posts to it. The token
 * (CALLBACK_TOKEN_HEADER, verifyCallbackToken) is checked before the body.
 */
export const TEMPLATE_CALLBACK_ROUTES = {
  status: { method: 'POST', path: '/internal/template/jobs/:jobId/status', body: JobStatusReportBody, answer: answers<void>() },
} as const satisfies RouteTable;
