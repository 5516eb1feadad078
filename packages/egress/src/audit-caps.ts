import { createHash } from 'node:crypto';

/**
 * The longest value an audit record keeps of the fields a sandbox chooses (docs/egress.md "Audit
 * log"). A request path may be 8 KB and a Host as long: written whole, twice per denial (the
 * request record and the security event), one sandbox's denied requests filled the file at about
 * 11.6 KB each and rotation deleted every other sandbox's history within seconds. Characters,
 * not bytes: the HTTP parser gives these as latin1, one character a byte.
 */
export const AUDIT_FIELD_CAPS = { host: 512, path: 512, sni: 512, method: 64, detail: 1024, reason: 1024 } as const;

type CappedField = keyof typeof AUDIT_FIELD_CAPS;
const FIELDS = Object.keys(AUDIT_FIELD_CAPS) as CappedField[];

/** What a capped record carries besides its shortened fields: the mark, and each full value's short hash. */
export interface AuditTruncation {
  truncated?: true;
  host_sha256?: string;
  path_sha256?: string;
  sni_sha256?: string;
  method_sha256?: string;
  detail_sha256?: string;
  reason_sha256?: string;
}

/**
 * The record with every sandbox-chosen field over its cap cut to it, `truncated: true`, and the
 * first 16 hex digits of the SHA-256 of the whole value in `<field>_sha256`, so that records of
 * the same long path can still be matched. `redact` runs on a value before it is cut: a secret
 * across the cut would otherwise keep its first characters in the line, which the line's own
 * redaction no longer recognises. The record itself when nothing is over (every request's path).
 */
export function capAuditRecord<T extends object>(record: T, redact: (value: string) => string): T & AuditTruncation {
  const fields = record as Record<string, unknown>;
  let over = false;
  for (const f of FIELDS) {
    const v = fields[f];
    if (typeof v === 'string' && v.length > AUDIT_FIELD_CAPS[f]) { over = true; break; }
  }
  if (!over) return record;
  const out: Record<string, unknown> = { ...record, truncated: true };
  for (const f of FIELDS) {
    const v = fields[f];
    if (typeof v !== 'string' || v.length <= AUDIT_FIELD_CAPS[f]) continue;
    const whole = redact(v);
    out[f] = whole.slice(0, AUDIT_FIELD_CAPS[f]);
    out[`${f}_sha256`] = createHash('sha256').update(whole).digest('hex').slice(0, 16);
  }
  return out as T & AuditTruncation;
}
