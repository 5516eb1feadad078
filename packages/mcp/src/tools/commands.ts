/**
 * run_command: a shell command in a sandbox (`bash -l -c`), waited for or started in the
 * background. A non-zero exit is a normal result (the model reads the code); a timeout, a paused or
 * unknown sandbox are errors that say what to do.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { CommandExitError, TimeoutError, type CommandHandle, type CommandResult } from '@svc/sdk';
import { z } from 'zod';
import { MAX_COMMAND_OUTPUT_CHARS, MAX_ERROR_CHARS, OutputTail, keepTail } from '../output.ts';
import { errorResult, textResult } from '../results.ts';
import type { McpSession } from '../session.ts';
import { registerSvcTool, type ToolCall } from '../tool-kit.ts';
import { sandboxIdArg } from './sandboxes.ts';

const DEFAULT_TIMEOUT_SECONDS = 60;

export function registerCommandTool(server: McpServer, session: McpSession): void {
  registerSvcTool(server, session, 'run_command', {
    title: 'Run a shell command',
    description: 'Runs a shell command in a sandbox with bash (pipes, redirections and && work) and returns its stdout, stderr and exit code; '
      + 'a non-zero exit code is reported, not treated as a failure. The command is killed after timeoutSeconds (default 60). '
      + 'With background: true it is started and left running (a server, a long job) and its pid is returned at once; '
      + 'redirect its output to a file to read it later.',
    inputSchema: {
      sandboxId: sandboxIdArg,
      command: z.string().min(1).describe("the command line, e.g. 'ls -la /home/user' or 'pip install requests && python app.py'"),
      cwd: z.string().optional().describe('the working directory (default the user\'s home, /home/user)'),
      envs: z.record(z.string(), z.string()).optional().describe('extra environment variables for this command'),
      timeoutSeconds: z.number().int().min(1).max(86_400).optional()
        .describe(`kill the command after this many seconds (default ${DEFAULT_TIMEOUT_SECONDS}; in the background: none unless given)`),
      background: z.boolean().optional().describe('start the command and return its pid without waiting for it'),
    },
    outputSchema: {
      stdout: z.string().optional(), stderr: z.string().optional(), exitCode: z.number().int().optional(), pid: z.number().int().optional(),
    },
    annotations: { destructiveHint: true, openWorldHint: true },
  }, async (args, call) => {
    const sbx = await call.session.sandbox(args.sandboxId, call.opts);
    const timeoutSeconds = args.timeoutSeconds ?? (args.background ? 0 : DEFAULT_TIMEOUT_SECONDS);
    let handle: CommandHandle;
    // Only the tails a result shows are kept (keepOutput: false), not the SDK's whole streams.
    const output: Output = { stdout: new OutputTail(), stderr: new OutputTail() };
    const flood = { chars: 0, killed: false };
    const count = (stream: OutputTail) => (data: string) => {
      stream.push(data);
      flood.chars += data.length;
      if (flood.chars <= MAX_COMMAND_OUTPUT_CHARS || flood.killed || args.background) return;
      flood.killed = true;
      handle?.kill().catch((err: Error) => call.session.log.warn({ sandboxId: args.sandboxId, pid: handle?.pid, err: err.message }, 'a run_command past its output limit could not be killed'));
    };
    try {
      handle = await sbx.commands.run(args.command, {
        background: true, cwd: args.cwd, envs: args.envs, timeoutMs: timeoutSeconds * 1000,
        onStdout: count(output.stdout), onStderr: count(output.stderr), keepOutput: false,
      });
    } catch (err) {
      throw await call.session.explain(args.sandboxId, call.opts, err);
    }
    if (args.background) {
      // the command runs on; only this call's view of its output ends
      await handle.disconnect();
      const limit = timeoutSeconds ? `; it is killed after ${timeoutSeconds} s` : '';
      return textResult(
        `started in the background with pid ${handle.pid}${limit}. Its output is not kept: redirect it to a file (command > /tmp/out.log 2>&1) and read that with read_file; `
        + `run_command 'kill ${handle.pid}' stops it`,
        { pid: handle.pid },
      );
    }
    const result = await waitFor(handle, output, args.sandboxId, timeoutSeconds, call);
    if (!flood.killed) return result;
    return errorResult(
      `the command printed more than ${MAX_COMMAND_OUTPUT_CHARS / 1024 / 1024} MB and was killed; redirect its output to a file (command > /tmp/out.log 2>&1) and read parts of it with read_file or run_command 'tail -n 100 /tmp/out.log'.\n`
      + formatOutput(output),
    );
  });
}

/** What a run keeps of its streams. */
interface Output {
  stdout: OutputTail;
  stderr: OutputTail;
}

async function waitFor(handle: CommandHandle, output: Output, sandboxId: string, timeoutSeconds: number, call: ToolCall) {
  // a cancelled call (the client gave up) kills its command rather than leave it running unseen
  const cancel = () => {
    handle.kill().catch((err: Error) => call.session.log.warn({ sandboxId, pid: handle.pid, err: err.message }, 'a cancelled run_command could not be killed'));
  };
  call.signal.addEventListener('abort', cancel, { once: true });
  try {
    return commandResult(await handle.wait(), output);
  } catch (err) {
    if (err instanceof CommandExitError) return commandResult(err, output);
    if (err instanceof TimeoutError && err.code === 'deadline_exceeded') {
      return errorResult(
        `timed out: the command did not finish within ${timeoutSeconds} s and was killed; run it again with a larger timeoutSeconds, or with background: true for a long job.\n`
        + formatOutput(output),
      );
    }
    throw await call.session.explain(sandboxId, call.opts, err);
  } finally {
    call.signal.removeEventListener('abort', cancel);
  }
}

/** The result of a finished command: its exit code and what `output` kept (the result's streams are empty). */
function commandResult(r: CommandResult, output: Output) {
  const stdout = output.stdout.text;
  const stderr = output.stderr.text;
  const note = r.exitCode !== 0 && r.error && r.error !== `exit status ${r.exitCode}` ? ` (${keepTail(r.error, MAX_ERROR_CHARS).text})` : '';
  return textResult(`exit code ${r.exitCode}${note}\n${formatOutput(output)}`, { stdout, stderr, exitCode: r.exitCode });
}

/** The streams as the model reads them, cut to size. */
function formatOutput(output: Output): string {
  const stdout = output.stdout.text;
  const stderr = output.stderr.text;
  const parts: string[] = [];
  parts.push(stdout ? `stdout:\n${stdout}` : 'stdout: (empty)');
  if (stderr) parts.push(`stderr:\n${stderr}`);
  return parts.join('\n');
}
