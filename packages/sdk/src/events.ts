/**
 * `Events`: the team's sandbox lifecycle events (E2B's `/events/sandboxes`, @svc/contracts/events),
 * listed a page at a time or followed as they happen. An event is in E2B's wire shape, the one a
 * webhook receives (webhooks.ts), so one type serves both.
 *
 * Errors: a bad option is refused here, before any request (InvalidArgumentError); a sandbox the
 * team does not have is a SandboxNotFoundError.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  EVENT_LIMITS, SANDBOX_EVENT_TYPES, type SandboxEventData, type SandboxEventType, type SandboxExecution, type WireSandboxEvent,
} from '@svc/contracts/events';
import { ApiClient } from './api-client.ts';
import { InvalidArgumentError, SandboxNotFoundError } from './errors.ts';
import type { SandboxApiOpts } from './types.ts';

/** One lifecycle event, as listed and as POSTed to a webhook. */
export type SandboxEvent = WireSandboxEvent;
export type { SandboxEventData, SandboxEventType, SandboxExecution };

export interface SandboxEventListOpts extends SandboxApiOpts {
  /** Only this sandbox's events. */
  sandboxId?: string;
  /** Events to skip, 0 or more. Default 0. */
  offset?: number;
  /** 1 to 100. Default 10. */
  limit?: number;
  /** Oldest first. Default false: newest first. */
  orderAsc?: boolean;
  /** Only events of these types. Default: every type. */
  types?: SandboxEventType[];
}

export interface SandboxEventFollowOpts extends Omit<SandboxEventListOpts, 'offset' | 'limit' | 'orderAsc'> {
  /**
   * How many of the events that happened before the follow started to yield first, the latest
   * ones, oldest first (as `tail -n`). Default 0: only events from then on.
   */
  backlog?: number;
  /** How often the API is asked, in milliseconds. Default 1000. */
  pollIntervalMs?: number;
  /**
   * How long, in milliseconds, an event may show up in the list after a later one has (two
   * masters' clocks, a slow commit): such an event is still yielded, after the later one.
   * Default 2000.
   */
  lateMs?: number;
}

/** The first page of a poll is small: usually nothing has happened since the last. */
const FIRST_PAGE = 10;
const DEFAULT_POLL_MS = 1000;
const DEFAULT_LATE_MS = 2000;

function wholeNumber(value: unknown, what: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(`${what} must be a whole number from ${min}${max === Number.MAX_SAFE_INTEGER ? '' : ` to ${max}`} (got ${String(value)})`);
  }
  return value;
}

/** The types, each one of SANDBOX_EVENT_TYPES. */
export function checkEventTypes(types: unknown, what = 'types'): SandboxEventType[] {
  if (!Array.isArray(types)) throw new InvalidArgumentError(`${what} must be a list of event types`);
  for (const t of types) {
    if (!(SANDBOX_EVENT_TYPES as readonly unknown[]).includes(t)) {
      throw new InvalidArgumentError(`${what}: unknown event type ${JSON.stringify(t)}; one of ${SANDBOX_EVENT_TYPES.join(', ')}`);
    }
  }
  return types as SandboxEventType[];
}

function checkSandboxId(sandboxId: unknown): string {
  if (typeof sandboxId !== 'string' || sandboxId === '') throw new InvalidArgumentError('sandboxId must be a non-empty string');
  return sandboxId;
}

/** The query the routes take; `types` repeated, as the master's schema reads a list. */
function listQuery(opts: SandboxEventListOpts): URLSearchParams {
  const q = new URLSearchParams();
  if (opts.offset !== undefined) q.set('offset', String(wholeNumber(opts.offset, 'offset', 0)));
  if (opts.limit !== undefined) q.set('limit', String(wholeNumber(opts.limit, 'limit', 1, EVENT_LIMITS.listMax)));
  if (opts.orderAsc !== undefined) {
    if (typeof opts.orderAsc !== 'boolean') throw new InvalidArgumentError('orderAsc must be true or false');
    q.set('orderAsc', String(opts.orderAsc));
  }
  if (opts.types !== undefined) for (const t of checkEventTypes(opts.types)) q.append('types', t);
  return q;
}

/** An unreadable timestamp (never the master's) counts as the oldest there is: NaN would break the window's arithmetic. */
const millis = (e: SandboxEvent) => Date.parse(e.timestamp) || 0;
/** The list's own order: time, then id (ids are time-ordered, UUIDv7). */
const byTime = (a: SandboxEvent, b: SandboxEvent) => millis(a) - millis(b) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

