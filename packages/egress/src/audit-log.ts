import { mkdir } from 'node:fs/promises';
import { MIN_SECRET_LENGTH } from '@svc/contracts/egress';
import type { WriteStream } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from '@svc/common';
import { REDACTED } from '@svc/contracts/egress';
import type { EgressAuditDroppedRecord, EgressAuditGapRecord, EgressRequestRecord, EgressSecurityEvent, EgressTcpRecord, EgressTlsHandshakeRecord } from '@svc/contracts/egress-audit';
import { capAuditRecord } from './audit-caps.ts';
import { requestRecordJson } from './audit-json.ts';
import { endStream, nextLocalMidnight, openAuditFile, realRotationFs, shiftRotated, type OpenedAuditFile, type RotationFs } from './audit-rotation.ts';

/** The kinds of line of the audit file (docs/egress.md "Audit log"); request records carry no `type`. */
export type AuditRecord = EgressRequestRecord | EgressSecurityEvent | EgressTlsHandshakeRecord | EgressTcpRecord | EgressAuditGapRecord | EgressAuditDroppedRecord;

/** Where the data path's audit records go: the file (AuditLog), or a worker's forwarding sink (audit-sink.ts). */
export interface AuditSink {
  write(record: AuditRecord): void;
}

export interface AuditLogOptions {
  logger: Logger;
  /** The secrets a record of this sandbox (by address) is redacted with before it is written (audit-sink.ts liveSecretsOf). */
  secretsFor: (sandboxIp: string | undefined) => Iterable<string>;
  /** Rotate before the live file would pass this many bytes; 0 or absent: never by size. */
  maxBytes?: number;
  /** Rotated files kept (path.1 … path.keep); default 5, at least 1. */
  keep?: number;
  /** The clock for daily rotation; tests inject one. */
  now?: () => Date;
  /** Rotation's renames and deletes; tests inject failures. */
  fs?: RotationFs;
}

/** After a failed rotation the log keeps its file this long before trying again, so a lasting fault logs once a minute, not once a record. */
const ROTATION_RETRY_MS = 60_000;

/**
 * Lines are gathered this long and written together: one write a line took a thread-pool hand-off
 * (and its wake-ups) per proxied request, about a fifth of the egress proxy's CPU per request
 * (docs/benchmarks.md, "Proxies against nginx").
 */
export const AUDIT_FLUSH_MS = 10;

/**
 * The egress audit log: JSON Lines appended to one file (mode 0640), one record a line. One
 * stream writes every line whole and in order, so lines never interleave; the lines of
 * AUDIT_FLUSH_MS go in one write.
 *
 * The file rotates by size and by local calendar day: path → path.1 → … → path.keep. write()
 * never waits: while a rotation runs, lines queue in memory and go, in order, to the new file.
 * A line handed to the old stream before the rotation began is flushed to the old file, which
 * the stream's descriptor follows through the rename.
 */
export class AuditLog implements AuditSink {
  private closed = false;
  private failing = false;
  private dropped = 0;
  /** Bytes in the live file, its size at open included. */
  private bytes: number;
  /** The end of the local day of the live file's first record; undefined while the file is empty. */
  private dayEnds: number | undefined;
  /** Lines accepted while a rotation runs, for the new file, with when they were accepted (their day decides the file's). */
  private queue: Array<{ line: string; at: number }> = [];
  private rotation: Promise<void> | undefined;
  private retryAt = 0;
  private readonly maxBytes: number;
  private readonly keep: number;
  private readonly now: () => Date;
  /** The stream whose writes are being gathered until the next flush. */
  private corked: WriteStream | undefined;

  private constructor(private readonly path: string, private stream: WriteStream, file: OpenedAuditFile, private readonly opts: AuditLogOptions) {
    this.maxBytes = opts.maxBytes && opts.maxBytes > 0 ? opts.maxBytes : 0;
    this.keep = Math.max(1, Math.floor(opts.keep ?? 5));
    this.now = opts.now ?? (() => new Date());
    this.bytes = file.size;
    this.dayEnds = file.firstRecordAt && nextLocalMidnight(file.firstRecordAt);
    this.watch(stream);
  }

  static async open(path: string, opts: AuditLogOptions): Promise<AuditLog> {
    await mkdir(dirname(path), { recursive: true, mode: 0o750 });
    const file = await openAuditFile(path);
    return new AuditLog(path, file.stream, file, opts);
  }

  write(record: AuditRecord): void {
    if (this.closed) return this.drop(1);
    this.accept(`${serializeAuditRecord(record, this.opts.secretsFor(sandboxIpOf(record)))}\n`);
  }

