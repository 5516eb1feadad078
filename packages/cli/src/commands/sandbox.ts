/** `svc sandbox ...`: create, list, inspect, pause, connect, time out, kill, exec, run-code, snapshot, fork and logs. */
import { readFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import { parse as parseYaml } from 'yaml';
import {
  CommandExitError, Sandbox, SandboxError, ServiceBusyError, type CommandHandle, type ConnectionOpts, type SandboxForkOpts, type SandboxInfo,
  type EgressRule, type SandboxOpts,
} from '@svc/sdk';
import { contextOf, type Context } from '../context.ts';
import { CliError, errorLine, UsageError } from '../errors.ts';
import { formatPairs } from '../output.ts';
import { collect, parseCount, parsePairs, parseSeconds, parseStates, secondsToMs, shellCommand } from '../parse.ts';
import { sandboxLogsCommand } from './sandbox-logs.ts';
import { sandboxRunCodeCommand } from './sandbox-run-code.ts';

interface CreateFlags {
  template?: string;
  timeout?: string;
  metadata?: string[];
  env?: string[];
  onTimeout?: 'kill' | 'pause';
  autoResume?: boolean;
  /** false with --no-pause-memory. */
  pauseMemory: boolean;
  internet: boolean;
  private?: boolean;
  networkRules?: string;
  allowOut?: string[];
  denyOut?: string[];
  runtime?: 'gvisor' | 'microvm';
  nodeSelector?: string[];
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
    .option('--no-pause-memory', 'with --on-timeout pause: free the memory and keep the files at the timeout; connect boots it again (not with --auto-resume)')
    .option('--no-internet', 'deny outbound internet access')
    .option('--private', 'require the traffic access token on every data-plane request')
    .option('--network-rules <file>', 'egress rules: a JSON or YAML file holding a list of {name, match, action} (docs/egress.md)')
    .option('--allow-out <entry>', 'allow outbound traffic to a CIDR, an IP or a host name (repeatable)', collect)
    .option('--deny-out <entry>', 'deny outbound traffic to a CIDR or an IP (repeatable)', collect)
    .option('--node-selector <name=value>', 'run it on a node with this label (repeatable: all must hold; docs/cluster.md)', collect)
    .addOption(new Option('--runtime <kind>', "what runs it (default: the template's, else the node's; docs/runtimes.md)").choices(['gvisor', 'microvm']))
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
    .option('--no-memory', 'free its memory and keep its files: connect boots it again, traffic does not resume it')
    .action(async (id: string, flags: { memory: boolean }, c: Command) => {
      const ctx = contextOf(c);
      const paused = await Sandbox.pause(id, { ...ctx.conn, ...(flags.memory ? {} : { keepMemory: false }) });
      ctx.out.result({ sandboxId: id, paused, alreadyPaused: !paused, keepMemory: flags.memory }, () =>
        ctx.out.line(paused ? `paused ${id}${flags.memory ? '' : ' (memory freed, files kept)'}` : `${id} was already paused`));
    });

  cmd.command('connect <id>')
    .description('connect to a sandbox, resuming it when paused')
    .option('--timeout <seconds>', 'make sure at least this many seconds remain; -1 never times out')
    .option('--reboot', 'boot a paused sandbox again from its files instead of restoring its memory')
    .action(async (id: string, flags: { timeout?: string; reboot?: boolean }, c: Command) => {
      const ctx = contextOf(c);
      const timeoutMs = flags.timeout === undefined ? undefined : secondsToMs(parseSeconds(flags.timeout, '--timeout'));
      await Sandbox.connect(id, { ...ctx.conn, timeoutMs, ...(flags.reboot ? { onResume: 'reboot' as const } : {}) });
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

  cmd.command('snapshot <id>')
    .description("snapshot a running sandbox's files (it runs on) and print the snapshot id, which create --template takes")
    .option('--name <name>', "name it: letters, digits, '.', '_' and '-' (a later snapshot given the name takes it over)")
    .action(async (id: string, flags: { name?: string }, c: Command) => {
      const ctx = contextOf(c);
      if (flags.name !== undefined && !flags.name.trim()) throw new UsageError('--name must not be empty');
      const snapshot = await Sandbox.createSnapshot(id, { ...ctx.conn, ...(flags.name === undefined ? {} : { name: flags.name }) });
      ctx.out.result(snapshot, () => ctx.out.line(snapshot.snapshotId));
    });

  cmd.command('fork <id>')
    .description('start sandboxes from one capture of a running sandbox (it runs on); print their ids, exit 1 if any did not start')
    .option('--count <n>', 'how many (the server takes 1 to 10; default 1)')
    .option('--timeout <seconds>', 'their idle timeout in seconds; -1 never')
    .action(async (id: string, flags: { count?: string; timeout?: string }, c: Command) => forkSandbox(contextOf(c), id, flags));

  cmd.command('exec <id> <command...>')
    .description('run a command in the sandbox (after --), streaming its output; exits with its exit code')
    .option('--cwd <dir>', 'working directory')
    .option('--user <user>', 'user to run as')
    .option('--env <key=value>', 'environment variable (repeatable)', collect)
    .option('-i, --stdin', "pass this command's standard input to the command (until EOF)")
    .action(async (id: string, words: string[], flags: ExecFlags, c: Command) =>
      execCommand(contextOf(c), id, words, flags));

  cmd.addCommand(sandboxRunCodeCommand());
  cmd.addCommand(sandboxLogsCommand());

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

/** A list of rules in the form of docs/egress.md "Rules"; the SDK checks each rule before anything is sent. */
function readNetworkRules(file: string): EgressRule[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`--network-rules: cannot read ${file}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new UsageError(`--network-rules: ${file} is neither JSON nor YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  const rules = (doc as { rules?: unknown } | null)?.rules ?? doc;
  if (!Array.isArray(rules)) throw new UsageError(`--network-rules: ${file} must hold a list of rules {name, match, action} (or {rules: [...]})`);
  return rules as EgressRule[];
}

async function createSandbox(ctx: Context, f: CreateFlags): Promise<void> {
  const opts: SandboxOpts = { ...ctx.conn };
  if (f.timeout !== undefined) opts.timeoutMs = secondsToMs(parseSeconds(f.timeout, '--timeout'));
  opts.metadata = parsePairs(f.metadata, '--metadata');
  opts.envs = parsePairs(f.env, '--env');
  if (!f.pauseMemory && f.onTimeout !== 'pause') throw new UsageError('--no-pause-memory needs --on-timeout pause');
  if (!f.pauseMemory && f.autoResume) {
    throw new UsageError('--no-pause-memory cannot go with --auto-resume: a sandbox paused without its memory is resumed by connect, not by traffic');
  }
  if (f.onTimeout || f.autoResume) {
    const onTimeout = f.onTimeout === 'pause' && !f.pauseMemory ? { action: 'pause' as const, keepMemory: false } : f.onTimeout;
    opts.lifecycle = { onTimeout, autoResume: f.autoResume };
  }
  if (!f.internet) opts.allowInternetAccess = false;
  const network: NonNullable<SandboxOpts['network']> = {};
  if (f.private) network.allowPublicTraffic = false;
  if (f.allowOut?.length) network.allowOut = f.allowOut;
  if (f.denyOut?.length) network.denyOut = f.denyOut;
  if (f.networkRules) network.rules = readNetworkRules(f.networkRules);
  if (Object.keys(network).length) opts.network = network;
  if (f.runtime) opts.runtime = f.runtime;
  const selector = parsePairs(f.nodeSelector, '--node-selector');
  if (selector && Object.keys(selector).length) opts.nodeSelector = selector;
  const sbx = f.template ? await Sandbox.create(f.template, opts) : await Sandbox.create(opts);
  const info = await Sandbox.getInfo(sbx.sandboxId, ctx.conn);
  const result = { ...info, ...(sbx.trafficAccessToken ? { trafficAccessToken: sbx.trafficAccessToken } : {}) };
  ctx.out.result(result, () => {
    printInfo(ctx, info);
    if (sbx.trafficAccessToken) ctx.out.fields([['traffic token', sbx.trafficAccessToken]]);
  });
}

/**
 * Prints each fork's sandbox id on stdout, and each fork that did not start as one `svc:` line on
 * stderr; with --json, one entry per fork. Exits 1 when any did not start.
 */
async function forkSandbox(ctx: Context, id: string, f: { count?: string; timeout?: string }): Promise<void> {
  const opts: SandboxForkOpts = { ...ctx.conn };
  if (f.count !== undefined) opts.count = parseCount(f.count, '--count');
  if (f.timeout !== undefined) opts.timeoutMs = secondsToMs(parseSeconds(f.timeout, '--timeout'));
  const results = await Sandbox.fork(id, opts);
  const failed = results.filter((r) => !(r instanceof Sandbox)).length;
  const entries = results.map((r) => (r instanceof Sandbox
    ? { sandboxId: r.sandboxId, ...(r.trafficAccessToken ? { trafficAccessToken: r.trafficAccessToken } : {}) }
    : { error: { message: r.message, ...(r instanceof SandboxError ? { status: r.status, code: r.code } : {}) } }));
  ctx.out.result(entries, () => {
    results.forEach((r, i) => {
      if (r instanceof Sandbox) ctx.out.line(r.sandboxId);
      else process.stderr.write(`${errorLine(r).replace(/^svc: /, `svc: fork ${i + 1} of ${results.length} did not start: `)}\n`);
    });
  });
  if (failed) {
    if (ctx.out.json) process.stderr.write(`svc: ${failed} of ${results.length} forks did not start\n`);
    process.exitCode = 1;
  }
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
    ['runtime', s.runtime],
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
