/**
 * A sandbox's own log, shared by everyone who writes, reads or answers it: the line format that
 * envd and the node agent write to the sandbox's console file (the node agent reads it back),
 * the check of a logs query (the master and the node agent's fake; the node agent checks it with
 * its route's schema, node-agent-schemas.ts, to the same bounds), and which entries answer a
 * query. The wire types are the node agent's (node-agent-types.ts); this module imports nothing
 * else of theirs, so that envd, which writes the lines, bundles only this.
 */
import { badRequest } from '@svc/common/errors';
import type { LogLevel, SandboxLogEntry, SandboxLogsQuery } from './node-agent-types.ts';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const satisfies readonly LogLevel[];
export const LOG_DIRECTIONS = ['forward', 'backward'] as const satisfies readonly NonNullable<SandboxLogsQuery['direction']>[];

/** Bounds of a logs query and of what one answer holds (docs/api.md, "Sandbox logs"). */
export const SANDBOX_LOG_LIMITS = {
  maxEntries: 1000,
  /** E2B's default for both of its logs routes. */
  defaultEntries: 1000,
  searchMaxChars: 256,
  /** A longer message is cut, by envd when it writes and by the reader. */
  messageMaxChars: 8192,
  /** The reader holds at most this much of one console line (a longer one is cut). */
  lineMaxBytes: 64 * 1024,
} as const;

/** A logs query checked, with its defaults. */
export type SandboxLogSelection = Required<Pick<SandboxLogsQuery, 'limit' | 'direction'>> & Pick<SandboxLogsQuery, 'cursor' | 'level' | 'search'>;

/** Checks a logs query (numbers, or the text of a query string); 400 naming the field. */
export function parseSandboxLogsQuery(q: Record<string, unknown>): SandboxLogSelection {
  const cursor = integer(q.cursor, 'cursor', 0, Number.MAX_SAFE_INTEGER);
  const limit = integer(q.limit, 'limit', 1, SANDBOX_LOG_LIMITS.maxEntries) ?? SANDBOX_LOG_LIMITS.defaultEntries;
  const direction = oneOf(q.direction, 'direction', LOG_DIRECTIONS) ?? 'forward';
  const level = oneOf(q.level, 'level', LOG_LEVELS);
  let search: string | undefined;
  if (q.search !== undefined && q.search !== '') {
    if (typeof q.search !== 'string') throw badRequest('search must be a string');
    if (q.search.length > SANDBOX_LOG_LIMITS.searchMaxChars) throw badRequest(`search must be at most ${SANDBOX_LOG_LIMITS.searchMaxChars} characters`);
    search = q.search;
  }
  return { limit, direction, ...(cursor === undefined ? {} : { cursor }), ...(level ? { level } : {}), ...(search === undefined ? {} : { search }) };
}

function integer(v: unknown, field: string, min: number, max: number): number | undefined {
  if (v === undefined || v === '') return undefined;
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d{1,16}$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw badRequest(`${field} must be an integer from ${min} to ${max}`);
  return n;
}

function oneOf<T extends string>(v: unknown, field: string, allowed: readonly T[]): T | undefined {
  if (v === undefined || v === '') return undefined;
  if (!allowed.includes(v as T)) throw badRequest(`${field} must be one of ${allowed.join(', ')}`);
  return v as T;
}

const rank = (l: LogLevel) => LOG_LEVELS.indexOf(l);

/**
 * The entries that answer a query, offered one at a time in the order they were written:
 * forward keeps the first `limit` that match, backward the last `limit`, newest first. Holds
 * at most `limit` entries whatever it is offered.
 */
export class SandboxLogPicker {
  private readonly picked: SandboxLogEntry[] = [];

  constructor(private readonly q: SandboxLogSelection) {}

  /** False once no later entry can change the answer. */
  offer(e: SandboxLogEntry): boolean {
    if (!this.matches(e)) return true;
    this.picked.push(e);
    if (this.q.direction === 'forward') return this.picked.length < this.q.limit;
    if (this.picked.length > this.q.limit) this.picked.shift();
    return true;
  }

  answer(): SandboxLogEntry[] {
    return this.q.direction === 'forward' ? this.picked : [...this.picked].reverse();
  }

  private matches(e: SandboxLogEntry): boolean {
    const { cursor, level, search, direction } = this.q;
    if (cursor !== undefined) {
      const at = Date.parse(e.timestamp);
      if (direction === 'forward' ? at < cursor : at > cursor) return false;
    }
    if (level && rank(e.level) < rank(level)) return false;
    return search === undefined || e.message.includes(search);
  }
}

/** Picks the answer to a query out of entries in the order they were written (the node agent's fake). */
export function pickSandboxLogs(entries: Iterable<SandboxLogEntry>, q: SandboxLogSelection): SandboxLogEntry[] {
  const picker = new SandboxLogPicker(q);
  for (const e of entries) if (!picker.offer(e)) break;
  return picker.answer();
}

/** An entry as the one line of JSON that E2B's v1 logs carry (`level`, `message` and the fields), which E2B's CLI parses. */
export function e2bLogLine(e: SandboxLogEntry): string {
  return JSON.stringify({ ...e.fields, level: e.level, message: e.message });
}

function cut(message: string): string {
  const max = SANDBOX_LOG_LIMITS.messageMaxChars;
  return message.length > max ? `${message.slice(0, max)}… (cut)` : message;
}

/** One console line as envd and the node agent write it: the entry as JSON. */
export function formatSandboxLogLine(e: SandboxLogEntry): string {
  return `${JSON.stringify({ ...e, message: cut(e.message) })}\n`;
}

/**
 * Console lines, in the order they were written, as entries. A line the format above wrote is
 * its entry. Any other line (runsc's own output, Node's dying words) has no time of its own: it
 * is an info entry with the time of the line before it, which it was written after; the node
 * agent marks every boot with a line of its own, so only a console written before svc marked
 * boots has no line before, and such leading lines are left out.
 */
export class SandboxLogLines {
  private lastTimestamp?: string;

  entry(line: string): SandboxLogEntry | undefined {
    const own = line.startsWith('{') ? ownEntry(line) : undefined;
    if (own) {
      this.lastTimestamp = own.timestamp;
      return own;
    }
    if (this.lastTimestamp === undefined || line.trim() === '') return undefined;
    return { timestamp: this.lastTimestamp, level: 'info', message: cut(line), fields: {} };
  }
}

function ownEntry(line: string): SandboxLogEntry | undefined {
  let v: Partial<Record<keyof SandboxLogEntry, unknown>>;
  try {
    v = JSON.parse(line) as typeof v;
  } catch {
    return undefined; // JSON-looking text that is not an entry: a plain line
  }
  if (typeof v?.timestamp !== 'string' || typeof v.message !== 'string' || Number.isNaN(Date.parse(v.timestamp))) return undefined;
  const level = LOG_LEVELS.includes(v.level as LogLevel) ? (v.level as LogLevel) : 'info';
  const fields: Record<string, string> = {};
  if (typeof v.fields === 'object' && v.fields !== null) {
    for (const [k, x] of Object.entries(v.fields)) fields[k] = typeof x === 'string' ? x : JSON.stringify(x);
  }
  return { timestamp: new Date(Date.parse(v.timestamp)).toISOString(), level, message: cut(v.message), fields };
}
