/**
 * How a tool is registered: its input schema (zod, which the MCP SDK turns into the JSON schema
 * clients see and checks every call against), and a handler that gets the call's connection and
 * whose failures become `isError` results instead of protocol errors.
 */
import type { McpServer, ToolCallback } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { SandboxError, type ConnectionOpts } from '@svc/sdk';
import type { z } from 'zod';
import { errorResult, failureText, isUnreachable, ToolFailure } from './results.ts';
import { MAX_CONCURRENT_CALLS, type McpSession } from './session.ts';

/** What a handler gets besides its arguments. */
export interface ToolCall {
  session: McpSession;
  /** The SDK options of this call, with the caller's key. */
  opts: ConnectionOpts;
  /** Aborted when the client cancels the call or the session ends. */
  signal: AbortSignal;
}

interface ToolSpec<S extends z.ZodRawShape> {
  title: string;
  description: string;
  inputSchema: S;
  outputSchema?: z.ZodRawShape;
  annotations?: ToolAnnotations;
  /**
   * Runs outside the session's MAX_CONCURRENT_CALLS: a quick call that holds no output (list,
   * kill, pause, a URL), so that a client whose eight places are taken by long commands can still
   * see and stop its sandboxes.
   */
  outsideCallLimit?: true;
}

type Args<S extends z.ZodRawShape> = z.infer<z.ZodObject<S>>;

export function registerSvcTool<S extends z.ZodRawShape>(
  server: McpServer,
  session: McpSession,
  name: string,
  spec: ToolSpec<S>,
  handler: (args: Args<S>, call: ToolCall) => Promise<CallToolResult>,
): void {
  const { title, description, inputSchema, outputSchema, annotations, outsideCallLimit } = spec;
  const callback = async (args: Args<S>, extra: { authInfo?: { token?: string }; signal: AbortSignal }): Promise<CallToolResult> => {
    if (!outsideCallLimit && !session.startCall()) {
      return errorResult(`too many tool calls at once: ${MAX_CONCURRENT_CALLS} are under way in this MCP session, the most it runs; `
        + 'wait for one of them to finish, then call again');
    }
    const call: ToolCall = { session, opts: session.opts(extra.authInfo?.token || undefined), signal: extra.signal };
    try {
      return await handler(args, call);
    } catch (err) {
      const sandboxId = typeof (args as { sandboxId?: unknown }).sandboxId === 'string' ? (args as { sandboxId: string }).sandboxId : undefined;
      if (!(err instanceof SandboxError) && !(err instanceof ToolFailure)) {
        session.log.warn({ session: session.id, tool: name, sandboxId, err: (err as Error)?.stack ?? String(err) }, 'MCP tool failed unexpectedly');
      } else if (isUnreachable(err)) {
        // the model is told only that it failed (failureText); the address is the operator's to see
        session.log.warn({ session: session.id, tool: name, sandboxId, err: (err as Error).message }, 'an MCP tool could not reach the platform');
      }
      return errorResult(failureText(err, sandboxId, name));
    } finally {
      if (!outsideCallLimit) session.endCall();
    }
  };
  // The SDK types the arguments as its ShapeOutput<S>, zod as z.infer of the object: the same type,
  // which TypeScript cannot see through the generic S.
  server.registerTool(name, { title, description, inputSchema, outputSchema, annotations }, callback as unknown as ToolCallback<S>);
}
