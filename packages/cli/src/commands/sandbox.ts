/** `svc sandbox ...`: create, list, inspect, pause, connect, time out, kill and exec. */
import { Command, Option } from 'commander';
import { CommandExitError, Sandbox, ServiceBusyError, type CommandHandle, type ConnectionOpts, type SandboxInfo, type SandboxOpts } from '@svc/sdk';
import { contextOf, type Context } from '../context.ts';
import { CliError } from '../errors.ts';
import { formatPairs } from '../output.ts';
import { collect, parsePairs, parseSeconds, parseStates, secondsToMs, shellCommand } from '../parse.ts';

interface CreateFlags {
  template?: string;
  timeout?: string;
  metadata?: string[];
  env?: string[];
  onTimeout?: 'kill' | 'pause';
  autoResume?: boolean;
  internet: boolean;
  private?: boolean;
}

export function sandboxCommand(): Command {
  const cmd = new Command('sandbox').alias('sbx').description('create and manage sandboxes');

  cmd.command('create')
    .description('create a sandbox')
    .option('-t, --template <template>', 'template id or alias (default: SVC_TEMPLATE_ID, else base)')
    .option('--timeout <seconds>', 'idle timeout in seconds; -1 never, 0 immediate')
    .option('--metadata <key=value>', 'metadata pair (repeatable)', collect)
    .option('--env <key=value>', 'environment variable (repeatable)', collect)
    .addOption(new Option('--on-timeout <action>', 'what happens at the idle timeout').choices(['kill', 'pause']))
    .option('--auto-resume', 'resume on the next request when paused (needs --on-timeout pause)')
    .option('--no-internet', 'deny outbound internet access')
    .option('--private', 'require the traffic access token on every data-plane request')
    .action(async (flags: CreateFlags, c: Command) => createSandbox(contextOf(c), flags));

  cmd.command('list').alias('ls')
    .description('list running and paused sandboxes')
    .option('--state <states>', 'comma list of running, paused')
    .option('--metadata <key=value>', 'metadata filter (repeatable)', collect)
    .action(async (flags: { state?: string; metadata?: string[] }, c: Command) => listSandboxes(contextOf(c), flags));

  cmd.command('info <id>')
    .description('show one sandbox')
    .action(async (id: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const info = await Sandbox.getInfo(id, ctx.conn);
      ctx.out.result(info, () => printInfo(ctx, info));
    });

  cmd.command('pause <id>')
    .description('pause a running sandbox')
    .action(async (id: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const paused = await Sandbox.pause(id, ctx.conn);
      ctx.out.result({ sandboxId: id, paused, alreadyPaused: !paused }, () =>
        ctx.out.line(paused ? `paused ${id}` : `${id} was already paused`));
    });

  cmd.command('connect <id>')
    .description('connect to a sandbox, resuming it when paused')
    .option('--timeout <seconds>', 'make sure at least this many seconds remain; -1 never times out')
    .action(async (id: string, flags: { timeout?: string }, c: Command) => {
      const ctx = contextOf(c);
      const timeoutMs = flags.timeout === undefined ? undefined : secondsToMs(parseSeconds(flags.timeout, '--timeout'));
      await Sandbox.connect(id, { ...ctx.conn, timeoutMs });
      const info = await Sandbox.getInfo(id, ctx.conn);
      ctx.out.result(info, () => printInfo(ctx, info));
    });

  cmd.command('timeout <id> <seconds>')
    .description('set the idle timeout (-1: never)')
    .action(async (id: string, seconds: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const s = parseSeconds(seconds, 'SECONDS');
      await Sandbox.setTimeout(id, secondsToMs(s), ctx.conn);
      ctx.out.result({ sandboxId: id, timeout: s }, () =>
        ctx.out.line(s === -1 ? `${id} never times out` : `${id} times out after ${s} idle seconds`));
    });

  cmd.command('kill <id>')
    .description('kill a sandbox')
    .action(async (id: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const killed = await killWhenSettled(id, ctx.conn);
      if (!killed) throw new CliError(`sandbox ${id} not found`);
      ctx.out.result({ sandboxId: id, killed }, () => ctx.out.line(`killed ${id}`));
    });

  cmd.command('exec <id> <command...>')
    .description('run a command in the sandbox (after --), streaming its output; exits with its exit code')
    .option('--cwd <dir>', 'working directory')
    .option('--user <user>', 'user to run as')
    .option('--env <key=value>', 'environment variable (repeatable)', collect)
    .option('-i, --stdin', "pass this command's standard input to the command (until EOF)")
    .action(async (id: string, words: string[], flags: ExecFlags, c: Command) =>
      execCommand(contextOf(c), id, words, flags));

  return cmd;
}

const KILL_ATTEMPTS = 5;

/** A kill answered 503 (the sandbox is pausing or locked) is retried after Retry-After. */
async function killWhenSettled(id: string, conn: ConnectionOpts): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await Sandbox.kill(id, conn);
    } catch (err) {
      if (!(err instanceof ServiceBusyError) || attempt >= KILL_ATTEMPTS) throw err;
      await new Promise((r) => setTimeout(r, (err.retryAfterSec ?? 2) * 1000));
    }
  }
}

