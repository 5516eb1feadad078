/**
 * run_code: code in a sandbox's code interpreter (a Jupyter kernel), by default in this session's
 * own `code-interpreter-v1` sandbox, started on the first call and reused, so that variables and
 * imports carry from one call to the next. Results come back as text, charts as images, and an
 * exception as an error result with its traceback.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { CODE_LANGUAGES, NotFoundError, SandboxError, TimeoutError, type Execution, type Result, type Sandbox } from '@svc/sdk';
import { z } from 'zod';
import { MAX_CODE_LINE_CHARS, MAX_CODE_OUTPUT_CHARS, MAX_ERROR_CHARS, OutputTail, keepTail, stripAnsi } from '../output.ts';
import { ToolFailure, noSandbox } from '../results.ts';
import { CODE_INTERPRETER_TEMPLATE, type McpSession } from '../session.ts';
import { registerSvcTool, type ToolCall } from '../tool-kit.ts';
import { sandboxIdArg } from './sandboxes.ts';

const DEFAULT_TIMEOUT_SECONDS = 60;

interface RunCodeArgs {
  code: string;
  language?: string;
  sandboxId?: string;
  timeoutSeconds?: number;
  envs?: Record<string, string>;
}

export function registerCodeTool(server: McpServer, session: McpSession): void {
  registerSvcTool(server, session, 'run_code', {
    title: 'Run code',
    description: 'Runs code in a Jupyter-style code interpreter and returns what it printed, the value of the last expression, '
      + 'charts (matplotlib figures) as images, and an exception with its traceback. Without sandboxId it runs in this session\'s own '
      + `${CODE_INTERPRETER_TEMPLATE} sandbox (Python with numpy, pandas, matplotlib and more), started on the first call: variables, imports and files `
      + 'carry over from one call to the next, and its id (given in the result) works with the other tools too; it is killed when this session ends. '
      + `With sandboxId it runs in that sandbox, which must be a ${CODE_INTERPRETER_TEMPLATE} one.`,
    inputSchema: {
      code: z.string().min(1).describe('the code to run'),
      language: z.enum(CODE_LANGUAGES).optional().describe("the language (default 'python')"),
      sandboxId: sandboxIdArg.optional().describe(`run in this ${CODE_INTERPRETER_TEMPLATE} sandbox instead of the session's own`),
      timeoutSeconds: z.number().int().min(1).max(3_600).optional().describe(`interrupt the code after this many seconds (default ${DEFAULT_TIMEOUT_SECONDS})`),
      envs: z.record(z.string(), z.string()).optional().describe('environment variables for this run'),
    },
    annotations: { destructiveHint: true, openWorldHint: true },
  }, async (args, call) => {
    if (args.sandboxId) {
      const sbx = await call.session.sandbox(args.sandboxId, call.opts);
      return executionResult(await runIn(sbx, args, call), sbx.sandboxId, '', args);
    }
    let { sandbox, started } = await codeSandbox(call);
    let note = started ? `started this session's code sandbox ${sandbox.sandboxId}` : '';
    try {
      return executionResult(await runIn(sandbox, args, call), sandbox.sandboxId, note, args);
    } catch (err) {
      // the session's sandbox was killed or timed out: a new one, once (the code never ran)
      if (!(err instanceof ToolFailure) || err.message !== noSandbox(sandbox.sandboxId)) throw err;
      const gone = sandbox.sandboxId;
      ({ sandbox, started } = await codeSandbox(call));
      note = `this session's code sandbox ${gone} was gone (killed or timed out), so ${sandbox.sandboxId} was started: variables from earlier runs are lost`;
      return executionResult(await runIn(sandbox, args, call), sandbox.sandboxId, note, args);
    }
  });
}

/** The session's code sandbox; a platform without its template says so in the model's terms. */
async function codeSandbox(call: ToolCall): Promise<{ sandbox: Sandbox; started: boolean }> {
  try {
    return await call.session.codeSandbox(call.opts);
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
    throw new ToolFailure(`run_code needs the ${CODE_INTERPRETER_TEMPLATE} template, which this platform does not have (${err.message}); `
      + 'its operator builds it (svc up does unless told not to). Meanwhile create_sandbox and run_command (python3 -c ...) run code too');
  }
}

/** What a run keeps for its result: the streams' tails and the results as shown (keepOutput: false on the SDK's side). */
interface RunOutput {
  execution: Execution;
  stdout: OutputTail;
  stderr: OutputTail;
  results: ShownResult[];
}

/** A result as the answer shows it: its text already cut, its image whole. */
interface ShownResult {
  isMainResult: boolean;
  text?: string;
  image?: { data: string; mimeType: string };
}

