/**
 * The gateway's one endpoint: streamable HTTP at /mcp, behind `Authorization: Bearer <token>`
 * (compared in constant time; 401 otherwise, 404 on any other path). Sessions are stateful: an
 * `initialize` without a session id opens one (a transport and a front server of its own), the
 * `Mcp-Session-Id` it answers routes the session's later requests, DELETE or an hour without a
 * request ends it. At most MAX_SESSIONS are open at once; another `initialize` closes the least
 * recently used one to make room.
 */
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Log } from './log.ts';

const MAX_BODY = 16 * 1024 * 1024;
const SESSION_IDLE_MS = 60 * 60_000;
/**
 * Sessions open at once. Each holds a Server and a transport until DELETE or an hour idle: without
 * a bound, a client looping over `initialize` grew the daemon (and the sandbox's memory under its
 * servers) for an hour. A few clients with a few sessions each are far below it. At the bound a new
 * `initialize` evicts the least recently used session rather than being refused: many MCP clients
 * open a session per turn and never DELETE it, and a 429 locked such an agent out for up to an hour.
 */
const MAX_SESSIONS = 64;

interface Session { transport: StreamableHTTPServerTransport; server: Server; lastSeen: number }

export interface GatewayHttp {
  server: HttpServer;
  sessions(): number;
  close(): Promise<void>;
}

function jsonRpcError(res: ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

const digest = (text: string) => createHash('sha256').update(text).digest();

/** A check of the Authorization header against the token, in constant time (equal-length digests). */
function bearerCheck(token: string): (header: string | undefined) => boolean {
  const expected = digest(token);
  return (header) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
    return m !== null && timingSafeEqual(digest(m[1]), expected);
  };
}

function readBody(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(Object.assign(new Error(`the body is over ${MAX_BODY} bytes`), { status: 413 }));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (err) {
        reject(Object.assign(new Error(`the body is not JSON: ${(err as Error).message}`), { status: 400 }));
      }
    });
    req.on('error', reject);
  });
}

const isInitialize = (body: unknown) => (Array.isArray(body) ? body.some((m) => isInitializeRequest(m)) : isInitializeRequest(body));

export async function startHttp(o: { host: string; port: number; token: string; log: Log; newServer: () => Server; maxSessions?: number }): Promise<GatewayHttp> {
  const authorized = bearerCheck(o.token);
  // in order of use, least recent first: touch() moves a session to the end on each request
  const sessions = new Map<string, Session>();
  const touch = (id: string, s: Session) => {
    s.lastSeen = Date.now();
    sessions.delete(id);
    sessions.set(id, s);
  };
  const maxSessions = o.maxSessions ?? MAX_SESSIONS;
  // initializes under way: counted with the open sessions, so that many at once cannot pass the bound
  let opening = 0;

  async function open(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const server = o.newServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, server, lastSeen: Date.now() });
        o.log(`session ${id} opened (${sessions.size} open)`);
      },
    });
    transport.onclose = () => {
      const id = transport.sessionId;
      if (id && sessions.delete(id)) o.log(`session ${id} closed (${sessions.size} open)`);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://gateway').pathname;
    if (path !== '/mcp') return jsonRpcError(res, 404, -32000, `Not found: the gateway serves MCP at /mcp`);
    if (!authorized(req.headers.authorization)) {
      return jsonRpcError(res, 401, -32001, 'Unauthorized: send Authorization: Bearer <the gateway access token>', { 'www-authenticate': 'Bearer realm="mcp-gateway"' });
    }
    const id = req.headers['mcp-session-id'];
    const session = typeof id === 'string' ? sessions.get(id) : undefined;
    if (req.method === 'POST') {
      const body = await readBody(req);
      if (session) {
        touch(id as string, session);
        return session.transport.handleRequest(req, res, body);
      }
      if (id !== undefined) return jsonRpcError(res, 404, -32001, 'Session not found');
      if (!isInitialize(body)) return jsonRpcError(res, 400, -32000, 'Bad Request: No valid session ID provided');
      // At the bound, close the least recently used sessions to make room (see MAX_SESSIONS). Each
      // leaves the map at once, so the bound holds before its transport has finished closing.
      for (const [lruId, lru] of sessions) {
        if (sessions.size + opening < maxSessions) break;
        sessions.delete(lruId);
        o.log(`session ${lruId} closed to make room for a new one: ${maxSessions} open, the most the gateway keeps (idle ${Math.round((Date.now() - lru.lastSeen) / 1000)} s)`);
        lru.transport.close().catch((err: Error) => o.log(`closing session ${lruId}: ${err.message}`));
      }
      // Only initializes still under way fill the bound (nothing open to close): refuse this one.
      if (sessions.size + opening >= maxSessions) {
        o.log(`initialize refused: ${opening} initializes under way, the most sessions the gateway keeps`);
        return jsonRpcError(res, 429, -32000, `Too many sessions: ${maxSessions} initializes are under way, the most this gateway keeps; retry`);
      }
      opening++;
      try {
        return await open(req, res, body);
      } finally {
        opening--;
      }
    }
    if (req.method === 'GET' || req.method === 'DELETE') {
      if (!session) return jsonRpcError(res, id === undefined ? 400 : 404, -32000, id === undefined ? 'Bad Request: No valid session ID provided' : 'Session not found');
      touch(id as string, session);
      return session.transport.handleRequest(req, res);
    }
    return jsonRpcError(res, 405, -32000, 'Method not allowed', { allow: 'GET, POST, DELETE' });
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: Error & { status?: number }) => {
      o.log(`${req.method} ${req.url}: ${err.stack ?? err.message}`);
      if (!res.headersSent) jsonRpcError(res, err.status ?? 500, err.status === 400 ? -32700 : -32603, err.message);
      else res.end();
    });
  });
  const sweep = setInterval(() => {
    for (const [id, s] of sessions) {
      if (Date.now() - s.lastSeen < SESSION_IDLE_MS) continue;
      o.log(`session ${id} idle for an hour: closing it`);
      s.transport.close().catch((err: Error) => o.log(`closing session ${id}: ${err.message}`));
    }
  }, 60_000);
  sweep.unref();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => o.log(`http server: ${err.message}`));
  return {
    server,
    sessions: () => sessions.size,
    async close() {
      clearInterval(sweep);
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all([...sessions.values()].map((s) => s.transport.close().catch((err: Error) => o.log(`closing a session: ${err.message}`))));
      server.closeAllConnections();
      await closed;
    },
  };
}
