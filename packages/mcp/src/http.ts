/**
 * svc's MCP server over streamable HTTP (the API's /mcp): stateful, one McpServer and one
 * McpSession per MCP session id. A session belongs to the owner (team) whose key opened it: its id
 * with another owner's key is an unknown session (404, as the MCP spec answers an unknown or
 * expired one). Sessions idle for `idleMs` are closed, and each owner may hold `maxSessionsPerOwner`.
 * Closing a session (DELETE, idle, shutdown) kills its code sandbox.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { McpLog } from './connection.ts';
import { batchRefusal, hostRefusal } from './request-guards.ts';
import { createMcpServer } from './server.ts';
import { McpSession, SESSION_IDLE_MS } from './session.ts';

const MAX_SESSIONS_PER_OWNER = 64;

export interface McpHttpOptions {
  /** The public API's URL for the SDK (the API's loopback address), asked when a session opens. */
  apiUrl: () => string;
  /** The data-plane proxy the SDK reaches sandboxes through. */
  sandboxUrl: string;
  /** The data plane as users reach it, for get_url; default sandboxUrl. */
  publicSandboxUrl?: string;
  /** Headers for the tools' API calls (McpConnection.apiHeaders). */
  apiHeaders?: Record<string, string>;
  log: McpLog;
  idleMs?: number;
  maxSessionsPerOwner?: number;
  /**
   * Set when the API checks no key (api.api_key empty, which it allows on a loopback address only),
   * to the host it listens on: /mcp then serves only requests made to that host or a loopback name,
   * and from no other host's web page, against DNS rebinding (request-guards.ts). Unset: any Host,
   * right when keys are checked, since a page cannot present the key.
   */
  unauthenticated?: { listenHost: string };
}

/** Who makes a request: the owner a session is bound to (the key's team) and the key its calls use. */
export interface McpCaller {
  owner: string;
  apiKey?: string;
}

interface Entry {
  id: string;
  owner: string;
  session: McpSession;
  server: McpServer;
  transport: StreamableHTTPServerTransport;
  lastActive: number;
  /**
   * Calls under way: a session serving one is not idle. The client's listening stream (GET) does not
   * count, or a client left open would hold its session, and its code sandbox, for ever.
   */
  inflight: number;
}

