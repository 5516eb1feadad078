import { AUDIT_FLUSH_MS, sandboxIpOf, serializeAuditRecord, type AuditRecord, type AuditSink } from './audit-log.ts';
import type { PlaceholderResolver } from './placeholders.ts';
import { policySecrets, type PolicyStore } from './policy-store.ts';

/**
 * Where the data path's audit records go: the AuditLog itself (in-process, and in the primary),
 * or, in a worker process, a ForwardingAuditSink that hands them to the primary, which owns the
 * one file and its rotation.
 */
export type { AuditSink };

/** The event a worker sends with its audit lines; the primary appends them with AuditLog.writeLines. */
export interface AuditLinesEvent {
  kind: 'audit';
  lines: string[];
}

/** The secrets a record is redacted with, by the address of the sandbox it is of (none: a record of no sandbox). */
export type SecretsFor = (sandboxIp: string | undefined) => Iterable<string>;

/**
 * The secrets the data path holds for a record's sandbox: its policy's inject secrets and proxy
 * password, its team's resolved secrets and its own workload tokens. A record of no sandbox, or
 * of one whose policy is gone, is redacted with every secret held. Only the sandbox's own: with
 * every team's secrets searched in every line, a team whose rule injected a value that appears
 * in other teams' records (`"`, a sandbox's address) took it out of all of them (2026-11-30).
 * The same list object until the policies or the resolved values change, so that the redactor
 * compiled for it is reused (redactSecrets).
 */
export function liveSecretsOf(store: PolicyStore, placeholders: PlaceholderResolver | undefined): SecretsFor {
  let fromStore: Set<string> | undefined;
  let version = -1;
  let all: string[] = [];
  const bySandbox = new Map<string, string[]>();
  return (sandboxIp) => {
    const current = store.liveSecrets();
    if (current !== fromStore || (placeholders?.version ?? 0) !== version) {
      fromStore = current;
      version = placeholders?.version ?? 0;
      all = [...current, ...(placeholders?.liveValues() ?? [])];
      bySandbox.clear();
    }
    const policy = sandboxIp === undefined ? undefined : store.forAddress(sandboxIp);
    if (!policy) return all;
    let own = bySandbox.get(policy.sandboxId);
    if (own === undefined) {
      own = [...policySecrets(policy), ...(placeholders?.valuesOf(policy.teamId, policy.sandboxId) ?? [])];
      bySandbox.set(policy.sandboxId, own);
    }
    return own;
  };
}

/**
 * A worker's audit sink: each record is serialized and redacted here, where the live secrets
 * are (placeholder values are only ever in the worker that resolved them), and the lines of
 * AUDIT_FLUSH_MS go to the primary as one event, not one IPC message per record or per turn of
 * the event loop (which, under load, was a message every few requests).
 */
export class ForwardingAuditSink implements AuditSink {
  private pending: string[] = [];
  private scheduled: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly secretsFor: SecretsFor, private readonly emit: (event: AuditLinesEvent) => void) {}

  write(record: AuditRecord): void {
    this.pending.push(serializeAuditRecord(record, this.secretsFor(sandboxIpOf(record))));
    // After close (a connection ended by the shutdown itself) there is no later turn to wait for.
    if (this.closed) { this.flush(); return; }
    this.scheduled ??= setTimeout(() => this.flush(), AUDIT_FLUSH_MS);
  }

  /** Sends what is pending now; later records go at once. */
  close(): void {
    this.closed = true;
    this.flush();
  }

  private flush(): void {
    if (this.scheduled) clearTimeout(this.scheduled);
    this.scheduled = undefined;
    if (this.pending.length === 0) return;
    const lines = this.pending;
    this.pending = [];
    this.emit({ kind: 'audit', lines });
  }
}

/** Whether a worker's event is a batch of whole audit lines (anything else is refused, not written). */
export function isAuditLinesEvent(body: unknown): body is AuditLinesEvent {
  const e = body as Partial<AuditLinesEvent> | undefined;
  return e?.kind === 'audit' && Array.isArray(e.lines) && e.lines.every((l) => typeof l === 'string' && !l.includes('\n'));
}
