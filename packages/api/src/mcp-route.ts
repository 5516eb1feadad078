/**
 * `/mcp`: svc's MCP server over streamable HTTP on the API port (packages/mcp, docs/mcp.md).
 * The API's own authentication has run by then (a missing or wrong key is its 401); the request
 * is handed to the MCP transport as it came, with the caller's key for the tools' calls, which go
 * back through this API's loopback address, so scoping, quotas and errors are the public API's.
 * A session is bound to the key's team.
 */
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Logger } from '@svc/common';
import { McpHttpSessions } from '@svc/mcp';
import { presentedKey } from './auth.ts';
import { CALLBACK_KEY_ID } from './auth-callback.ts';
import { identityOf } from './request-identity.ts';

const MCP_PATH = '/mcp';

export interface McpRouteOptions {
  /** The data-plane proxy the tools reach sandboxes through. */
  sandboxUrl: string;
  /** The data plane as users reach it (HTTPS where it listens), for get_url. */
  publicSandboxUrl: string;
  /** Sent with the tools' calls: they come back through this API, from its own address (auth.ts AuthConfig.internalCaller). */
  apiHeaders: Record<string, string>;
  logger: Logger;
  /**
   * Set when the gateway checks no key (api.api_key and api.auth_callback_url empty, on loopback
   * only): /mcp then serves only this machine's names, so a web page rebinding its own name to
   * 127.0.0.1 cannot run tools through a visitor's browser.
   */
  unauthenticated?: { listenHost: string };
}

/** Registers /mcp; the answer's close() ends every session, killing their code sandboxes while the API still answers. */
export function registerMcpRoute(app: FastifyInstance, opts: McpRouteOptions): { close(): Promise<void> } {
  const sessions = new McpHttpSessions({
    apiUrl: () => loopbackUrl(app),
    sandboxUrl: opts.sandboxUrl,
    publicSandboxUrl: opts.publicSandboxUrl,
    apiHeaders: opts.apiHeaders,
    log: opts.logger,
    ...(opts.unauthenticated ? { unauthenticated: opts.unauthenticated } : {}),
  });
  // Sessions still open when the server closes without close() first: their event streams end; their
  // code sandboxes cannot be killed through an API that answers 503 by then, so they end at their idle timeout.
  app.addHook('preClose', async () => { await sessions.close(); });
  app.route({
    method: ['GET', 'POST', 'DELETE'],
    url: MCP_PATH,
    handler: async (req, reply) => {
      reply.hijack();
      await sessions.handle(req.raw, reply.raw, req.body, { owner: ownerOf(req), apiKey: presentedKey(req) });
    },
  });
  return { close: () => sessions.close() };
}

/**
 * The team of the key; for a caller the operator's auth callback let in (who may share a team
 * with callers of other credentials), the credential itself; without keys, everyone alike.
 */
function ownerOf(req: FastifyRequest): string {
  const identity = identityOf(req);
  if (identity && identity.keyId !== CALLBACK_KEY_ID) return `team:${identity.teamId}`;
  const key = presentedKey(req);
  return key ? `key:${createHash('sha256').update(key).digest('hex')}` : 'anonymous';
}

/** This API as the MCP tools' SDK calls it: where it listens, a wildcard address as loopback. */
function loopbackUrl(app: FastifyInstance): string {
  const addr = app.server.address() as AddressInfo;
  const host = addr.address === '0.0.0.0' ? '127.0.0.1' : addr.address === '::' ? '[::1]' : addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return `http://${host}:${addr.port}`;
}
