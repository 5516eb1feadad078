import type { Logger } from '@svc/common';
import type { EgressAuditDroppedRecord } from '@svc/contracts/egress-audit';
import { auditTimestamp, sandboxIpOf, type AuditRecord, type AuditSink } from './audit-log.ts';

/**
 * Records a sandbox may have written per second, on average and in a burst, per process that
 * serves it (with N workers, up to N times this: each worker has its buckets). Constants, not
 * settings: they bound what one sandbox costs the shared file (at the 1.2 KB a capped record
 * takes at most, 50 a second is 60 KB/s, about half an hour of one worker to fill the default
 * 100 MB file, against the 10 s one sandbox took without them), well above what a program
 * making requests one after another on the same host writes.
 */
const AUDIT_RECORDS_PER_SECOND = 50;
const AUDIT_BURST = 1_000;
/** How often the count of dropped records is written, one record per sandbox that lost some. */
const AUDIT_DROP_SUMMARY_MS = 10_000;

export interface AuditRateLimitOptions {
  perSecond?: number;
  burst?: number;
  summaryMs?: number;
  /** Milliseconds, monotonic; tests give their own clock. */
  now?: () => number;
}

interface Bucket {
  tokens: number;
  at: number;
  dropped: number;
  sandboxId?: string;
}

/**
 * A token bucket per sandbox address in front of an audit sink: a sandbox that sends requests
 * faster than its records may be written (a flood of denied requests, each a request record and
 * a security event) has the excess dropped and counted, and every AUDIT_DROP_SUMMARY_MS one
 * `audit_dropped` record per sandbox says how many, so the gap is in the file, never silent.
 * Records of no sandbox (an audit gap) always pass.
 */
export class AuditRateLimit implements AuditSink {
  private readonly buckets = new Map<string, Bucket>();
  private readonly perMs: number;
  private readonly burst: number;
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly sink: AuditSink, private readonly logger: Logger, o: AuditRateLimitOptions = {}) {
    this.perMs = (o.perSecond ?? AUDIT_RECORDS_PER_SECOND) / 1000;
    this.burst = o.burst ?? AUDIT_BURST;
    this.now = o.now ?? (() => performance.now());
    this.timer = setInterval(() => this.summarize(), o.summaryMs ?? AUDIT_DROP_SUMMARY_MS).unref();
  }

  write(record: AuditRecord): void {
    const ip = sandboxIpOf(record);
    if (ip === undefined) return this.sink.write(record);
    const now = this.now();
    let b = this.buckets.get(ip);
    if (!b) this.buckets.set(ip, b = { tokens: this.burst, at: now, dropped: 0 });
    b.tokens = Math.min(this.burst, b.tokens + (now - b.at) * this.perMs);
    b.at = now;
    if ('sandbox_id' in record && record.sandbox_id) b.sandboxId = record.sandbox_id;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      this.sink.write(record);
      return;
    }
    if (b.dropped === 0) this.logger.warn({ sandboxIp: ip, sandboxId: b.sandboxId }, 'egress audit: a sandbox is over its audit record rate; its records are dropped and counted (an audit_dropped record follows)');
    b.dropped++;
  }

  /** Writes the dropped counts and forgets the sandboxes whose bucket is full again. */
  summarize(): void {
    const now = this.now();
    for (const [ip, b] of this.buckets) {
      if (b.dropped > 0) {
        const summary: EgressAuditDroppedRecord = {
          type: 'audit_dropped', ts: auditTimestamp(), sandbox_ip: ip, ...(b.sandboxId ? { sandbox_id: b.sandboxId } : {}), dropped: b.dropped,
          detail: `${b.dropped} audit records of this sandbox were not written: over ${this.perMs * 1000} records/s (burst ${this.burst}) in this process`,
        };
        this.sink.write(summary);
        b.dropped = 0;
      } else if (Math.min(this.burst, b.tokens + (now - b.at) * this.perMs) >= this.burst) {
        this.buckets.delete(ip);
      }
    }
  }

  /** Writes what is still counted; the sink itself is the caller's to close. */
  close(): void {
    clearInterval(this.timer);
    this.summarize();
  }
}
