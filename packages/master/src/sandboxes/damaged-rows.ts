import type { Logger } from '@svc/common';
import type { SandboxRecord } from '@svc/contracts/master';
import { toRecord } from './record.ts';
import type { Row } from './repo.ts';

export interface DamagedRow {
  sandboxId: string;
  error: string;
  firstSeenAt: string;
}

const KEEP = 100;

/**
 * Rows that cannot be read (bad JSON, an impossible time written by an older build or by
 * hand). A list skips them instead of failing for every caller; each is logged once and shown
 * on the master's health route until the row reads again.
 */
export class DamagedRows {
  private readonly seen = new Map<string, DamagedRow>();

  constructor(private readonly logger: Logger) {}

  /** The record, or undefined (logged and remembered) when the row is damaged. */
  read(row: Row): SandboxRecord | undefined {
    try {
      const rec = toRecord(row);
      this.seen.delete(row.sandbox_id);
      return rec;
    } catch (err) {
      this.remember(row.sandbox_id, err);
      return undefined;
    }
  }

  remember(sandboxId: string, err: unknown): void {
    if (this.seen.has(sandboxId)) return;
    const error = err instanceof Error ? err.message : String(err);
    this.logger.error({ sandboxId, err: error }, 'damaged sandbox row skipped; fix or delete it in t_svc_sandbox');
    if (this.seen.size >= KEEP) this.seen.delete(this.seen.keys().next().value!);
    this.seen.set(sandboxId, { sandboxId, error, firstSeenAt: new Date().toISOString() });
  }

  list(): DamagedRow[] {
    return [...this.seen.values()];
  }
}
