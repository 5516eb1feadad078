/**
 * What a failed webhook attempt tells the team (lastDelivery.error, GET /events/webhooks/{id}):
 * a class of failure, never the socket's own message, which names the addresses and ports it
 * tried ("connect ECONNREFUSED 10.0.3.7:8080") and so maps the network behind a name for anyone
 * who can point a webhook at it. The raw error goes to the master's log with the webhook's id.
 */

const TLS_CODES = new Set([
  'EPROTO', 'CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID', 'CERT_REVOKED', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'HOSTNAME_MISMATCH',
]);

const CLASSES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EPIPE: 'connection reset',
  ECONNABORTED: 'connection reset',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EHOSTDOWN: 'host unreachable',
  ENOTFOUND: 'the host does not resolve',
  EAI_AGAIN: 'the host does not resolve',
};

/** The attempt's own time limit ran out (deliverer.ts sets this code on the error it destroys the request with). */
export const ATTEMPT_TIMEOUT_CODE = 'SVC_WEBHOOK_TIMEOUT';

/** The class of a request error, for lastDelivery.error; `timeoutMs` names the attempt's limit. */
export function deliveryErrorClass(err: Error & { code?: string }, timeoutMs: number): string {
  const code = err.code ?? '';
  if (code === ATTEMPT_TIMEOUT_CODE) return `timed out (no answer within ${timeoutMs} ms)`;
  if (TLS_CODES.has(code) || code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_')) return `TLS error (${code})`;
  if (code.startsWith('HPE_')) return 'not an HTTP answer';
  return CLASSES[code] ?? 'connection failed';
}
