/**
 * What counts as a defect: no answer within the deadline, a dropped connection, a 5xx other
 * than the 502/503/504 of docs/design.md "Errors", an error body that is not `{code, message}` (packages/common/src/
 * errors.ts; envd's Connect routes answer Connect's `{code: "<name>", message}`), and a Connect
 * stream that ends in an internal error.
 */
import { CLIENT_REFUSED, type Outcome } from './send.ts';
import type { Case } from './spec.ts';

export type DefectKind = 'hang' | 'no-answer' | '5xx' | 'error-body' | 'stream-internal' | 'fuzzer';

export interface Defect {
  kind: DefectKind;
  detail: string;
}

/** docs/design.md "Errors": the only 5xx a client may see. */
const DOCUMENTED_5XX = new Set([502, 503, 504]);
const CONNECT_CODES = new Set([
  'canceled', 'unknown', 'invalid_argument', 'deadline_exceeded', 'not_found', 'already_exists', 'permission_denied', 'resource_exhausted',
  'failed_precondition', 'aborted', 'out_of_range', 'unimplemented', 'internal', 'unavailable', 'data_loss', 'unauthenticated',
]);
const INTERNAL_CONNECT_CODES = new Set(['internal', 'unknown', 'data_loss']);

export function judge(c: Case, o: Outcome): Defect[] {
  if (o.error?.startsWith(CLIENT_REFUSED)) return [{ kind: 'fuzzer', detail: o.error }];
  if (o.error === 'deadline') return [{ kind: 'hang', detail: `no answer within ${o.ms} ms` }];
  if (o.status === undefined) {
    // Closing the connection is a fair answer to bytes that are not HTTP.
    return c.raw ? [] : [{ kind: 'no-answer', detail: `connection ended without an answer (${o.error ?? 'closed'})` }];
  }
  const out: Defect[] = [];
  if (o.status >= 500 && !DOCUMENTED_5XX.has(o.status)) out.push({ kind: '5xx', detail: `status ${o.status}: ${snippet(o.body)}` });
  if (o.status >= 400 && c.method !== 'HEAD') {
    const problem = errorBodyProblem(o.body, !!c.connectErrors);
    if (problem) out.push({ kind: 'error-body', detail: `status ${o.status}: ${problem}` });
  }
  if (c.stream && o.status === 200) {
    const code = streamErrorCode(o.body);
    if (code && INTERNAL_CONNECT_CODES.has(code)) out.push({ kind: 'stream-internal', detail: `stream ended with ${code}: ${snippet(o.body)}` });
  }
  return out;
}

function errorBodyProblem(body: Buffer, connect: boolean): string | undefined {
  let v: unknown;
  try {
    v = JSON.parse(body.toString('utf8'));
  } catch {
    return `body is not JSON: ${snippet(body)}`;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return `body is not a JSON object: ${snippet(body)}`;
  const { code, message } = v as { code?: unknown; message?: unknown };
  if (typeof message !== 'string') return `no string message: ${snippet(body)}`;
  if (typeof code === 'number') return undefined;
  if (connect && typeof code === 'string' && CONNECT_CODES.has(code)) return undefined;
  return `code is neither a number${connect ? ' nor a Connect code' : ''}: ${snippet(body)}`;
}

/** The error code of a Connect stream's end message (flags 0x02), if the stream ended with one. */
function streamErrorCode(body: Buffer): string | undefined {
  let at = 0;
  while (at + 5 <= body.length) {
    const flags = body.readUInt8(at);
    const len = body.readUInt32BE(at + 1);
    if (at + 5 + len > body.length) return undefined;
    if (flags & 0x02) {
      try {
        const end = JSON.parse(body.subarray(at + 5, at + 5 + len).toString('utf8')) as { error?: { code?: string } };
        return end.error?.code;
      } catch {
        return 'unknown';
      }
    }
    at += 5 + len;
  }
  return undefined;
}

export function snippet(body: Buffer): string {
  const s = body.subarray(0, 200).toString('utf8').replace(/[\u0000-\u001f]/g, ' ');
  return body.length > 200 ? `${s}…` : s || '(empty)';
}
