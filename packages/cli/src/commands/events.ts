/** `svc events [sandbox]`: the team's sandbox lifecycle events, a page of them or followed as they happen. */
import { Command } from 'commander';
import {
  Events, SANDBOX_EVENT_TYPES, type SandboxEvent, type SandboxEventData, type SandboxEventFollowOpts, type SandboxEventListOpts,
} from '@svc/sdk';
import { contextOf, type Context } from '../context.ts';
import { UsageError } from '../errors.ts';
import { formatPairs, type Column } from '../output.ts';
import { collect, parseCount, parseEventTypes, shortEventType } from '../parse.ts';

interface EventsFlags {
  follow?: boolean;
  type?: string[];
  limit?: string;
  asc?: boolean;
}

const LIST_MAX = 100;

export function eventsCommand(): Command {
  return new Command('events')
    .argument('[sandbox]', "only this sandbox's events")
    .description('list sandbox lifecycle events, newest first; --follow prints each new one as it happens')
    .option('-f, --follow', 'print the latest events oldest first, then each new one, until Ctrl-C (with --json: one JSON object a line)')
    .option('--type <type>', `only events of this type: ${SANDBOX_EVENT_TYPES.map(shortEventType).join(', ')} (repeatable, or a comma list)`, collect)
    .option('--limit <n>', `at most this many events, 1 to ${LIST_MAX} (default 10); with --follow, how many past ones to print first (0: none)`)
    .option('--asc', 'oldest first')
    .action(async (sandbox: string | undefined, flags: EventsFlags, c: Command) => {
      const ctx = contextOf(c);
      const types = parseEventTypes(flags.type, '--type');
      const limit = flags.limit === undefined ? undefined : parseCount(flags.limit, '--limit');
      if (limit !== undefined && (limit > LIST_MAX || (limit === 0 && !flags.follow))) {
        throw new UsageError(`--limit must be from ${flags.follow ? 0 : 1} to ${LIST_MAX} (got ${limit})`);
      }
      if (sandbox === '') throw new UsageError('SANDBOX must not be empty');
      const opts = { ...ctx.conn, ...(sandbox === undefined ? {} : { sandboxId: sandbox }), ...(types ? { types } : {}) };
      if (flags.follow) await followEvents(ctx, opts, limit ?? 10);
      else await listEvents(ctx, { ...opts, ...(limit === undefined ? {} : { limit }), ...(flags.asc ? { orderAsc: true } : {}) });
    });
}

/** The widths, for --follow: a time without milliseconds, the longest type, a sandbox id, a UUID. */
const COLUMNS: Column<SandboxEvent>[] = [
  { header: 'TIME', value: (e) => new Date(e.timestamp), width: 20 },
  { header: 'TYPE', value: (e) => shortEventType(e.type), width: Math.max(...SANDBOX_EVENT_TYPES.map((t) => shortEventType(t).length)) },
  { header: 'SANDBOX', value: (e) => e.sandboxId, width: 20 },
  { header: 'EXECUTION', value: (e) => e.sandboxExecutionId, width: 36 },
  { header: 'DATA', value: (e) => eventSummary(e.eventData) },
];

async function listEvents(ctx: Context, opts: SandboxEventListOpts): Promise<void> {
  const events = await Events.list(opts);
  ctx.out.result(events, () => ctx.out.table(events, COLUMNS, 'no events'));
}

/** Until Ctrl-C (or SIGTERM), which ends the command as a success: stopping is how it is used. */
async function followEvents(ctx: Context, opts: SandboxEventFollowOpts, backlog: number): Promise<void> {
  const abort = new AbortController();
  const stop = () => abort.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    const events = Events.follow({ ...opts, backlog, pollIntervalMs: pollInterval(), signal: abort.signal });
    if (ctx.out.json) {
      for await (const e of events) ctx.out.line(JSON.stringify(e));
      return;
    }
    const print = ctx.out.streamTable(COLUMNS);
    for await (const e of events) print(e);
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}

/** How often the events are asked for: SVC_POLL_INTERVAL_MS, default 1000 ms. */
function pollInterval(): number {
  const ms = Number(process.env.SVC_POLL_INTERVAL_MS);
  return Number.isInteger(ms) && ms > 0 ? ms : 1000;
}

/** What the event's data says, as `key=value` words. */
function eventSummary(d: SandboxEventData | null): string {
  if (!d) return '';
  const words: string[] = [];
  if (d.reason) words.push(`reason=${d.reason}`);
  if (d.set_timeout) words.push(`ends=${d.set_timeout}`);
  if (d.execution) {
    const x = d.execution;
    words.push(`ran=${duration(x.execution_time)}`, `vcpus=${x.vcpu_count}`, `memory=${x.memory_mb}MiB`);
  }
  if (d.snapshot_id) words.push(`snapshot=${d.snapshot_id}`);
  if (d.sandbox_metadata && Object.keys(d.sandbox_metadata).length) words.push(`metadata=${formatPairs(d.sandbox_metadata)}`);
  return words.join(' ');
}

/** `850ms`, `12.3s`, `4m05s`, `2h03m`. */
function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, '0')}m`;
}