export class Events {
  /** A page of the team's events, or of one sandbox's (`sandboxId`), newest first unless `orderAsc`. */
  static async list(opts: SandboxEventListOpts = {}): Promise<SandboxEvent[]> {
    const query = listQuery(opts);
    const api = new ApiClient(opts);
    const listed = opts.sandboxId === undefined
      ? await api.request('GET', '/events/sandboxes', { query, signal: opts.signal })
      : await api.request('GET', '/events/sandboxes/{sandboxID}', {
        params: { sandboxID: checkSandboxId(opts.sandboxId) }, query, notFound: SandboxNotFoundError, signal: opts.signal,
      });
    return Array.isArray(listed) ? listed : [];
  }

  /**
   * The events as they happen, oldest first, each once, until `signal` aborts (the iteration then
   * ends) or a request fails (it throws). The list is asked every `pollIntervalMs`.
   *
   * The API has no "since" parameter, and the offsets of an oldest-first list move when old events
   * are pruned, so each poll reads newest first down to the newest event already seen (less
   * `lateMs`), keeping the ids seen in that window to yield none twice.
   */
  static follow(opts: SandboxEventFollowOpts = {}): AsyncGenerator<SandboxEvent, void, undefined> {
    const { backlog = 0, pollIntervalMs = DEFAULT_POLL_MS, lateMs = DEFAULT_LATE_MS, ...listOpts } = opts;
    // Checked now, not at the first `next()`: a generator's body waits for that.
    wholeNumber(backlog, 'backlog', 0, EVENT_LIMITS.listMax);
    wholeNumber(pollIntervalMs, 'pollIntervalMs', 1);
    wholeNumber(lateMs, 'lateMs', 0);
    if (listOpts.sandboxId !== undefined) checkSandboxId(listOpts.sandboxId);
    if (listOpts.types !== undefined) checkEventTypes(listOpts.types);
    const tail = new EventTail(lateMs, (offset, limit) => Events.list({ ...listOpts, offset, limit, orderAsc: false }));
    return followTail(tail, backlog, pollIntervalMs, opts.signal);
  }
}

async function* followTail(tail: EventTail, backlog: number, pollIntervalMs: number, signal: AbortSignal | undefined): AsyncGenerator<SandboxEvent, void, undefined> {
  try {
    for (const e of await tail.start(backlog)) yield e;
    while (!signal?.aborted) {
      await sleep(pollIntervalMs, undefined, { signal });
      for (const e of await tail.poll()) yield e;
    }
  } catch (err) {
    // Aborting is how a follow is stopped, whatever it was waiting for then.
    if (signal?.aborted) return;
    throw err;
  }
}

/** What a follow has seen: the newest event's time, and the ids of those near it. */
class EventTail {
  /** Event id → its time in milliseconds; only those within `lateMs` of `newest`. */
  private readonly seen = new Map<string, number>();
  private newest = -Infinity;

  constructor(
    private readonly lateMs: number,
    private readonly page: (offset: number, limit: number) => Promise<SandboxEvent[]>,
  ) {}

  /** Marks what is there as seen; answers the latest `backlog` of it, oldest first. */
  async start(backlog: number): Promise<SandboxEvent[]> {
    const found = await this.read(backlog, true);
    const shown = found.slice(0, backlog).sort(byTime);
    this.remember(found);
    return shown;
  }

  /** The events not seen before, oldest first. */
  async poll(): Promise<SandboxEvent[]> {
    const fresh = (await this.read(0, false)).filter((e) => !this.seen.has(e.id));
    this.remember(fresh);
    return fresh.sort(byTime);
  }

  /**
   * The newest events down to the window's lower edge (and at least `atLeast` of them), newest
   * first. At the start the window is the one below the newest event there is; after a start that
   * found none, everything listed is new.
   */
  private async read(atLeast: number, starting: boolean): Promise<SandboxEvent[]> {
    const found: SandboxEvent[] = [];
    const ids = new Set<string>();
    let floor = this.newest - this.lateMs;
    let offset = 0;
    let limit = Math.max(FIRST_PAGE, atLeast);
    for (;;) {
      const page = await this.page(offset, limit);
      if (starting && offset === 0 && page.length > 0) floor = millis(page[0]) - this.lateMs;
      let belowFloor = false;
      let added = 0;
      for (const e of page) {
        if (millis(e) < floor && found.length >= atLeast) {
          belowFloor = true;
          break;
        }
        // Events that arrive between two pages push the next page's start back: the same event twice.
        if (!ids.has(e.id)) {
          ids.add(e.id);
          found.push(e);
          added++;
        }
      }
      // A page of nothing new would be read again and again from a server that ignored the offset.
      if (belowFloor || page.length < limit || added === 0) return found;
      offset += page.length;
      limit = EVENT_LIMITS.listMax;
    }
  }

  private remember(events: SandboxEvent[]): void {
    for (const e of events) {
      this.seen.set(e.id, millis(e));
      this.newest = Math.max(this.newest, millis(e));
    }
    const floor = this.newest - this.lateMs;
    for (const [id, at] of this.seen) if (at < floor) this.seen.delete(id);
  }
}
