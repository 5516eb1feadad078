import type { FastifyInstance } from 'fastify';
import { createHttpApp, parseListen, type Logger, type SvcConfig } from '@svc/common';
import { MasterClient } from '@svc/contracts/master';
import { authenticate } from './auth.ts';
import { forwardToMaster } from './forward.ts';
import { CONTEXT_FILES_UPLOAD_PATH, MASTER_TEMPLATE_PREFIXES, PUBLIC_API } from '@svc/contracts';
import { renderDocsPage } from './docs-page.ts';
import { registerSandboxRoutes } from './routes.ts';

export interface ApiGateway {
  url: string;
  app: FastifyInstance;
  close(): Promise<void>;
}

/** The public REST gateway: auth, E2B wire shapes, forwarding to the master. */
export async function startApiGateway(cfg: SvcConfig, opts: { logger: Logger; masterUrl?: string }): Promise<ApiGateway> {
  const masterUrl = opts.masterUrl ?? cfg.master.addr;
  const master = new MasterClient(masterUrl, { timeoutMs: (cfg.master.create_timeout_insec + 30) * 1000 });
  const app = createHttpApp({ logger: opts.logger, bodyLimit: cfg.api.max_body_bytes });
  const apiKeys = [cfg.api.api_key, ...cfg.api.previous_api_keys.split(',')].map((k) => k.trim()).filter(Boolean);
  const auth = { apiKeys: cfg.api.api_key ? apiKeys : [], callbackUrl: cfg.api.auth_callback_url };
  app.addHook('onRequest', async (req) => { await authenticate(req, auth); });

  app.get('/health', async () => ({ ok: true }));
  app.get('/openapi.json', async () => PUBLIC_API);
  const docsPage = renderDocsPage();
  app.get('/docs', async (_req, reply) => reply.type('text/html; charset=utf-8').send(docsPage));
  registerSandboxRoutes(app, master, cfg.sandbox_domain);
  // A build's context files stream through to the master, which checks the URL's signature.
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null));
    scope.put(`${CONTEXT_FILES_UPLOAD_PATH}/:hash`, (req, reply) => forwardToMaster(req, reply, masterUrl, { raw: true }));
  });
  for (const prefix of MASTER_TEMPLATE_PREFIXES) {
    app.all(prefix, (req, reply) => forwardToMaster(req, reply, masterUrl));
    app.all(`${prefix}/*`, (req, reply) => forwardToMaster(req, reply, masterUrl));
  }

  const { host, port } = parseListen(cfg.api.listen);
  await app.listen({ host, port });
  const url = `http://${host}:${(app.server.address() as { port: number }).port}`;
  opts.logger.info({ url }, 'API gateway listening');
  return { url, app, close: () => app.close() };
}
