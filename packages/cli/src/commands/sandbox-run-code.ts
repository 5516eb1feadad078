/**
 * `svc sandbox run-code <id> [code]`: runs code in the sandbox's code interpreter (port 49999),
 * streaming what it prints; results as text, binary ones as a note of their type and size.
 */
import { Command } from 'commander';
import { Sandbox, type Execution, type ExecutionError, type Result, type RunCodeOpts } from '@svc/sdk';
import { contextOf, type Context } from '../context.ts';
import { UsageError } from '../errors.ts';
import { formatBytes } from '../output.ts';
import { collect, parsePairs, parseSeconds } from '../parse.ts';

interface RunCodeFlags {
  language?: string;
  context?: string;
  env?: string[];
  timeout?: string;
}

export function sandboxRunCodeCommand(): Command {
  return new Command('run-code')
    .argument('<id>')
    .argument('[code]', "the code; read from standard input when left out or '-'")
    .description("run code in the sandbox's code interpreter (python unless --language or --context), streaming its output; exits 1 when the code raises an error")
    .option('--language <language>', 'python, javascript (js), typescript (ts) or bash')
    .option('--context <id>', 'a code context to run in (its variables persist between runs)')
    .option('--env <key=value>', 'environment variable for this run (repeatable)', collect)
    .option('--timeout <seconds>', 'interrupt the code after this many seconds; 0 or -1 never (default 60)')
    .action(async (id: string, code: string | undefined, flags: RunCodeFlags, c: Command) => runCode(contextOf(c), id, code, flags));
}

async function runCode(ctx: Context, id: string, code: string | undefined, f: RunCodeFlags): Promise<void> {
  if (f.language !== undefined && f.context !== undefined) throw new UsageError('--language and --context do not go together: a context has its language');
  const opts: RunCodeOpts = { language: f.language, context: f.context, envs: parsePairs(f.env, '--env') };
  if (f.timeout !== undefined) opts.timeoutMs = Math.max(0, parseSeconds(f.timeout, '--timeout') * 1000);
  const source = code === undefined || code === '-' ? await readStdin() : code;
  const sbx = await Sandbox.connect(id, ctx.conn);
  if (!ctx.out.json) {
    opts.onStdout = (m) => { process.stdout.write(m.line); };
    opts.onStderr = (m) => { process.stderr.write(m.line); };
    opts.onResult = (r) => { for (const line of describeResult(r)) ctx.out.line(line); };
    opts.onError = (e) => { process.stderr.write(`${describeError(e)}\n`); };
  }
  const execution: Execution = await sbx.runCode(source, opts);
  if (ctx.out.json) ctx.out.line(JSON.stringify(execution, null, 2));
  if (execution.error) process.exitCode = 1;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Formats carried as base64 (their size is the decoded one) or as text too long to print. */
const BINARY_FORMATS: Array<[keyof Result, string, 'base64' | 'text']> = [
  ['png', 'image/png', 'base64'],
  ['jpeg', 'image/jpeg', 'base64'],
  ['pdf', 'application/pdf', 'base64'],
  ['svg', 'image/svg+xml', 'text'],
];
const OTHER_FORMATS: Array<[keyof Result, string]> = [
  ['html', 'text/html'], ['markdown', 'text/markdown'], ['latex', 'text/latex'], ['javascript', 'application/javascript'],
  ['json', 'application/json'], ['data', 'e2b/data'], ['chart', 'e2b/chart'],
];

/**
 * A result as lines for people: its text, and a note such as `[image/png 12.3 KiB]` for each
 * binary format. A result with neither (a display of HTML only, say) lists the formats it has.
 */
function describeResult(r: Result): string[] {
  const lines = r.text ? [r.text] : [];
  for (const [field, mime, encoding] of BINARY_FORMATS) {
    const value = r[field];
    if (typeof value !== 'string') continue;
    const bytes = encoding === 'base64' ? Buffer.byteLength(value, 'base64') : Buffer.byteLength(value);
    lines.push(`[${mime} ${formatBytes(bytes)}]`);
  }
  if (lines.length === 0) {
    for (const [field, mime] of OTHER_FORMATS) if (r[field] !== undefined) lines.push(`[${mime}]`);
    for (const key of Object.keys(r.extra ?? {})) lines.push(`[${key}]`);
  }
  return lines;
}

/** The traceback when the kernel gave one (it names the error), else `name: value`. */
function describeError(e: ExecutionError): string {
  if (e.traceback) return e.traceback.replace(/\n$/, '');
  return e.value ? `${e.name}: ${e.value}` : e.name;
}
