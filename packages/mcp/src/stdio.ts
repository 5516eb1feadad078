/**
 * `svc mcp`: the same server over stdio, for MCP clients that start it as a subprocess. Nothing but
 * the protocol goes to stdout; logs go to stderr. When stdin ends (the client went away), the
 * session closes: its code sandbox is killed, and the promise resolves.
 */
import { randomUUID } from 'node:crypto';
import type { Readable, Writable } from 'node:stream';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { McpConnection, McpLog } from './connection.ts';
import { createMcpServer } from './server.ts';
import { McpSession } from './session.ts';

export interface StdioOptions {
  stdin?: Readable;
  stdout?: Writable;
  log?: McpLog;
  /** Ends the session early (SIGINT, SIGTERM). */
  signal?: AbortSignal;
}

/** JSON lines on stderr: the client shows or keeps them, and they never mix with the protocol. */
const stderrLog: McpLog = {
  info: (obj, msg) => { process.stderr.write(`${JSON.stringify({ level: 'info', msg, ...obj })}\n`); },
  warn: (obj, msg) => { process.stderr.write(`${JSON.stringify({ level: 'warn', msg, ...obj })}\n`); },
};

/** Serves one MCP session over stdin and stdout until stdin ends or `signal` aborts. */
export async function serveStdio(connection: McpConnection, opts: StdioOptions = {}): Promise<void> {
  const stdin = opts.stdin ?? process.stdin;
  const stdout = opts.stdout ?? process.stdout;
  const session = new McpSession(randomUUID(), connection, opts.log ?? stderrLog);
  const server = createMcpServer(session);
  const transport = new StdioServerTransport(stdin, stdout);
  const ended = new Promise<void>((resolve) => {
    stdin.once('end', resolve);
    stdin.once('close', resolve);
    transport.onclose = () => resolve();
    if (opts.signal?.aborted) resolve();
    opts.signal?.addEventListener('abort', () => resolve(), { once: true });
  });
  await server.connect(transport);
  await ended;
  await server.close();
  await session.close();
}