async function runIn(sbx: Sandbox, args: RunCodeArgs, call: ToolCall): Promise<RunOutput> {
  const timeoutSeconds = args.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS;
  const flood = new AbortController();
  const kept = { stdout: new OutputTail(), stderr: new OutputTail(), results: [] as ShownResult[] };
  let printed = 0;
  const add = (chars: number) => {
    printed += chars;
    if (printed > MAX_CODE_OUTPUT_CHARS && !flood.signal.aborted) flood.abort();
  };
  const count = (stream: OutputTail) => (out: { line: string }) => {
    stream.push(out.line);
    add(out.line.length);
  };
  // Results (display data, images) and the error count too: before 2026-11-30 a loop of display()
  // calls of 10 MB each piled up in the gateway, the whole platform under svc up.
  const countResult = (r: Result) => {
    add(JSON.stringify(r).length);
    if (!flood.signal.aborted) kept.results.push(shown(r));
  };
  const countError = (e: { name: string; value: string; traceback: string }) => add(e.name.length + e.value.length + e.traceback.length);
  const flooded = () => new ToolFailure(`the code printed more than ${MAX_CODE_OUTPUT_CHARS / 1024 / 1024} MB and its output was cut off; `
    + 'write large output to a file and read parts of it, or print less');
  try {
    const execution = await sbx.runCode(args.code, {
      language: args.language, envs: args.envs, timeoutMs: timeoutSeconds * 1000, signal: AbortSignal.any([call.signal, flood.signal]),
      onStdout: count(kept.stdout), onStderr: count(kept.stderr), onResult: countResult, onError: countError, keepOutput: false,
      maxLineChars: MAX_CODE_LINE_CHARS,
    });
    // The last of the output can arrive in the chunk that crossed the limit, before the abort takes.
    if (flood.signal.aborted) throw flooded();
    return { execution, ...kept };
  } catch (err) {
    if (flood.signal.aborted) throw flooded();
    // One output past the line cap is past the output cap too: the same answer as any flood.
    if (err instanceof SandboxError && err.code === 'too_large') throw flooded();
    if (err instanceof TimeoutError && err.code === 'deadline_exceeded') {
      throw new ToolFailure(`timed out: the code ran longer than ${timeoutSeconds} s and was interrupted (the interpreter keeps its earlier state); `
        + 'run it again with a larger timeoutSeconds, or split the work');
    }
    throw await call.session.explain(sbx.sandboxId, call.opts, err);
  }
}

/** The formats of a result shown as text, in order of preference. */
const TEXT_FORMATS = ['text', 'markdown', 'latex', 'json', 'html', 'svg', 'javascript'] as const;

function resultText(r: Result): string | undefined {
  for (const f of TEXT_FORMATS) {
    const v = r[f];
    if (v !== undefined && v !== null && v !== '') return typeof v === 'string' ? v : JSON.stringify(v);
  }
  return undefined;
}

function shown(r: Result): ShownResult {
  const text = resultText(r);
  const image = r.png ? { data: r.png, mimeType: 'image/png' } : r.jpeg ? { data: r.jpeg, mimeType: 'image/jpeg' } : undefined;
  return { isMainResult: r.isMainResult, ...(text !== undefined ? { text: keepTail(text).text } : {}), ...(image ? { image } : {}) };
}

function executionResult(run: RunOutput, sandboxId: string, note: string, args: RunCodeArgs): CallToolResult {
  const { execution } = run;
  const parts: string[] = [note || `ran in sandbox ${sandboxId}`];
  const stdout = run.stdout.text;
  const stderr = run.stderr.text;
  if (stdout) parts.push(`stdout:\n${stdout}`);
  if (stderr) parts.push(`stderr:\n${stderr}`);
  const images: CallToolResult['content'] = [];
  for (const r of run.results) {
    if (r.image) images.push({ type: 'image', ...r.image });
    if (r.text !== undefined) parts.push(`${r.isMainResult ? 'result' : 'output'}:\n${r.text}`);
  }
  if (execution.error) {
    const { name, value, traceback } = execution.error;
    parts.push(`error: ${keepTail(`${name}: ${value}`, MAX_ERROR_CHARS).text}\n${keepTail(stripAnsi(traceback)).text}`);
  } else if (parts.length === 1) {
    parts.push(`(no output${args.language && args.language !== 'python' ? '' : '; the value of a last expression is shown, print() shows more'})`);
  }
  return { content: [{ type: 'text', text: parts.join('\n') }, ...images], ...(execution.error ? { isError: true } : {}) };
}
