import type { IncomingMessage, ServerResponse } from 'node:http';
import { ConnectError } from './connect/code.ts';
import { ConnectRouter, writeUnaryError } from './connect/router.ts';
import { EntryReader } from './filesystem/entry.ts';
import { MetadataStore } from './filesystem/metadata-store.ts';
import { filesystemService } from './filesystem/service.ts';
import { WatcherRegistry } from './filesystem/watcher-registry.ts';
import { Filesystem } from '@svc/contracts/envd/filesystem/filesystem_pb';
import { Process } from '@svc/contracts/envd/process/process_pb';
import { handleDownload } from './http/download.ts';
import { handleAfterRestore } from './http/after-restore.ts';
import { handleInit } from './http/init.ts';
import { MetricsCollector } from './http/metrics.ts';
import { sendError, sendFailure, sendJson } from './http/respond.ts';
import { handleUpload } from './http/upload.ts';
import { ProcessLauncher } from './process/launcher.ts';
import { ProcessRegistry } from './process/registry.ts';
import { processService } from './process/service.ts';
import type { Spawner } from './process/spawner.ts';
import { basicAuthUsername, type EnvdState } from './state.ts';
import type { AfterRestore } from './system/after-restore.ts';

export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface EnvdServerOptions {
  /** Where uploaded files' metadata is kept across envd restarts (none: memory only). */
  metadataFile?: string;
  /** POST /svc/memory-pressure: the node agent saw the sandbox's memory filling up. */
  onMemoryPressure?: () => void;
  /** envd's spawner (process/spawner.ts), when the node agent provides one. */
  spawner?: Spawner;
  /** POST /svc/after-restore: a microvm guest's clock and random pool renewed (system/after-restore.ts). */
  afterRestore?: AfterRestore;
}

const maxMessageBytes = 64 * 1024 * 1024;
const unauthorizedMessage = 'unauthorized access, please provide a valid access token or method signing if supported';

/** Wires envd's services into one node:http request handler. */
export function createRequestHandler(state: EnvdState, options: EnvdServerOptions = {}): RequestHandler {
  const metadata = new MetadataStore(options.metadataFile);
  const entries = new EntryReader(state.users, metadata);
  const router = new ConnectRouter({ maxMessageBytes });
  router.register(Process, processService(state, new ProcessRegistry(), new ProcessLauncher(state, options.spawner)));
  router.register(Filesystem, filesystemService(state, entries, metadata, new WatcherRegistry()));
  const metrics = new MetricsCollector();

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://envd');
    const route = `${req.method} ${url.pathname}`;
    if (req.headers.origin) setCorsHeaders(res);
    if (req.method === 'OPTIONS') return preflight(req, res);
    if (route === 'GET /health') {
      res.writeHead(204, { 'cache-control': 'no-store' });
      return void res.end();
    }
    // From the node agent, straight to the sandbox address (the data-plane proxy refuses it
    // without the token). It only makes the memory guard read faster for a while: no token needed.
    if (route === 'POST /svc/memory-pressure') {
      options.onMemoryPressure?.();
      res.writeHead(204);
      return void res.end();
    }

    if (router.owns(url.pathname)) {
      if (state.hasAccessToken && !state.accessTokenMatches(tokenHeader(req))) {
        return writeUnaryError(res, new ConnectError('unauthenticated', unauthorizedMessage));
      }
      const username = basicAuthUsername(req.headers.authorization);
      if (username !== undefined && !state.users.byName(username)) {
        return writeUnaryError(res, new ConnectError('unauthenticated', `invalid username: '${username}'`));
      }
      return router.handle(req, res, url.pathname);
    }

    try {
      switch (route) {
        case 'GET /files':
        case 'HEAD /files':
          return await handleDownload(state, req, res, url.searchParams);
        case 'POST /files':
          return await handleUpload(state, metadata, req, res, url.searchParams);
        case 'POST /init':
          return await handleInit(state, req, res);
      }
      if (state.hasAccessToken && !state.accessTokenMatches(tokenHeader(req))) return sendError(res, 401, unauthorizedMessage);
      switch (route) {
        case 'GET /envs':
          return sendJson(res, 200, state.envVars());
        case 'GET /metrics':
          return sendJson(res, 200, await metrics.collect());
        case 'POST /svc/after-restore':
          // Only a microvm guest's envd has the helper; elsewhere the route does not exist.
          if (options.afterRestore) return await handleAfterRestore(options.afterRestore, req, res);
          return sendError(res, 404, `no route for ${route}`);
        default:
          return sendError(res, 404, `no route for ${route}`);
      }
    } catch (err) {
      if ((err as ConnectError).code === 'unauthenticated') return sendError(res, 401, (err as Error).message);
      sendFailure(res, err);
    }
  };

  return (req, res) => {
    handle(req, res).catch((err) => sendFailure(res, err));
  };
}

function tokenHeader(req: IncomingMessage): string | undefined {
  const value = req.headers['x-access-token'];
  return Array.isArray(value) ? value[0] : value;
}

const exposedHeaders = [
  'Connect-Protocol-Version',
  'Connect-Content-Encoding',
  'Connect-Accept-Encoding',
  'Grpc-Status',
  'Grpc-Message',
  'Grpc-Status-Details-Bin',
  'Content-Encoding',
  'Content-Disposition',
  'Content-Range',
  'Location',
  'Cache-Control',
  'X-Content-Type-Options',
].join(', ');

function setCorsHeaders(res: ServerResponse): void {
  res.setHeader('access-control-allow-origin', '*');
  res.setHeader('access-control-expose-headers', exposedHeaders);
}

function preflight(req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(204, {
    'access-control-allow-origin': '*',
    'access-control-allow-methods': 'HEAD, GET, POST, PUT, PATCH, DELETE',
    'access-control-allow-headers': req.headers['access-control-request-headers'] ?? '*',
    'access-control-max-age': '7200',
  });
  res.end();
}
