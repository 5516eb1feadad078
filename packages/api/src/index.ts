import type { FastifyInstance, FastifyRequest } from 'fastify';
import { join } from 'node:path';
import { ConfigError, createHttpApp, hostForClient, isLoopbackHost, parseListen, sendMetrics, type Logger, type SvcConfig } from '@svc/common';
import { MasterClient } from '@svc/contracts/master';
import { randomBytes } from 'node:crypto';
import { authenticate, INTERNAL_CALLER_HEADER, type AuthConfig } from './auth.ts';
import { AuthCallback } from './auth-callback.ts';
import { ClientAddresses } from './client-address.ts';
import { checkPath } from './path-guard.ts';
import { TeamsClient } from '@svc/contracts/teams';
import { KeyVerifier } from './key-verifier.ts';
import { MinuteCounter } from './rate-limits.ts';
import { ApiAuditLog } from './audit-log.ts';
import { identityOf, requireAdmin } from './request-identity.ts';
import { registerTeamRoutes } from './team-routes.ts';
import { registerVolumeContentRoutes, registerVolumeRoutes } from './volume-routes.ts';
import { VolumeTokenBudget } from './volume-token-budget.ts';
import { refuseForeignRequest } from './keyless-guard.ts';

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
import { forwardToMaster } from './forward.ts';
import { CONTEXT_FILES_UPLOAD_PATH, isMasterTemplatePath, MASTER_TEMPLATE_PREFIXES, PUBLIC_API } from '@svc/contracts';
import { hostFileSourceOf } from '@svc/contracts/template-routes';
import { renderDocsPage } from './docs-page.ts';
import { registerConsole } from './console-files.ts';
import { registerSandboxRoutes } from './routes.ts';
import { registerMetricRoutes } from './metric-routes.ts';
import { registerMcpRoute } from './mcp-route.ts';
import type { MasterAddress } from './master-address.ts';
import { clusterHeaders } from '@svc/contracts/cluster-token';

export interface ApiGateway {
  url: string;
  app: FastifyInstance;
  close(): Promise<void>;
}

export interface ApiGatewayOptions {
  logger: Logger;
  masterUrl?: string;
  /** The data-plane proxy, for the MCP tools (/mcp); default: proxy.bind and proxy.http_port, the proxy of this host. */
  sandboxUrl?: string;
  /** The data plane as users reach it, for the MCP tool get_url; default: its HTTPS listener when proxy.https_port is set, else sandboxUrl. */
  publicSandboxUrl?: string;
}

