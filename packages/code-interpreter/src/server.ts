/**
 * The HTTP surface of E2B's code interpreter server: /health, /execute and the contexts routes
 * (context-routes.ts). Errors are svc's `{code, message}` body (http-answers.ts).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { CodeLanguage } from '@svc/contracts/code-interpreter';
import { EnvdAccess } from './access.ts';
import { BashKernel } from './bash-kernel.ts';
import { contextRoutes } from './context-routes.ts';
import { Contexts, type KernelFactory } from './contexts.ts';
import { streamExecution } from './execute.ts';
import { header, sendError, sendJson, sendProblem } from './http-answers.ts';
import { JsKernel } from './js-kernel.ts';
import type { Kernel, Log } from './kernel.ts';
import { PythonKernel } from './python-kernel.ts';
import { isProblem, MAX_EXECUTE_BODY_BYTES, parseExecuteRequest, readJson } from './requests.ts';
import { ENVD_ENVS_URL, SandboxEnv } from './sandbox-env.ts';

export interface CodeInterpreterOptions {
  log: Log;
  /** Where contexts start unless they name a cwd (E2B: /home/user). */
  defaultCwd: string;
  /** envd's /envs (sandbox-env.ts, and the access check of access.ts); tests point it elsewhere. */
  envdEnvsUrl?: string;
  keepaliveMs?: number;
  /** How many contexts POST /contexts may have made at once (contexts.ts MAX_CONTEXTS). */
  maxContexts?: number;
  /** The HTTP server's deadlines (HTTP_TIMEOUTS); tests shorten them. */
  httpTimeouts?: Partial<HttpTimeouts>;
}

/**
 * Deadlines for receiving a request. They end at the request's last byte, so the answer of an
 * execution may stream for as long as the code runs (the SDK's own `timeoutMs` ends that, by
 * closing the request). Before they were set (requestTimeout 0), a client that sent its headers
 * or body a byte at a time held a connection and its buffers for ever.
 */
interface HttpTimeouts {
  /** The whole request, headers and body: twice the SDKs' default request timeout (60 s), which ends sooner anyway. */
  requestMs: number;
  headersMs: number;
  /** How often Node checks the two. */
  checkEveryMs: number;
}

const HTTP_TIMEOUTS: HttpTimeouts = { requestMs: 120_000, headersMs: 30_000, checkEveryMs: 5_000 };

export interface CodeInterpreter {
  server: Server;
  contexts: Contexts;
  /** Starts the python and javascript default contexts, as E2B's server does when it starts. */
  warmUp(): Promise<void>;
  /** Ends every kernel and closes the server. */
  close(): Promise<void>;
}

const KEEPALIVE_MS = 5_000;

function kernelFactory(log: Log): KernelFactory {
  return (language: CodeLanguage, cwd: string): Kernel => {
    const kernelLog: Log = (level, message, fields) => log(level, message, { language, ...fields });
    if (language === 'python') return new PythonKernel(cwd, kernelLog);
    if (language === 'bash') return new BashKernel(cwd, kernelLog);
    return new JsKernel(language, cwd, kernelLog);
  };
}

export function createCodeInterpreter(opts: CodeInterpreterOptions): CodeInterpreter {
  const { log } = opts;
  const contexts = new Contexts(kernelFactory(log), opts.defaultCwd, log, opts.maxContexts);
  const sandboxEnv = new SandboxEnv(log, opts.envdEnvsUrl);
  const access = new EnvdAccess(opts.envdEnvsUrl ?? ENVD_ENVS_URL, log);
  const keepaliveMs = opts.keepaliveMs ?? KEEPALIVE_MS;
  /** The default contexts' start, settled either way (a failed one is tried again at first use). */
  let warming: Promise<void> = Promise.resolve();

  const contextDeps = { contexts, access, defaultCwd: opts.defaultCwd, log, warming: () => warming };

  const routes = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const method = req.method ?? 'GET';
    res.setHeader('access-control-allow-origin', '*');
    if (method === 'OPTIONS') {
      res.writeHead(204, { 'access-control-allow-methods': '*', 'access-control-allow-headers': '*' });
      return void res.end();
    }

    if (path === '/health') {
      if (method !== 'GET') return sendError(res, 405, 'use GET');
      return sendJson(res, 200, 'OK');
    }

    if (path === '/execute') {
      if (method !== 'POST') return sendError(res, 405, 'use POST');
      const refused = await access.check(header(req, 'x-access-token'));
      if (refused) return sendError(res, refused.status, refused.message);
      const body = await readJson(req, MAX_EXECUTE_BODY_BYTES);
      if (isProblem(body)) return sendProblem(res, body);
      const request = parseExecuteRequest(body.json);
      if (isProblem(request)) return sendProblem(res, request);
      let context;
      if (request.context_id) {
        context = contexts.get(request.context_id);
        if (!context) return sendError(res, 404, `Context ${request.context_id} not found`);
      } else {
        // Not awaited: a kernel that fails to start is an `error` line of the answer.
        context = contexts.defaultFor(request.language ?? 'python');
      }
      return streamExecution(context, request, header(req, 'x-access-token'), res, { sandboxEnv, log, keepaliveMs });
    }

    if (await contextRoutes(req, res, path, contextDeps)) return;
    return sendError(res, 404, `no route ${method} ${path}`);
  };

  const timeouts = { ...HTTP_TIMEOUTS, ...opts.httpTimeouts };
  const server = createServer({
    requestTimeout: timeouts.requestMs,
    headersTimeout: timeouts.headersMs,
    connectionsCheckingInterval: timeouts.checkEveryMs,
    keepAliveTimeout: 65_000,
  }, (req, res) => {
    routes(req, res).catch((err: Error) => {
      log('error', `request failed: ${err.stack ?? err.message}`, { method: req.method, path: req.url?.split('?')[0] });
      sendError(res, 500, err.message);
    });
  });

  return {
    server,
    contexts,
    async warmUp() {
      const started = Promise.all([contexts.defaultFor('python'), contexts.defaultFor('javascript')]);
      warming = started.then(() => undefined, () => { /* warmUp's caller gets the failure from `started`; listing only waits for the attempt */ });
      await started;
    },
    async close() {
      await contexts.shutdownAll();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