  /**
   * Lines a worker process serialized and redacted with its own live secrets (audit-sink.ts),
   * appended in order as write() appends: the same rotation, the same queue during a rotation.
   */
  writeLines(lines: readonly string[]): void {
    if (this.closed) return this.drop(lines.length);
    if (lines.length === 0) return;
    // A worker's batch as one line of many: one clock read, one length, one stream write, when
    // it fits the live file whole. A batch that would cross a rotation goes line by line, so
    // that each line lands in the file its own size and day decide.
    const batch = `${lines.join('\n')}\n`;
    const now = this.now().getTime();
    if (!this.rotation && !this.failing && !this.stream.destroyed && !this.due(batch, now)) return this.append(batch, now);
    for (const line of lines) this.accept(`${line}\n`);
  }

  private accept(line: string): void {
    const now = this.now().getTime();
    if (this.rotation) {
      this.queue.push({ line, at: now });
      return;
    }
    if (this.failing || this.stream.destroyed) return this.drop(1);
    if (this.due(line, now)) {
      this.queue.push({ line, at: now });
      this.rotate();
      return;
    }
    this.append(line, now);
  }

  /** Flushes every line written so far, queued ones included, and closes the file. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // A rotation's drain may start the next one; the queue is empty once none is running.
    while (this.rotation) await this.rotation;
    await endStream(this.stream);
  }

  private drop(n: number): void {
    const before = this.dropped;
    this.dropped += n;
    if (before === 0) this.opts.logger.warn({ path: this.path, closed: this.closed }, 'egress audit record dropped: the log is closed or failing');
  }

  /** Whether `line` must go to a new file: never for an empty one, and not while a failed rotation waits to retry. */
  private due(line: string, now: number): boolean {
    if (this.bytes === 0 || now < this.retryAt) return false;
    if (this.dayEnds !== undefined && now >= this.dayEnds) return true;
    return this.maxBytes > 0 && this.bytes + Buffer.byteLength(line) > this.maxBytes;
  }

  private append(line: string, now: number): void {
    if (this.dayEnds === undefined) this.dayEnds = nextLocalMidnight(new Date(now));
    this.bytes += Buffer.byteLength(line);
    const stream = this.stream;
    if (this.corked !== stream) {
      this.corked = stream;
      stream.cork();
      // Not unref'd: a line accepted is written even when nothing else keeps the process alive.
      // A stream ended meanwhile (a rotation, close) was uncorked by its end.
      setTimeout(() => {
        if (this.corked === stream) this.corked = undefined;
        stream.uncork();
      }, AUDIT_FLUSH_MS);
    }
    stream.write(line);
  }

  private rotate(): void {
    this.rotation = this.replaceFile()
      .then(() => {
        this.rotation = undefined;
        this.drain();
      })
      .catch((err: unknown) => {
        // replaceFile and drain catch their own failures; this is the backstop against an unhandled rejection.
        this.rotation = undefined;
        this.opts.logger.error({ err, path: this.path, queued: this.queue.length }, 'egress audit log rotation failed unexpectedly');
      });
  }

  /** Writes the queue in order to the live stream, stopping to rotate again if the file fills up. */
  private drain(): void {
    const queue = this.queue;
    this.queue = [];
    if (this.failing || this.stream.destroyed) return this.drop(queue.length);
    for (let i = 0; i < queue.length; i++) {
      const { line, at } = queue[i];
      if (this.due(line, at)) {
        // The rest waits, in order, for the next file; nothing else runs before this line.
        this.queue = queue.slice(i);
        return this.rotate();
      }
      this.append(line, at);
    }
  }

  /**
   * Renames the live file away, opens a new one, and ends the old stream once every line it
   * holds is in the old file. Never rejects: a failure is logged and the old stream, if it still
   * works, keeps taking lines (in the old file, or in path.1 when only the open failed).
   */
  private async replaceFile(): Promise<void> {
    try {
      await shiftRotated(this.path, this.keep, this.opts.fs ?? realRotationFs);
    } catch (err) {
      return this.failed(err, 'egress audit log could not be rotated; writing on to the current file');
    }
    let file: OpenedAuditFile;
    try {
      file = await openAuditFile(this.path);
    } catch (err) {
      return this.undoRename(err);
    }
    const old = this.stream;
    this.stream = file.stream;
    this.failing = false;
    this.bytes = file.size;
    this.dayEnds = file.firstRecordAt && nextLocalMidnight(file.firstRecordAt);
    this.watch(file.stream);
    // The rotation is done only when the old file holds every line accepted before it began.
    await endStream(old);
  }

  /** The live file was renamed to path.1 but no new one opened: put it back, so the old stream's file is the live file again. */
  private async undoRename(openErr: unknown): Promise<void> {
    try {
      await (this.opts.fs ?? realRotationFs).rename(`${this.path}.1`, this.path);
    } catch (err) {
      // The old stream keeps writing to path.1; the next rotation moves it on and switches to a new file.
      this.opts.logger.error({ err, path: `${this.path}.1` }, 'egress audit log: could not move the file back after a failed rotation');
      return this.failed(openErr, `egress audit log rotated but no new file could be opened; writing on to ${this.path}.1`);
    }
    this.failed(openErr, 'egress audit log: no new file could be opened; rotation undone, writing on to the current file');
  }

