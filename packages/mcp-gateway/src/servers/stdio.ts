/** Serving one of svc's reference servers over stdio, as the gateway (or any MCP client) starts it. */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';

export async function serveStdio(server: McpServer, name: string): Promise<void> {
  // The client closing stdin is the end of the session: exit rather than linger on open handles.
  process.stdin.on('end', () => process.exit(0));
  await server.connect(new StdioServerTransport());
  console.error(`${name} MCP server running on stdio`);
}

/** The value after `--flag` in argv, if given. */
export function flagValue(argv: string[], flag: string): string | undefined {
  const i = argv.indexOf(flag);
  return i >= 0 ? argv[i + 1] : undefined;
}
