/** Helpers for the lifecycle manager's tests. */
import pino from 'pino';
import { REDACTED_PATHS, type Logger } from '@svc/common';

export interface LogCapture {
  logger: Logger;
  /** Parsed log records. */
  records(): Array<Record<string, unknown> & { msg: string }>;
  has(msg: string, fields?: Record<string, unknown>): boolean;
}

export function captureLogs(level = 'debug'): LogCapture {
  const lines: string[] = [];
  const logger = pino({ level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }, { write: (s: string) => { lines.push(s); } });
  const records = () => lines.map((l) => JSON.parse(l) as Record<string, unknown> & { msg: string });
  return {
    logger,
    records,
    has: (msg, fields = {}) => records().some((r) => r.msg === msg && Object.entries(fields).every(([k, v]) => r[k] === v)),
  };
}

export async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs = 5_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
