/**
 * `svc mcp`: svc's MCP server over stdio, for an MCP client that starts it (Claude Desktop, an IDE):
 * the tools of the API's /mcp, with this command line's connection (--api-url/--api-key, SVC_API_URL
 * and SVC_API_KEY, or the data directory's endpoint.json). stdout carries only the protocol. It ends
 * when the client closes stdin (or on SIGINT/SIGTERM), after killing the session's code sandbox.
 */
import { Command } from 'commander';
import { ConnectionConfig } from '@svc/sdk';
import { contextOf } from '../context.ts';

export function mcpCommand(): Command {
  return new Command('mcp')
    .description('serve svc as an MCP server over stdio (sandboxes, commands, files and code as tools) until stdin ends')
    .action(async (_flags: unknown, c: Command) => {
      const conn = new ConnectionConfig(contextOf(c).conn);
      // loaded here: the other commands do not pay for the MCP SDK
      const { serveStdio } = await import('@svc/mcp');
      const stop = new AbortController();
      const onSignal = () => stop.abort();
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      try {
        await serveStdio({ apiUrl: conn.apiUrl, apiKey: conn.apiKey, sandboxUrl: conn.sandboxUrl }, { signal: stop.signal });
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    });
}
