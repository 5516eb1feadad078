/** The MCP server of one session: svc's tools over the session's connection. */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { McpSession } from './session.ts';
import { registerCodeTool } from './tools/code.ts';
import { registerCommandTool } from './tools/commands.ts';
import { registerFileTools } from './tools/files.ts';
import { registerSandboxTools } from './tools/sandboxes.ts';
import { registerUrlTool } from './tools/url.ts';

const SERVER_INFO = { name: 'svc', version: '0.1.0' };

const INSTRUCTIONS = [
  'svc runs isolated Linux sandboxes for you.',
  'To run Python quickly, call run_code: it keeps one code-interpreter sandbox for this session, so state carries between calls.',
  'For anything else, create_sandbox, then run_command, write_file, read_file and list_files with its sandboxId; get_url gives the public URL of a port a server listens on.',
  'Sandboxes time out when idle; kill_sandbox the ones you created when you are done.',
  'A failed call explains itself and names the tool to call next.',
].join(' ');

export function createMcpServer(session: McpSession): McpServer {
  const server = new McpServer(SERVER_INFO, { capabilities: { tools: {} }, instructions: INSTRUCTIONS });
  registerSandboxTools(server, session);
  registerCommandTool(server, session);
  registerCodeTool(server, session);
  registerFileTools(server, session);
  registerUrlTool(server, session);
  return server;
}
