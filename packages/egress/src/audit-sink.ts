import { AUDIT_FLUSH_MS, serializeAuditRecord, type AuditRecord, type AuditSink } from './audit-log.ts';
import type { PlaceholderResolver } from './placeholders.ts';
import type { PolicyStore } from './policy-store.ts';

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

/**
 * Every secret the data path holds now: the policies' inject secrets and proxy passwords, and
 * the resolved placeholders. The same list object until either changes, so that the redactor
 * compiled for it is reused (redactSecrets).
 */
export function liveSecretsOf(store: PolicyStore, placeholders: PlaceholderResolver | undefined): () => Iterable<string> {
  if (!placeholders) return () => store.liveSecrets();
  let fromStore: Set<string> | undefined;
  let version = -1;
  let all: string[] = [];
  return () => {
    const current = store.liveSecrets();
    if (current !== fromStore || placeholders.version !== version) {
      fromStore = current;
      version = placeholders.version;
      all = [...current, ...placeholders.liveValues()];
    }
    return all;
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

  constructor(private readonly liveSecrets: () => Iterable<string>, private readonly emit: (event: AuditLinesEvent) => void) {}

  write(record: AuditRecord): void {
    this.pending.push(serializeAuditRecord(record, this.liveSecrets()));
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
