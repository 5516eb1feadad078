/**
 * The egress proxy's audit log records (docs/egress.md "Audit log"): one per request, the
 * security events, failed TLS handshakes, the tunnel listener's TCP connections, and the marks
 * where the log may miss records. The proxy writes them, tests and operators' tools read them.
 */
import type { EgressScheme } from './egress.ts';

export interface EgressRequestRecord {
  ts: string;
  sandbox_ip: string;
  dst_ip: string;
  dst_port: number;
  scheme: EgressScheme;
  host: string;
  method: string;
  path: string;
  status: number;
  bytes_in: number;
  bytes_out: number;
  latency_ms: number;
  tls_version: string;
  cipher: string;
  upstream_status: string;
  upstream_addr: string;
  /** svc's additions: the rule that decided, and the inject that ran (header names only). */
  sandbox_id?: string;
  rule?: string;
  injected?: string[];
  /** Why the proxy refused the exchange, when it did: the reason its security event has (or `deny_rule`). */
  reason?: EgressSecurityReason;
}

export type EgressSecurityReason =
  | 'default_deny'
  | 'deny_rule'
  | 'connect_refused'
  | 'malformed_rule'
  | 'host_sni_mismatch'
  | 'inject_fired'
  /** An inject or E2B transform matched a plain-http request: refused, never sent in cleartext. */
  | 'inject_over_http'
  | 'not_ready'
  | 'placeholder_unresolved'
  | 'platform_address'
  | 'unknown_sandbox';

export interface EgressSecurityEvent {
  type: 'security_event';
  ts: string;
  sandbox_ip: string;
  sandbox_id?: string;
  rule: string;
  reason: EgressSecurityReason;
  host: string;
  sni?: string;
  method?: string;
  path?: string;
  detail?: string;
}

export interface EgressTlsHandshakeRecord {
  type: 'tls_handshake';
  ts: string;
  sandbox_ip: string;
  sandbox_id?: string;
  sni: string;
  /** What failed: the client closed mid-handshake, the certificate could not be made, ... */
  reason: string;
}

/**
 * One TCP connection of a tunneled sandbox that was not HTTP(S) for a rule: its bytes are not
 * read, so the record holds metadata only (docs/egress.md "Bring your own proxy").
 */
export interface EgressTcpRecord {
  type: 'tcp';
  ts: string;
  sandbox_ip: string;
  sandbox_id?: string;
  dst_ip: string;
  dst_port: number;
  /** The proxy it went through (host:port); never its credentials. */
  via: string;
  bytes_in: number;
  bytes_out: number;
  latency_ms: number;
  /** 'failed' when the proxy could not open the tunnel (the sandbox's connection was reset). */
  status: 'closed' | 'failed';
  reason?: string;
}

/**
 * Written by the proxy's primary when a worker process ended without being asked to (a crash, an
 * out-of-memory kill, SIGKILL): the records of the connections it held, and of its last
 * AUDIT_FLUSH_MS, never reached the file. The log says where it may be incomplete.
 */
/** Written in place of the records a sandbox had dropped for going over its rate (docs/egress.md "Audit log"). */
export interface EgressAuditDroppedRecord {
  type: 'audit_dropped';
  ts: string;
  sandbox_ip: string;
  sandbox_id?: string;
  /** Records of this sandbox not written since the last such record. */
  dropped: number;
  detail: string;
}

export interface EgressAuditGapRecord {
  type: 'audit_gap';
  ts: string;
  reason: 'worker_exited';
  /** The worker's process id. */
  pid: number;
  /** How it ended: the signal's name (SIGKILL), or `code N`. */
  exit: string;
  detail: string;
}
