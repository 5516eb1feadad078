/** `svc sandbox logs <id>`: the sandbox's own log (envd's lines and its boots), as its node keeps it. */
import { Command, Option } from 'commander';
import { Sandbox, type LogLevel, type SandboxLogEntry, type SandboxLogsOpts } from '@svc/sdk';
import { contextOf, type Context } from '../context.ts';
import { parseCount } from '../parse.ts';

interface LogsFlags {
  limit?: string;
  level?: LogLevel;
  search?: string;
  newestFirst?: boolean;
}

export function sandboxLogsCommand(): Command {
  return new Command('logs')
    .argument('<id>')
    .description("print a sandbox's log (envd's lines and its boots), oldest first")
    .option('--limit <n>', 'at most this many entries (the server takes 1 to 1000; default 1000)')
    .addOption(new Option('--level <level>', 'the lowest level shown').choices(['debug', 'info', 'warn', 'error']))
    .option('--search <text>', 'only entries whose message holds this text (case-sensitive)')
    .option('--newest-first', 'the latest entries, newest first')
    .action(async (id: string, flags: LogsFlags, c: Command) => printLogs(contextOf(c), id, flags));
}

async function printLogs(ctx: Context, id: string, f: LogsFlags): Promise<void> {
  const opts: SandboxLogsOpts = { ...ctx.conn, ...(f.newestFirst ? { direction: 'backward' as const } : {}) };
  if (f.limit !== undefined) opts.limit = parseCount(f.limit, '--limit');
  if (f.level) opts.level = f.level;
  if (f.search !== undefined) opts.search = f.search;
  const entries = await Sandbox.getLogs(id, opts);
  ctx.out.result(entries, () => {
    if (entries.length === 0) ctx.out.line('no log entries');
    for (const e of entries) ctx.out.line(formatEntry(e));
  });
}

/** `<time> <LEVEL> [logger] message key=value...` */
function formatEntry(e: SandboxLogEntry): string {
  const { logger, ...rest } = e.fields;
  const extra = Object.entries(rest).map(([k, v]) => ` ${k}=${v}`).join('');
  return `${e.timestamp.toISOString()} ${e.level.toUpperCase().padEnd(5)} ${logger ? `[${logger}] ` : ''}${e.message}${extra}`;
}
