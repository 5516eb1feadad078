/** svc as an MCP server: the API mounts it at /mcp (McpHttpSessions), `svc mcp` serves it over stdio. */
export { McpHttpSessions } from './http.ts';
export { serveStdio } from './stdio.ts';