async function createSandbox(ctx: Context, f: CreateFlags): Promise<void> {
  const opts: SandboxOpts = { ...ctx.conn };
  if (f.timeout !== undefined) opts.timeoutMs = secondsToMs(parseSeconds(f.timeout, '--timeout'));
  opts.metadata = parsePairs(f.metadata, '--metadata');
  opts.envs = parsePairs(f.env, '--env');
  if (f.onTimeout || f.autoResume) opts.lifecycle = { onTimeout: f.onTimeout, autoResume: f.autoResume };
  if (!f.internet) opts.allowInternetAccess = false;
  if (f.private) opts.network = { allowPublicTraffic: false };
  const sbx = f.template ? await Sandbox.create(f.template, opts) : await Sandbox.create(opts);
  const info = await Sandbox.getInfo(sbx.sandboxId, ctx.conn);
  const result = { ...info, ...(sbx.trafficAccessToken ? { trafficAccessToken: sbx.trafficAccessToken } : {}) };
  ctx.out.result(result, () => {
    printInfo(ctx, info);
    if (sbx.trafficAccessToken) ctx.out.fields([['traffic token', sbx.trafficAccessToken]]);
  });
}

async function listSandboxes(ctx: Context, f: { state?: string; metadata?: string[] }): Promise<void> {
  const pager = Sandbox.list({ ...ctx.conn, query: { state: parseStates(f.state), metadata: parsePairs(f.metadata, '--metadata') } });
  const all: SandboxInfo[] = [];
  while (pager.hasNext) all.push(...(await pager.nextItems()));
  ctx.out.result(all, () =>
    ctx.out.table(all, [
      { header: 'ID', value: (s) => s.sandboxId },
      { header: 'TEMPLATE', value: (s) => s.name ?? s.templateId },
      { header: 'STATE', value: (s) => s.state },
      { header: 'STARTED', value: (s) => s.startedAt },
      { header: 'ENDS', value: (s) => s.endAt ?? 'never' },
      { header: 'METADATA', value: (s) => formatPairs(s.metadata) },
    ], 'no sandboxes'));
}

function printInfo(ctx: Context, s: SandboxInfo): void {
  ctx.out.fields([
    ['id', s.sandboxId],
    ['template', s.name ? `${s.templateId} (${s.name})` : s.templateId],
    ['state', s.pauseKind ? `${s.state} (${s.pauseKind})` : s.state],
    ['started', s.startedAt],
    ['ends', s.endAt ?? 'never'],
    ['timeout', s.timeout === undefined ? undefined : s.timeout === -1 ? 'never' : `${s.timeout}s`],
    ['on timeout', s.lifecycle ? `${s.lifecycle.onTimeout}${s.lifecycle.autoResume ? ', auto-resume' : ''}` : undefined],
    ['cpu', s.cpuCount],
    ['memory', `${s.memoryMB} MiB`],
    ['internet', s.allowInternetAccess === false ? 'denied' : undefined],
    ['public traffic', s.network?.allowPublicTraffic === false ? 'token required' : undefined],
    ['metadata', formatPairs(s.metadata)],
    ['volumes', s.volumeMounts.length ? s.volumeMounts.map((v) => `${v.name}:${v.path}${v.readOnly ? ':ro' : ''}`).join(',') : undefined],
  ]);
}

interface ExecFlags { cwd?: string; user?: string; env?: string[]; stdin?: boolean }

async function execCommand(ctx: Context, id: string, words: string[], f: ExecFlags): Promise<void> {
  const sbx = await Sandbox.connect(id, ctx.conn);
  const streaming = !ctx.out.json;
  let result: { exitCode: number; stdout: string; stderr: string; error?: string };
  try {
    const handle = await sbx.commands.run(shellCommand(words), {
      background: true,
      stdin: !!f.stdin,
      cwd: f.cwd,
      user: f.user,
      envs: parsePairs(f.env, '--env'),
      timeoutMs: 0,
      onStdout: streaming ? (d) => { process.stdout.write(d); } : undefined,
      onStderr: streaming ? (d) => { process.stderr.write(d); } : undefined,
    });
    if (f.stdin) void pumpStdin(handle);
    result = await handle.wait();
  } catch (err) {
    if (!(err instanceof CommandExitError)) throw err;
    result = { exitCode: err.exitCode, stdout: err.stdout, stderr: err.stderr, error: err.error };
  }
  if (f.stdin) process.stdin.destroy();
  if (!streaming) ctx.out.line(JSON.stringify(result, null, 2));
  // a command killed by a signal has no exit code (envd reports -1): fail with 1
  process.exitCode = result.exitCode < 0 ? 1 : Math.min(result.exitCode, 255);
}

/**
 * Feeds our standard input to the command in order, then EOF. A command that ends before its
 * input does makes the remaining sends fail; its exit status is what counts then.
 */
async function pumpStdin(handle: CommandHandle): Promise<void> {
  try {
    for await (const chunk of process.stdin) await handle.sendStdin(chunk as Buffer);
    await handle.closeStdin();
  } catch {
    /* the command already ended */
  }
}
