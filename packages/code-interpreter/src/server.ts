/**
 * The HTTP surface of E2B's code interpreter server: /health, /execute and the contexts routes.
 * Errors are svc's `{code, message}` body; the SDK shows a 404's body and the status otherwise.
 */
import { existsSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isAbsolute } from 'node:path';
import { boundedMessage } from '@svc/common/errors';
import type { CodeLanguage } from '@svc/contracts/code-interpreter';
import { BashKernel } from './bash-kernel.ts';
import { Contexts, type KernelFactory } from './contexts.ts';
import { streamExecution } from './execute.ts';
import { JsKernel } from './js-kernel.ts';
import type { Kernel, Log } from './kernel.ts';
import { PythonKernel } from './python-kernel.ts';
import { isProblem, parseCreateContext, parseExecuteRequest, readJson, type HttpProblem } from './requests.ts';
import { ENVD_ENVS_URL, SandboxEnv } from './sandbox-env.ts';
import { EnvdAccess } from './access.ts';

export interface CodeInterpreterOptions {
  log: Log;
  /** Where contexts start unless they name a cwd (E2B: /home/user). */
  defaultCwd: string;
  /** envd's /envs (sandbox-env.ts, and the access check of access.ts); tests point it elsewhere. */
  envdEnvsUrl?: string;
  keepaliveMs?: number;
}

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
  const contexts = new Contexts(kernelFactory(log), opts.defaultCwd, log);
  const sandboxEnv = new SandboxEnv(log, opts.envdEnvsUrl);
  const access = new EnvdAccess(opts.envdEnvsUrl ?? ENVD_ENVS_URL, log);
  const keepaliveMs = opts.keepaliveMs ?? KEEPALIVE_MS;
  /** The default contexts' start, settled either way (a failed one is tried again at first use). */
  let warming: Promise<void> = Promise.resolve();

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
      const body = await readJson(req);
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

    if (path === '/contexts') {
      // E2B's server starts its default contexts before it serves: a list waits for them (and
      // shows them), while a create answers as soon as the service listens (docs/code-interpreter.md).
      if (method === 'GET') return sendJson(res, 200, (await warming, contexts.list()));
      if (method !== 'POST') return sendError(res, 405, 'use GET or POST');
      await warming; // contexts made after the defaults, as E2B's list orders them
      const body = await readJson(req);
      if (isProblem(body)) return sendProblem(res, body);
      const request = parseCreateContext(body.json);
      if (isProblem(request)) return sendProblem(res, request);
      const cwd = request.cwd ?? opts.defaultCwd;
      if (!isAbsolute(cwd) || !isDirectory(cwd)) return sendError(res, 400, `cwd ${cwd} is not an existing directory`);
      try {
        const context = await contexts.create(request.language, cwd);
        return sendJson(res, 200, { id: context.id, language: context.language, cwd: context.cwd });
      } catch (err) {
        return sendError(res, 500, (err as Error).message);
      }
    }

    const match = /^\/contexts\/([^/]+)(\/restart)?$/.exec(path);
    if (match) {
      const id = decodeURIComponent(match[1]);
      if (match[2]) {
        if (method !== 'POST') return sendError(res, 405, 'use POST');
        try {
          if (!(await contexts.restart(id))) return sendError(res, 404, `Context ${id} not found`);
        } catch (err) {
          return sendError(res, 500, `Failed to restart context ${id}: ${(err as Error).message}`);
        }
        return sendEmpty(res);
      }
      if (method !== 'DELETE') return sendError(res, 405, 'use DELETE');
      if (!(await contexts.remove(id))) return sendError(res, 404, `Context ${id} not found`);
      return sendEmpty(res);
    }

    return sendError(res, 404, `no route ${method} ${path}`);
  };

  const server = createServer({ requestTimeout: 0, keepAliveTimeout: 65_000 }, (req, res) => {
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

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function isDirectory(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory();
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function sendEmpty(res: ServerResponse): void {
  res.writeHead(204);
  res.end();
}

function sendProblem(res: ServerResponse, p: HttpProblem): void {
  sendError(res, p.status, p.message);
}

function sendError(res: ServerResponse, status: number, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, status, { code: status, message: boundedMessage(message) });
}
