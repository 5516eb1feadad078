/**
 * Tool results: a normal answer, or `isError` with a reason the model can act on (what went wrong
 * and which tool to call next). A failure never breaks the session: every tool catches its errors
 * and answers with one of these.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import {
  AuthenticationError, ConflictError, FileNotFoundError, GoneError, InvalidArgumentError, NotEnoughSpaceError, NotFoundError,
  RateLimitError, SandboxError, SandboxNotFoundError, ServiceBusyError, TemplateNotFoundError, TimeoutError,
} from '@svc/sdk';
import { MAX_ERROR_CHARS, keepTail } from './output.ts';

/** A failure whose message already says what to do. */
export class ToolFailure extends Error {}

export function textResult(text: string, structuredContent?: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text }], ...(structuredContent ? { structuredContent } : {}) };
}

export function errorResult(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

export const noSandbox = (id: string) =>
  `no sandbox ${id} in your team (it was killed, timed out, or never existed): list_sandboxes shows yours, create_sandbox starts a new one`;

export const pausedSandbox = (id: string) => `sandbox ${id} is paused: call resume_sandbox first, then try again`;

/**
 * A request that never got an answer (the SDK's transportError, code 'unreachable'): its message
 * names the address it tried, an internal one of the platform (the API's loopback, the data plane).
 */
export function isUnreachable(err: unknown): boolean {
  return err instanceof SandboxError && err.code === 'unreachable';
}

/**
 * The error as a message for the model, cut to MAX_ERROR_CHARS (a sandbox's error answer is the
 * sandbox's to make as long as it likes). `sandboxId`: the sandbox the call was about, so that a
 * 404 names it (a template's 404 comes with its own class and message); `tool`: the call's tool.
 * Addresses in a message are hidden: they are the platform's internal ones, not the model's to see
 * (the tool's caller logs the whole message).
 */
export function failureText(err: unknown, sandboxId?: string, tool?: string): string {
  if (isUnreachable(err)) {
    const what = sandboxId ? `sandbox ${sandboxId}` : 'the platform';
    return `${tool ?? 'the call'} could not reach ${what}: the connection failed (the platform's log has the details). `
      + `Retry; if it keeps failing, ${sandboxId ? 'list_sandboxes shows whether the sandbox still runs' : 'the platform may be down'}`;
  }
  if (!(err instanceof Error)) return bounded(String(err));
  if (err instanceof ToolFailure) return bounded(err.message);
  const msg = bounded(err.message);
  if (err instanceof TemplateNotFoundError) {
    return `${msg}: name a template your team has (base, code-interpreter-v1, or one of your own)`;
  }
  if (err instanceof FileNotFoundError) return `${msg}: no such file or directory (list_files shows what is there)`;
  if (err instanceof SandboxNotFoundError || (err instanceof NotFoundError && sandboxId)) return sandboxId ? noSandbox(sandboxId) : msg;
  if (err instanceof GoneError) return `${sandboxId ? `sandbox ${sandboxId}` : 'the sandbox'} was killed or timed out (${msg}): create_sandbox starts a new one`;
  if (err instanceof RateLimitError) {
    return `${msg}. A quota or rate limit of your team was reached: kill sandboxes you no longer need (list_sandboxes shows them, kill_sandbox ends one), or retry later`;
  }
  if (err instanceof AuthenticationError) {
    return err.status === 401 ? `the API refused the API key (${msg}): check the key this MCP client is configured with` : `not allowed: ${msg}`;
  }
  if (err instanceof ServiceBusyError) return `${msg}: the platform is busy; retry in ${err.retryAfterSec ?? 2} s`;
  if (err instanceof ConflictError) return `${msg} (another operation on it is under way, or it is already in that state; check with list_sandboxes and retry)`;
  if (err instanceof InvalidArgumentError) return `invalid request: ${msg}`;
  if (err instanceof NotEnoughSpaceError) return `${msg}: out of space`;
  if (err instanceof TimeoutError) return `timed out: ${msg}`;
  if (err instanceof SandboxError) return msg;
  return `unexpected failure: ${msg}`;
}

/** URLs' scheme and host (the rest of a URL, its path, says what was called and stays). */
const ADDRESS = /\b(?:https?|wss?):\/\/[^\s/?#'"<>)]+/gi;

function bounded(text: string): string {
  return keepTail(text.replace(ADDRESS, '<address>'), MAX_ERROR_CHARS).text;
}
