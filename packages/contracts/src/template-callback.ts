import { sameSecret } from '@svc/common';

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