export class McpHttpSessions {
  private readonly sessions = new Map<string, Entry>();
  /** Sessions being initialized, by owner: they count against the bound before they have an id. */
  private readonly opening = new Map<string, number>();
  private readonly idleMs: number;
  private readonly maxPerOwner: number;
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly opts: McpHttpOptions) {
    this.idleMs = opts.idleMs ?? SESSION_IDLE_MS;
    this.maxPerOwner = opts.maxSessionsPerOwner ?? MAX_SESSIONS_PER_OWNER;
    this.sweeper = setInterval(() => this.sweep(), Math.max(10, Math.min(60_000, this.idleMs / 2)));
    this.sweeper.unref();
  }

  /** One request to /mcp (POST, GET or DELETE); `body` is the parsed JSON of a POST. */
  async handle(req: IncomingMessage, res: ServerResponse, body: unknown, caller: McpCaller): Promise<void> {
    // the tools' calls use the key of the request that made them
    (req as IncomingMessage & { auth?: AuthInfo }).auth = { token: caller.apiKey ?? '', clientId: caller.owner, scopes: [] };
    if (this.closed) return sendRpcError(res, 503, -32000, 'the server is stopping: retry shortly');
    const refused = (this.opts.unauthenticated ? hostRefusal(req, this.opts.unauthenticated.listenHost) : undefined) ?? batchRefusal(body);
    if (refused) return sendRpcError(res, refused.status, refused.code, refused.message);
    const header = req.headers['mcp-session-id'];
    const sessionId = Array.isArray(header) ? header[0] : header;
    if (sessionId !== undefined) {
      const entry = this.sessions.get(sessionId);
      if (!entry || entry.owner !== caller.owner) {
        return sendRpcError(res, 404, -32001, 'Session not found: it ended, expired or is not yours; start a new one with an initialize request without Mcp-Session-Id');
      }
      if (caller.apiKey) entry.session.apiKey = caller.apiKey;
      return this.serve(entry, req, res, body);
    }
    if (req.method !== 'POST' || !isInitializeRequest(body)) {
      return sendRpcError(res, 400, -32000, 'Bad Request: no Mcp-Session-Id header; a session starts with an initialize request (POST)');
    }
    const open = this.countOf(caller.owner);
    if (open >= this.maxPerOwner) {
      return sendRpcError(res, 429, -32000, `too many MCP sessions: ${open} are open for your team and ${this.maxPerOwner} is the most; `
        + `end the ones you no longer use (DELETE /mcp with their Mcp-Session-Id) or let them expire after ${Math.round(this.idleMs / 60_000)} idle minutes`);
    }
    await this.open(req, res, body, caller);
  }

  /** Closes every session (the API is stopping). */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    await Promise.all([...this.sessions.values()].map((e) => this.closeEntry(e, 'the server is stopping')));
  }

  private countOf(owner: string): number {
    let n = this.opening.get(owner) ?? 0;
    for (const e of this.sessions.values()) if (e.owner === owner) n++;
    return n;
  }

  private async open(req: IncomingMessage, res: ServerResponse, body: unknown, caller: McpCaller): Promise<void> {
    const id = randomUUID();
    const session = new McpSession(id, {
      apiUrl: this.opts.apiUrl(), apiKey: caller.apiKey, sandboxUrl: this.opts.sandboxUrl, publicSandboxUrl: this.opts.publicSandboxUrl,
      ...(this.opts.apiHeaders ? { apiHeaders: this.opts.apiHeaders } : {}),
    }, this.opts.log);
    const server = createMcpServer(session);
    let entry!: Entry;
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      onsessioninitialized: () => { this.sessions.set(id, entry); },
      // DELETE: answered once the session's code sandbox is killed
      onsessionclosed: () => this.closeEntry(entry, 'the client ended it'),
    });
    entry = { id, owner: caller.owner, session, server, transport, lastActive: Date.now(), inflight: 0 };
    this.opening.set(caller.owner, (this.opening.get(caller.owner) ?? 0) + 1);
    try {
      await server.connect(transport);
      await this.serve(entry, req, res, body);
    } finally {
      const left = (this.opening.get(caller.owner) ?? 1) - 1;
      if (left > 0) this.opening.set(caller.owner, left);
      else this.opening.delete(caller.owner);
    }
    if (!this.sessions.has(id)) {
      // the initialize was refused (a bad protocol version, say): nothing to keep
      await server.close();
      await session.close();
    } else {
      this.opts.log.info({ session: id, owner: caller.owner }, 'MCP session opened');
    }
  }

  private async serve(entry: Entry, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    entry.lastActive = Date.now();
    if (req.method !== 'GET') {
      entry.inflight++;
      res.once('close', () => {
        entry.inflight--;
        entry.lastActive = Date.now();
      });
    }
    try {
      await entry.transport.handleRequest(req, res, body);
    } catch (err) {
      this.opts.log.warn({ session: entry.id, method: req.method, err: (err as Error)?.stack ?? String(err) }, 'MCP request failed');
      if (!res.headersSent) sendRpcError(res, 500, -32603, 'internal error');
      else res.end();
    }
  }

  private sweep(): void {
    const now = Date.now();
    for (const e of this.sessions.values()) {
      if (e.inflight === 0 && now - e.lastActive >= this.idleMs) void this.closeEntry(e, 'idle');
    }
  }

  private async closeEntry(entry: Entry, why: string): Promise<void> {
    if (this.sessions.get(entry.id) !== entry) return;
    this.sessions.delete(entry.id);
    try {
      await entry.server.close();
    } catch (err) {
      this.opts.log.warn({ session: entry.id, err: (err as Error).message }, 'closing an MCP session\'s transport failed');
    }
    await entry.session.close();
    this.opts.log.info({ session: entry.id, owner: entry.owner, why }, 'MCP session closed');
  }
}

/** A JSON-RPC error answer outside any session, as the MCP SDK's own refusals look. */
function sendRpcError(res: ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}
