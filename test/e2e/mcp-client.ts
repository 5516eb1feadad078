/**
 * The official MCP SDK's client as the MCP tests and the MCP benchmark use it: a connection over
 * streamable HTTP with the given headers, tool calls with a deadline, and their text.
 */
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export interface ToolResult {
  isError?: boolean;
  content: Array<{ type: string; text?: string; data?: string; mimeType?: string }>;
  structuredContent?: Record<string, unknown>;
}

export async function connectHttp(url: string, headers: Record<string, string>): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: 'svc-e2e', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

/** A tool call; the default deadline covers a sandbox's create on a busy machine. */
export async function callTool(client: Client, name: string, args: Record<string, unknown>, timeoutMs = 180_000): Promise<ToolResult> {
  return await client.callTool({ name, arguments: args }, undefined, { timeout: timeoutMs }) as ToolResult;
}

export function textOf(r: ToolResult): string {
  return r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

/** The sandbox a create_sandbox result names. */
export function sandboxIdOf(r: ToolResult): string {
  assert.ok(!r.isError, textOf(r));
  const id = r.structuredContent?.sandboxId;
  if (typeof id === 'string') return id;
  const m = textOf(r).match(/\b([a-z0-9]{12,})\b/);
  assert.ok(m, `a sandbox id in: ${textOf(r)}`);
  return m[1]!;
}
