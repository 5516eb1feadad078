import { chmod, mkdir } from 'node:fs/promises';
import { createWriteStream, type WriteStream } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from '@svc/common';
import { REDACTED, type EgressRequestRecord, type EgressSecurityEvent, type EgressTlsHandshakeRecord } from '@svc/contracts/egress';

/** The three kinds of line of the audit file (docs/egress.md "Audit log"); request records carry no `type`. */
export type AuditRecord = EgressRequestRecord | EgressSecurityEvent | EgressTlsHandshakeRecord;

export interface AuditLogOptions {
  logger: Logger;
  /** Every inject secret currently configured: a line that holds one is redacted before it is written. */
  liveSecrets: () => Iterable<string>;
}

/**
 * The egress audit log: JSON Lines appended to one file (mode 0640), one record a line. One
 * stream writes every line whole and in order, so lines never interleave.
 */
export class AuditLog {
  private closed = false;
  private failing = false;
  private dropped = 0;

  private constructor(private readonly path: string, private readonly stream: WriteStream, private readonly opts: AuditLogOptions) {
    stream.on('error', (err) => {
      if (!this.failing) opts.logger.error({ err, path }, 'egress audit log cannot be written; records are being lost');
      this.failing = true;
    });
  }

  static async open(path: string, opts: AuditLogOptions): Promise<AuditLog> {
    await mkdir(dirname(path), { recursive: true, mode: 0o750 });
    const stream = createWriteStream(path, { flags: 'a', mode: 0o640 });
    await new Promise<void>((resolve, reject) => {
      stream.once('open', () => resolve());
      stream.once('error', reject);
    });
    // An older file keeps its mode on open; the log is not for every local user.
    await chmod(path, 0o640);
    return new AuditLog(path, stream, opts);
  }

  write(record: AuditRecord): void {
    if (this.closed || this.failing || this.stream.destroyed) {
      if (this.dropped++ === 0) this.opts.logger.warn({ path: this.path, closed: this.closed }, 'egress audit record dropped: the log is closed or failing');
      return;
    }
    this.stream.write(`${redactSecrets(JSON.stringify(record), this.opts.liveSecrets())}\n`);
  }

  /** Flushes every line written so far and closes the file. */
  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    return new Promise((resolve) => {
      if (this.stream.destroyed) return resolve();
      this.stream.end(() => resolve());
      // end()'s callback is not called when the stream fails while flushing; the error is logged above.
      this.stream.once('error', () => resolve());
    });
  }
}

/**
 * A line with every secret, raw or as JSON escapes it, replaced by REDACTED. Callers never put
 * secrets in records; this is the second line of defence.
 */
export function redactSecrets(line: string, secrets: Iterable<string>): string {
  let out = line;
  for (const secret of secrets) {
    if (!secret) continue;
    for (const form of new Set([secret, JSON.stringify(secret).slice(1, -1)])) {
      if (out.includes(form)) out = out.split(form).join(REDACTED);
    }
  }
  return out;
}

/** ISO 8601 with the local numeric offset, e.g. 2026-11-26T10:04:34.123+01:00. */
export function auditTimestamp(d: Date = new Date()): string {
  const offsetMin = -d.getTimezoneOffset();
  const local = new Date(d.getTime() + offsetMin * 60_000);
  const sign = offsetMin >= 0 ? '+' : '-';
  const abs = Math.abs(offsetMin);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${local.toISOString().slice(0, 23)}${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
}
