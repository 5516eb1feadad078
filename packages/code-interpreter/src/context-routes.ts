/**
 * The contexts routes: `POST /contexts`, `GET /contexts`, `DELETE /contexts/{id}` and
 * `POST /contexts/{id}/restart`, and who may call them.
 *
 * A token that is sent is checked as `/execute` checks it (access.ts): a wrong one is a 401 on
 * every route. The official SDKs (JS 2.8.0 and Python) send no token on these routes, even for a
 * secured sandbox, so a caller without one cannot be told from a stranger who knows the sandbox's
 * id. Such a caller may still create and list contexts (the SDKs must keep working), and may
 * remove or restart only contexts made without the token: a default context (whose variables are
 * the token holder's `/execute` state) or one made with the token needs it. Code runs only
 * through `/execute`, which always needs the token in a secured sandbox.
 */
import { statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isAbsolute } from 'node:path';
import type { Caller, EnvdAccess } from './access.ts';
import { TooManyContexts, type Context, type Contexts } from './contexts.ts';
import { header, sendEmpty, sendError, sendJson, sendProblem } from './http-answers.ts';
import type { Log } from './kernel.ts';
import { isProblem, MAX_CONTEXT_BODY_BYTES, parseCreateContext, readJson } from './requests.ts';

export interface ContextRouteDeps {
  contexts: Contexts;
  access: EnvdAccess;
  defaultCwd: string;
  log: Log;
  /** Settles once the default contexts have been tried: lists and creates come after them, as on E2B. */
  warming: () => Promise<void>;
}

/** Answers a contexts route; false when the path is not one. */
export async function contextRoutes(req: IncomingMessage, res: ServerResponse, path: string, deps: ContextRouteDeps): Promise<boolean> {
  if (path === '/contexts') {
    await listOrCreate(req, res, deps);
    return true;
  }
  const match = /^\/contexts\/([^/]+)(\/restart)?$/.exec(path);
  if (!match) return false;
  await removeOrRestart(req, res, decodeURIComponent(match[1]), Boolean(match[2]), deps);
  return true;
}

async function listOrCreate(req: IncomingMessage, res: ServerResponse, deps: ContextRouteDeps): Promise<void> {
  const method = req.method ?? 'GET';
  if (method !== 'GET' && method !== 'POST') return sendError(res, 405, 'use GET or POST');
  const caller = await callerOf(req, res, deps);
  if (!caller) return;
  // E2B's server starts its default contexts before it serves: a list waits for them (and
  // shows them), and contexts made meanwhile come after them, as E2B's list orders them.
  await deps.warming();
  if (method === 'GET') return sendJson(res, 200, deps.contexts.list());
  await create(req, res, caller, deps);
}

async function removeOrRestart(req: IncomingMessage, res: ServerResponse, id: string, restart: boolean, deps: ContextRouteDeps): Promise<void> {
  const method = req.method ?? 'GET';
  if (restart && method !== 'POST') return sendError(res, 405, 'use POST');
  if (!restart && method !== 'DELETE') return sendError(res, 405, 'use DELETE');
  const caller = await callerOf(req, res, deps);
  if (!caller) return;
  const context = deps.contexts.get(id);
  if (!context) return sendError(res, 404, `Context ${id} not found`);
  if (!mayManage(caller, context)) {
    const why = context.isDefault ? 'is a default context' : 'was made with its access token';
    return sendError(res, 401, `this sandbox is secured and context ${id} ${why}: send the envd access token as X-Access-Token to ${restart ? 'restart' : 'remove'} it`);
  }
  // Either may find it gone meanwhile (another remove): 404 then, as before the check.
  if (!restart) {
    if (!(await deps.contexts.remove(id))) return sendError(res, 404, `Context ${id} not found`);
    return sendEmpty(res);
  }
  try {
    if (!(await deps.contexts.restart(id))) return sendError(res, 404, `Context ${id} not found`);
  } catch (err) {
    return sendError(res, 500, `Failed to restart context ${id}: ${(err as Error).message}`);
  }
  sendEmpty(res);
}

/** Whether the caller may remove or restart the context (the module's comment). */
function mayManage(caller: Caller, context: Pick<Context, 'madeBy'>): boolean {
  return caller === 'holder' || context.madeBy === 'anonymous';
}

async function callerOf(req: IncomingMessage, res: ServerResponse, deps: ContextRouteDeps): Promise<Caller | undefined> {
  const caller = await deps.access.caller(header(req, 'x-access-token'));
  if (typeof caller === 'string') return caller;
  sendError(res, caller.status, caller.message);
  return undefined;
}

async function create(req: IncomingMessage, res: ServerResponse, caller: Caller, deps: ContextRouteDeps): Promise<void> {
  const body = await readJson(req, MAX_CONTEXT_BODY_BYTES);
  if (isProblem(body)) return sendProblem(res, body);
  const request = parseCreateContext(body.json);
  if (isProblem(request)) return sendProblem(res, request);
  const cwd = request.cwd ?? deps.defaultCwd;
  // One answer for every cwd that cannot be used, which names nothing the caller did not send.
  if (!isAbsolute(cwd) || !isDirectory(cwd)) return sendError(res, 400, 'cwd not found');
  try {
    const context = await deps.contexts.create(request.language, cwd, caller);
    return sendJson(res, 200, { id: context.id, language: context.language, cwd: context.cwd });
  } catch (err) {
    if (err instanceof TooManyContexts) return sendError(res, 429, err.message);
    deps.log('error', `a context did not start: ${(err as Error).message}`, { language: request.language });
    return sendError(res, 500, (err as Error).message);
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false; // missing, or not reachable: the same 400 either way
  }
}