/** The public REST gateway: auth, E2B wire shapes, forwarding to the master; svc's MCP server at /mcp. */
export async function startApiGateway(cfg: SvcConfig, opts: ApiGatewayOptions): Promise<ApiGateway> {
  // An empty key and no auth callback turn authentication off (docs/configuration.md), for a
  // gateway only this machine reaches: beyond loopback every caller on the network would be the
  // operator. The callback alone authenticates every request, each caller as a team (auth.ts).
  if (!cfg.api.api_key && !cfg.api.auth_callback_url && !isLoopbackHost(parseListen(cfg.api.listen).host)) {
    throw new ConfigError('api.api_key', `is empty and api.auth_callback_url too, and api.listen ${cfg.api.listen} is not a loopback address: every caller on the network would be the operator. Set it (SVC_API_KEY) or the callback, or listen on loopback`);
  }
  const masterAt: MasterAddress = { url: opts.masterUrl ?? cfg.master.addr, headers: clusterHeaders(cfg.cluster_token) };
  const master = new MasterClient(masterAt.url, { timeoutMs: (cfg.master.create_timeout_insec + 30) * 1000, headers: masterAt.headers });
  const app = createHttpApp({ logger: opts.logger, bodyLimit: cfg.api.max_body_bytes, publicFacing: true });
  const apiKeys = [cfg.api.api_key, ...cfg.api.previous_api_keys.split(',')].map((k) => k.trim()).filter(Boolean);
  const operatorTeams = new TeamsClient(masterAt.url, { headers: masterAt.headers });
  const clients = new ClientAddresses(cfg.api.trusted_proxies);
  const clientAddress = (req: FastifyRequest) => clients.of(req);
  const auth: AuthConfig = {
    ...(cfg.api.api_key ? { verifier: new KeyVerifier(apiKeys, operatorTeams) } : {}),
    ...(cfg.api.auth_callback_url ? { callback: new AuthCallback(cfg.api.auth_callback_url, operatorTeams) } : {}),
    maxFailuresPerMin: cfg.api.max_failed_keys_per_min,
    failures: new MinuteCounter(),
    requests: new MinuteCounter(),
    clientAddress,
    internalCaller: randomBytes(32).toString('base64url'),
  };
  // Before the key check: a path that would mean one thing here and another at the master (path-guard.ts).
  app.addHook('onRequest', async (req) => { checkPath(req.url); });
  if (!cfg.api.api_key && !cfg.api.auth_callback_url) {
    const listenHost = parseListen(cfg.api.listen).host;
    app.addHook('onRequest', async (req) => { refuseForeignRequest(req, listenHost); });
  }
  app.addHook('onRequest', async (req) => { await authenticate(req, auth); });
  const audit = new ApiAuditLog(auditLogPath(cfg), opts.logger);
  app.addHook('onResponse', async (req, reply) => {
    if (!MUTATING.has(req.method)) return;
    const id = identityOf(req);
    const params = (req.params ?? {}) as Record<string, unknown>;
    const resource = Object.values(params).find((v): v is string => typeof v === 'string' && v !== '') ?? null;
    audit.write({
      ts: new Date().toISOString(), type: 'api_call', key_id: id?.keyId ?? null, team_id: id?.teamId ?? null, method: req.method,
      route: req.routeOptions.url ?? '', path: req.url.split('?')[0]!, resource, status: reply.statusCode, source: clientAddress(req),
      duration_ms: Math.round(reply.elapsedTime),
    });
  });

  app.get('/health', async () => ({ ok: true }));
  app.get('/openapi.json', async () => PUBLIC_API);
  const docsPage = renderDocsPage();
  app.get('/docs', async (_req, reply) => reply.type('text/html; charset=utf-8').send(docsPage));
  registerConsole(app, cfg.sandbox_domain);
  const sandboxUrl = opts.sandboxUrl ?? `http://${hostForClient(`${cfg.proxy.bind}:${cfg.proxy.http_port}`)}`;
  const publicSandboxUrl = opts.publicSandboxUrl
    ?? (cfg.proxy.https_port > 0 && !opts.sandboxUrl ? `https://${hostForClient(`${cfg.proxy.bind}:${cfg.proxy.https_port}`)}` : sandboxUrl);
  const unauthenticated = !cfg.api.api_key && !cfg.api.auth_callback_url ? { listenHost: parseListen(cfg.api.listen).host } : undefined;
  const mcp = registerMcpRoute(app, {
    sandboxUrl, publicSandboxUrl, apiHeaders: { [INTERNAL_CALLER_HEADER]: auth.internalCaller! }, logger: opts.logger.child({ component: 'mcp' }),
    ...(unauthenticated ? { unauthenticated } : {}),
  });
  // Every metric of this process (in svc up, the whole platform's), for the operator's Prometheus
  // (docs/observability.md, "Prometheus"): no key is a 401 (authenticate), a team's key a 403.
  app.get('/metrics', async (req, reply) => {
    requireAdmin(req, 'metrics');
    return sendMetrics(reply);
  });
  registerSandboxRoutes(app, master, cfg.sandbox_domain);
  registerMetricRoutes(app, masterAt);
  registerTeamRoutes(app, masterAt);
  // The vault and the workload identity issuer's documents are the master's (docs/security.md).
  // Lifecycle events and webhooks too (docs/observability.md).
  for (const path of ['/secrets', '/secrets/*', '/.well-known/openid-configuration', '/.well-known/jwks.json', '/events/sandboxes', '/events/sandboxes/*', '/events/webhooks', '/events/webhooks/*']) {
    app.all(path, (req, reply) => forwardToMaster(req, reply, masterAt));
  }
  // A build's context files stream through to the master, which checks the URL's signature.
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null));
    scope.put(`${CONTEXT_FILES_UPLOAD_PATH}/:hash`, (req, reply) => forwardToMaster(req, reply, masterAt, { raw: true }));
  });
  registerVolumeRoutes(app, masterAt);
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null));
    registerVolumeContentRoutes(scope, masterAt, { budget: new VolumeTokenBudget(auth.failures, auth.maxFailuresPerMin), clientAddress });
  });
  // Template artifacts are whole root filesystems, for nodes; through the API only the operator's,
  // and so are templates made from files on the platform's host, which the template center would
  // read as root for any team that named them (docs/security.md).
  app.addHook('preHandler', async (req) => {
    if (req.url.startsWith('/svc/template/artifact/')) requireAdmin(req, 'template artifacts');
    const fileSource = req.method === 'POST' && isMasterTemplatePath(req.url.split('?')[0]!) ? hostFileSourceOf(req.body) : undefined;
    if (fileSource) requireAdmin(req, `templates made from files on the platform's host (${fileSource})`);
  });
  for (const prefix of MASTER_TEMPLATE_PREFIXES) {
    app.all(prefix, (req, reply) => forwardToMaster(req, reply, masterAt));
    app.all(`${prefix}/*`, (req, reply) => forwardToMaster(req, reply, masterAt));
  }

  const { host, port } = parseListen(cfg.api.listen);
  await app.listen({ host, port });
  const url = `http://${host}:${(app.server.address() as { port: number }).port}`;
  opts.logger.info({ url }, 'API gateway listening');
  return { url, app, close: async () => { await mcp.close(); await app.close(); await audit.close(); } };
}

/** api.audit_log, by default beside the egress proxy's log (docs/security.md, "Audit"). */
export function auditLogPath(cfg: SvcConfig): string {
  return cfg.api.audit_log || join(cfg.data_dir, 'log', 'svc-api', 'audit.jsonl');
}
