/**
 * The configured servers as one: their tools, prompts and resources listed together and each
 * call routed to the server that owns the name. Names stay as the servers give them; when two
 * servers give the same one, the server configured first keeps it and the later one's is
 * prefixed with its name, `<server>__<name>` (`github/o/r` as `github_o_r`). A call that fails
 * (the server exited, the call errored) is a tool result with isError, naming the server.
 */
import { McpError, ErrorCode, type CallToolRequest, type CallToolResult, type GetPromptRequest, type GetPromptResult, type Prompt, type ReadResourceRequest, type ReadResourceResult, type Resource, type ResourceTemplate, type ServerNotification, type ServerRequest, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { UriTemplate } from '@modelcontextprotocol/sdk/shared/uriTemplate.js';
import type { Backend, ListKind } from './backend.ts';
import type { Log } from './log.ts';

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** How long one call may run: tools (a fetch, a build) can be slow; progress notifications extend it. */
const CALL_TIMEOUT_MS = 30 * 60_000;

interface Owner { backend: Backend; name: string }

export class Aggregator {
  private readonly listeners = new Set<(kind: ListKind) => void>();

  constructor(private readonly backends: Backend[], private readonly log: Log) {}

  /** The backends' list changed: every session is told (front.ts). */
  onListChanged(listener: (kind: ListKind) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  notify(kind: ListKind): void {
    for (const listener of this.listeners) listener(kind);
  }

  /** Items of every backend under the names the clients see, and who owns each. */
  private table<T extends { name: string }>(items: (b: Backend) => T[]): { items: T[]; owners: Map<string, Owner> } {
    const owners = new Map<string, Owner>();
    const out: T[] = [];
    for (const backend of this.backends) {
      for (const item of items(backend)) {
        const name = owners.has(item.name) ? `${backend.prefix}__${item.name}` : item.name;
        if (owners.has(name)) {
          this.log(`[${backend.name}] '${item.name}' is listed twice; the second is left out`);
          continue;
        }
        owners.set(name, { backend, name: item.name });
        out.push({ ...item, name });
      }
    }
    return { items: out, owners };
  }

  listTools(): Tool[] {
    return this.table((b) => b.tools).items;
  }

  listPrompts(): Prompt[] {
    return this.table((b) => b.prompts).items;
  }

  async callTool(params: CallToolRequest['params'], extra: Extra): Promise<CallToolResult> {
    const owner = this.table((b) => b.tools).owners.get(params.name);
    if (!owner) return { content: [{ type: 'text', text: `Tool ${params.name} not found` }], isError: true };
    try {
      const result = await owner.backend.connected().callTool({ name: owner.name, arguments: params.arguments }, undefined, this.options(extra));
      return result as CallToolResult;
    } catch (err) {
      if (extra.signal.aborted) throw err;
      return { content: [{ type: 'text', text: owner.backend.failure(err) }], isError: true };
    }
  }

  async getPrompt(params: GetPromptRequest['params'], extra: Extra): Promise<GetPromptResult> {
    const owner = this.table((b) => b.prompts).owners.get(params.name);
    if (!owner) throw new McpError(ErrorCode.InvalidParams, `Prompt ${params.name} not found`);
    try {
      return await owner.backend.connected().getPrompt({ name: owner.name, arguments: params.arguments }, this.options(extra));
    } catch (err) {
      if (err instanceof McpError) throw err;
      throw new McpError(ErrorCode.InternalError, owner.backend.failure(err));
    }
  }

  /** Every backend's resources, a URI listed by two once (the first's). */
  listResources(): Resource[] {
    const seen = new Set<string>();
    return this.backends.flatMap((b) => b.resources).filter((r) => !seen.has(r.uri) && seen.add(r.uri));
  }

  listResourceTemplates(): ResourceTemplate[] {
    return this.backends.flatMap((b) => b.templates);
  }

  async readResource(params: ReadResourceRequest['params'], extra: Extra): Promise<ReadResourceResult> {
    const backend = this.backends.find((b) => b.resources.some((r) => r.uri === params.uri)) ??
      this.backends.find((b) => b.templates.some((t) => new UriTemplate(t.uriTemplate).match(params.uri) !== null));
    if (!backend) throw new McpError(ErrorCode.InvalidParams, `Resource ${params.uri} not found`);
    try {
      return await backend.connected().readResource({ uri: params.uri }, this.options(extra));
    } catch (err) {
      if (err instanceof McpError) throw err;
      throw new McpError(ErrorCode.InternalError, backend.failure(err));
    }
  }

  /** The servers' instructions, each under its name. */
  instructions(): string | undefined {
    const parts = this.backends.filter((b) => b.instructions).map((b) => `## ${b.name}\n${b.instructions}`);
    return parts.length > 0 ? parts.join('\n\n') : undefined;
  }

  /** A backend request on behalf of a client's: cancelled with it, its progress passed on. */
  private options(extra: Extra) {
    const token = extra._meta?.progressToken;
    return {
      signal: extra.signal,
      timeout: CALL_TIMEOUT_MS,
      resetTimeoutOnProgress: true,
      ...(token !== undefined ? {
        onprogress: (p: { progress: number; total?: number; message?: string }) => {
          extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, ...p } }).catch((err: Error) => {
            this.log(`passing on a progress notification failed: ${err.message}`);
          });
        },
      } : {}),
    };
  }
}
