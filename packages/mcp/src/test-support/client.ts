/** An MCP client on one session of the server, in memory, and the text of a tool's result. */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { McpConnection, McpLog } from '../connection.ts';
import { createMcpServer } from '../server.ts';
import { McpSession } from '../session.ts';

export interface ToolResult {
  isError?: boolean;
  content: Array<{ type: string; text?: string; data?: string; mimeType?: string }>;
  structuredContent?: Record<string, unknown>;
}

/** Keeps what the server logs, for tests that look at it. */
export function memoryLog(): McpLog & { lines: Array<{ level: string; msg: string; obj: object }> } {
  const lines: Array<{ level: string; msg: string; obj: object }> = [];
  return { lines, info: (obj, msg) => { lines.push({ level: 'info', msg, obj }); }, warn: (obj, msg) => { lines.push({ level: 'warn', msg, obj }); } };
}

export async function connectInMemory(connection: McpConnection, log: McpLog = memoryLog()) {
  const session = new McpSession('session-test', connection, log);
  const server = createMcpServer(session);
  const [serverSide, clientSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'svc-test', version: '1.0.0' });
  await client.connect(clientSide);
  const call = async (name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as ToolResult;
  return {
    client, session, call,
    async close() {
      await client.close();
      await server.close();
      await session.close();
    },
  };
}

export function textOf(r: ToolResult): string {
  return r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}
