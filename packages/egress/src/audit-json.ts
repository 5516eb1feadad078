import type { EgressRequestRecord } from '@svc/contracts/egress-audit';

/**
 * The request record as JSON, written field by field: the egress proxy writes one for every
 * request, and `JSON.stringify` spent about 1 µs on each where this spends half (measured on
 * these machines, docs/benchmarks.md "Proxies against nginx"). The same text as
 * `JSON.stringify` for a record built in the contract's order (audit-json.test.ts).
 */
export function requestRecordJson(r: EgressRequestRecord): string {
  let out = `{"ts":${str(r.ts)},"sandbox_ip":${str(r.sandbox_ip)},"dst_ip":${str(r.dst_ip)},"dst_port":${num(r.dst_port)},`
    + `"scheme":${str(r.scheme)},"host":${str(r.host)},"method":${str(r.method)},"path":${str(r.path)},"status":${num(r.status)},`
    + `"bytes_in":${num(r.bytes_in)},"bytes_out":${num(r.bytes_out)},"latency_ms":${num(r.latency_ms)},"tls_version":${str(r.tls_version)},`
    + `"cipher":${str(r.cipher)},"upstream_status":${str(r.upstream_status)},"upstream_addr":${str(r.upstream_addr)}`;
  if (r.sandbox_id !== undefined) out += `,"sandbox_id":${str(r.sandbox_id)}`;
  if (r.rule !== undefined) out += `,"rule":${str(r.rule)}`;
  if (r.injected !== undefined) out += `,"injected":${JSON.stringify(r.injected)}`;
  if (r.reason !== undefined) out += `,"reason":${str(r.reason)}`;
  return `${out}}`;
}

/** Every field requestRecordJson writes: a field added to the contract fails to compile here until it is written too. */
const WRITTEN = ['ts', 'sandbox_ip', 'dst_ip', 'dst_port', 'scheme', 'host', 'method', 'path', 'status', 'bytes_in', 'bytes_out',
  'latency_ms', 'tls_version', 'cipher', 'upstream_status', 'upstream_addr', 'sandbox_id', 'rule', 'injected', 'reason'] as const;
type Unwritten = Exclude<keyof EgressRequestRecord, (typeof WRITTEN)[number]>;
const everyFieldWritten: [Unwritten] extends [never] ? true : Unwritten = true;
void everyFieldWritten;

/** What JSON must escape: a quote, a backslash, a control character, and a surrogate (a lone one is escaped). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

function str(s: string): string {
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`;
}

/** As JSON.stringify writes a number: a non-finite one is null. */
function num(n: number): string | number {
  return Number.isFinite(n) ? n : 'null';
}
