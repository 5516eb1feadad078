/**
 * The sandbox tools: create_sandbox, list_sandboxes, kill_sandbox, pause_sandbox,
 * resume_sandbox, each one call of the public API with the caller's key.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Sandbox, type SandboxInfo } from '@svc/sdk';
import { z } from 'zod';
import { errorResult, noSandbox, textResult } from '../results.ts';
import { createWithoutDeadline, type McpSession } from '../session.ts';
import { registerSvcTool } from '../tool-kit.ts';

/** Sandboxes a model creates time out unless told otherwise, as E2B's SDK does: a forgotten one does not run for ever. */
const DEFAULT_TIMEOUT_SECONDS = 300;
/** At most this many sandboxes in list_sandboxes (pages of 100). */
const LIST_MAX = 500;

export const sandboxIdArg = z.string().min(1).describe('the sandbox id, as create_sandbox or list_sandboxes gave it');
const timeoutArg = z.number().int().min(1).max(86_400);
const stringMap = z.record(z.string(), z.string());

export function registerSandboxTools(server: McpServer, session: McpSession): void {
  registerSvcTool(server, session, 'create_sandbox', {
    title: 'Create a sandbox',
    description: 'Starts a new isolated Linux sandbox (a small VM-like machine with its own file system, processes and network) and returns its id, '
      + 'which run_command, write_file, read_file, list_files, run_code, get_url, pause_sandbox and kill_sandbox take. '
      + 'The sandbox is killed after timeoutSeconds without activity (default 300); kill it with kill_sandbox when you are done.',
    inputSchema: {
      template: z.string().min(1).optional().describe("the template to start from (default 'base', a Debian system; 'code-interpreter-v1' has Python with Jupyter and data libraries)"),
      timeoutSeconds: timeoutArg.optional().describe(`seconds without activity after which the sandbox is killed (default ${DEFAULT_TIMEOUT_SECONDS}, at most 86400)`),
      metadata: stringMap.optional().describe('labels to find the sandbox by later (list_sandboxes filters on them)'),
      envs: stringMap.optional().describe('environment variables every command in the sandbox gets'),
    },
    outputSchema: { sandboxId: z.string(), templateId: z.string() },
    annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: false },
  }, async (args, call) => {
    const template = args.template ?? 'base';
    const timeoutSeconds = args.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS;
    const sandboxId = await createWithoutDeadline(template, {
      ...call.opts, timeoutMs: timeoutSeconds * 1000, metadata: args.metadata, envs: args.envs, signal: call.signal,
    });
    return textResult(
      `created sandbox ${sandboxId} from template ${template}; it is killed after ${timeoutSeconds} s without activity (kill_sandbox ends it sooner)`,
      { sandboxId, templateId: template },
    );
  });

  registerSvcTool(server, session, 'list_sandboxes', {
    outsideCallLimit: true,
    title: 'List sandboxes',
    description: "Lists your team's running and paused sandboxes: id, state, template, start time, when it times out and its metadata.",
    inputSchema: {
      state: z.enum(['running', 'paused']).optional().describe('only sandboxes in this state'),
      metadata: stringMap.optional().describe('only sandboxes whose metadata has all these key/value pairs'),
    },
    outputSchema: {
      sandboxes: z.array(z.object({
        sandboxId: z.string(), templateId: z.string(), template: z.string().optional(), state: z.string(),
        startedAt: z.string(), endAt: z.string().optional(), metadata: z.record(z.string(), z.string()),
      })),
      truncated: z.boolean(),
    },
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, async (args, call) => {
    const pages = Sandbox.list({ ...call.opts, limit: 100, query: { state: args.state ? [args.state] : undefined, metadata: args.metadata } });
    const found: SandboxInfo[] = [];
    while (pages.hasNext && found.length < LIST_MAX) found.push(...await pages.nextItems());
    const truncated = found.length > LIST_MAX || pages.hasNext;
    const shown = found.slice(0, LIST_MAX);
    const sandboxes = shown.map((s) => ({
      sandboxId: s.sandboxId, templateId: s.templateId, ...(s.name ? { template: s.name } : {}), state: s.state,
      startedAt: s.startedAt.toISOString(), ...(s.endAt ? { endAt: s.endAt.toISOString() } : {}), metadata: s.metadata ?? {},
    }));
    const lines = sandboxes.map((s) => {
      const meta = Object.entries(s.metadata).map(([k, v]) => `${k}=${v}`).join(' ');
      const own = call.session.isCodeSandbox(s.sandboxId) ? " (this session's run_code sandbox)" : '';
      return `${s.sandboxId}  ${s.state}  template ${s.template ?? s.templateId}  started ${s.startedAt}${s.endAt ? `  times out ${s.endAt}` : ''}${meta ? `  ${meta}` : ''}${own}`;
    });
    const text = lines.length === 0
      ? 'no sandboxes (create_sandbox starts one)'
      : `${lines.join('\n')}${truncated ? `\n[only the first ${LIST_MAX} are shown: filter by state or metadata]` : ''}`;
    return textResult(text, { sandboxes, truncated });
  });

  registerSvcTool(server, session, 'kill_sandbox', {
    outsideCallLimit: true,
    title: 'Kill a sandbox',
    description: 'Kills a sandbox at once: its processes stop and its files are gone. Use it when you no longer need the sandbox.',
    inputSchema: { sandboxId: sandboxIdArg },
    annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
  }, async (args, call) => {
    const killed = await Sandbox.kill(args.sandboxId, { ...call.opts, signal: call.signal });
    call.session.forget(args.sandboxId);
    return killed ? textResult(`killed sandbox ${args.sandboxId}`) : errorResult(noSandbox(args.sandboxId));
  });

  registerSvcTool(server, session, 'pause_sandbox', {
    outsideCallLimit: true,
    title: 'Pause a sandbox',
    description: 'Pauses a running sandbox: its processes are frozen and it uses no CPU, its memory and files are kept. '
      + 'resume_sandbox continues it where it stopped. Commands and file tools refuse a paused sandbox.',
    inputSchema: { sandboxId: sandboxIdArg },
    annotations: { destructiveHint: false, idempotentHint: true, openWorldHint: false },
  }, async (args, call) => {
    const paused = await Sandbox.pause(args.sandboxId, { ...call.opts, signal: call.signal });
    call.session.forget(args.sandboxId);
    return textResult(paused ? `paused sandbox ${args.sandboxId}; resume_sandbox continues it` : `sandbox ${args.sandboxId} was already paused`);
  });

  registerSvcTool(server, session, 'resume_sandbox', {
    title: 'Resume a sandbox',
    description: 'Resumes a paused sandbox (its processes continue where they stopped); a running one is left running. '
      + 'timeoutSeconds sets how long it may then stay idle before it is killed.',
    inputSchema: {
      sandboxId: sandboxIdArg,
      timeoutSeconds: timeoutArg.optional().describe('seconds without activity after which it is killed; default: the timeout it had'),
    },
    annotations: { destructiveHint: false, idempotentHint: true, openWorldHint: false },
  }, async (args, call) => {
    const sbx = await Sandbox.connect(args.sandboxId, {
      ...call.opts, signal: call.signal, ...(args.timeoutSeconds ? { timeoutMs: args.timeoutSeconds * 1000 } : {}),
    });
    call.session.remember(sbx);
    return textResult(`sandbox ${args.sandboxId} is running`);
  });
}