  private failed(err: unknown, msg: string): void {
    this.opts.logger.error({ err, path: this.path, retryInMs: ROTATION_RETRY_MS }, msg);
    this.retryAt = this.now().getTime() + ROTATION_RETRY_MS;
  }

  private watch(stream: WriteStream): void {
    stream.on('error', (err) => {
      if (stream !== this.stream) {
        this.opts.logger.error({ err, path: `${this.path}.1` }, 'egress audit log: the rotated file could not be flushed; its last records are lost');
        return;
      }
      if (!this.failing) this.opts.logger.error({ err, path: this.path }, 'egress audit log cannot be written; records are being lost');
      this.failing = true;
    });
  }
}

/** The address of the sandbox a record is of; undefined for a record of none (an audit gap). */
export function sandboxIpOf(record: AuditRecord): string | undefined {
  return 'sandbox_ip' in record ? record.sandbox_ip : undefined;
}

/** A record as one audit line (without its newline), every live secret in it redacted. */
export function serializeAuditRecord(record: AuditRecord, secrets: Iterable<string>): string {
  // A sandbox's long path or Host is cut (audit-caps.ts); such a record is rare, and goes by JSON.
  const capped = capAuditRecord(record, (value) => redactSecrets(value, secrets));
  // Request records (the ones without a type) are most of them: written by hand, the rest by JSON.
  const json = capped !== record || 'type' in record ? JSON.stringify(capped) : requestRecordJson(record);
  return redactSecrets(json, secrets);
}

/** One compiled redactor per set of secrets given (the policy store's set, liveSecretsOf's list). */
const redactors = new WeakMap<Iterable<string>, (line: string) => string>();

/**
 * A line with every secret, raw or as JSON escapes it, replaced by REDACTED. Callers never put
 * secrets in records; this is the second line of defence. The secrets are compiled once per
 * iterable into one regular expression: searched one by one they cost 0.33 µs each per line,
 * 327 µs a record with 1,000 sandboxes' secrets live, against 0.14 µs compiled. So the iterable
 * must not change once given: a new one is given when the secrets change.
 */
export function redactSecrets(line: string, secrets: Iterable<string>): string {
  let redact = redactors.get(secrets);
  if (redact === undefined) {
    redact = compileRedactor(secrets);
    redactors.set(secrets, redact);
  }
  return redact(line);
}

function compileRedactor(secrets: Iterable<string>): (line: string) => string {
  const forms = new Set<string>();
  for (const secret of secrets) {
    // Shorter ones (a vault value, a proxy password: inject literals are refused shorter) would
    // take every `"`, address or id that holds them out of every line of the node, whoever's.
    if (secret.length < MIN_SECRET_LENGTH) continue;
    forms.add(secret);
    forms.add(JSON.stringify(secret).slice(1, -1));
  }
  if (forms.size === 0) return (line) => line;
  // Longest first, so that a secret holding another is replaced whole.
  const sorted = [...forms].sort((a, b) => b.length - a.length);
  let pattern: RegExp;
  try {
    pattern = new RegExp(sorted.map((f) => f.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
  } catch {
    // Too many to compile (the pattern's size is bounded): one by one, as slow as ever but whole.
    return (line) => {
      let out = line;
      for (const form of sorted) if (out.includes(form)) out = out.split(form).join(REDACTED);
      return out;
    };
  }
  return (line) => line.replace(pattern, () => REDACTED);
}

/** The local offset of one UTC minute (offsets change only on whole minutes), and its text. */
let offsetMinute = Number.NaN;
let offsetMin = 0;
let offsetText = '';
/** The last timestamp made, and its millisecond. */
let textMs = Number.NaN;
let text = '';

/**
 * ISO 8601 with the local numeric offset, e.g. 2026-11-26T10:04:34.123+01:00. The offset is
 * looked up once a minute: getTimezoneOffset asks the time zone database, which cost about 3 µs
 * of each egress request's CPU when done for every record.
 */
export function auditTimestamp(d?: Date): string {
  const ms = d ? d.getTime() : Date.now();
  // Thousands of records a second share their millisecond: the text is made once for each.
  if (ms === textMs) return text;
  const minute = Math.floor(ms / 60_000);
  if (minute !== offsetMinute) {
    offsetMinute = minute;
    offsetMin = -(d ?? new Date(ms)).getTimezoneOffset();
    const abs = Math.abs(offsetMin);
    const pad = (n: number) => String(n).padStart(2, '0');
    offsetText = `${offsetMin >= 0 ? '+' : '-'}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
  }
  textMs = ms;
  text = `${new Date(ms + offsetMin * 60_000).toISOString().slice(0, 23)}${offsetText}`;
  return text;
}
