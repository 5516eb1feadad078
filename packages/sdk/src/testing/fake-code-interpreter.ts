/**
 * A code interpreter double speaking its wire (contracts/code-interpreter.ts), for tests of the
 * SDK's streaming, clocks and error mapping and of the CLI. What `POST /execute` answers is up to
 * the test (`onExecute`); contexts live in memory. Every request is recorded.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import {
  normalizeLanguage, type CodeContext, type CreateContextRequest, type ExecuteRequest, type ExecutionLine,
} from '@svc/contracts/code-interpreter';

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: unknown;
}

/** How a test answers one `POST /execute`. Nothing is sent until it calls one of these. */
export interface ExecuteAnswer {
  /** Sends the 200 and its headers (the first `line` does it too). */
  start(): void;
  line(line: ExecutionLine): void;
  /** Raw bytes of the body, for lines split across chunks. */
  raw(bytes: Uint8Array | string): void;
  /** `end_of_execution` and the end of the answer. */
  end(): void;
  /** An error answer: svc's `{code, message}` body. */
  fail(status: number, message: string): void;
  /** Drops the connection without ending the answer. */
  cut(): void;
  /** Resolves when the client has gone before the answer ended. */
  readonly clientGone: Promise<void>;
}

export type ExecuteHandler = (request: ExecuteRequest, answer: ExecuteAnswer) => void | Promise<void>;

export interface FakeCodeInterpreter {
  url: string;
  requests: RecordedRequest[];
  contexts: Map<string, CodeContext>;
  /** Default: the code printed on stdout, `'ok'` as the main result, execution count 1. */
  onExecute: ExecuteHandler;
  close(): Promise<void>;
}

const stamp = () => new Date().toISOString();

export const echoExecution: ExecuteHandler = (request, answer) => {
  answer.line({ type: 'stdout', text: request.code, timestamp: stamp() });
  answer.line({ type: 'result', text: 'ok', is_main_result: true });
  answer.line({ type: 'number_of_executions', execution_count: 1 });
  answer.end();
};

export async function startFakeCodeInterpreter(): Promise<FakeCodeInterpreter> {
  const fake: FakeCodeInterpreter = {
    url: '',
    requests: [],
    contexts: new Map(),
    onExecute: echoExecution,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };

  const routes = async (req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (req.method === 'POST' && path === '/execute') return fake.onExecute(body as ExecuteRequest, answerOf(res));
    if (path === '/contexts' && req.method === 'GET') return sendJson(res, 200, [...fake.contexts.values()]);
    if (path === '/contexts' && req.method === 'POST') {
      const r = (body ?? {}) as CreateContextRequest;
      const context = { id: randomUUID(), language: normalizeLanguage(r.language), cwd: r.cwd ?? '/home/user' };
      fake.contexts.set(context.id, context);
      return sendJson(res, 200, context);
    }
    const match = /^\/contexts\/([^/]+)(\/restart)?$/.exec(path);
    if (match) {
      const id = decodeURIComponent(match[1]);
      if (!fake.contexts.has(id)) return sendJson(res, 404, { code: 404, message: `Context ${id} not found` });
      if (!match[2]) fake.contexts.delete(id);
      res.writeHead(204).end();
      return;
    }
    sendJson(res, 404, { code: 404, message: `no route ${req.method} ${path}` });
  };

  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString();
    const body = text ? JSON.parse(text) : undefined;
    fake.requests.push({ method: req.method ?? 'GET', path: req.url ?? '/', headers: req.headers, body });
    await routes(req, res, body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  fake.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return fake;
}

function answerOf(res: ServerResponse): ExecuteAnswer {
  const clientGone = new Promise<void>((resolve) => {
    res.on('close', () => { if (!res.writableFinished) resolve(); });
  });
  const start = () => {
    if (!res.headersSent) {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.flushHeaders();
    }
  };
  return {
    start,
    line(line) { start(); res.write(`${JSON.stringify(line)}\n`); },
    raw(bytes) { start(); res.write(bytes); },
    end() { start(); res.end(`${JSON.stringify({ type: 'end_of_execution' })}\n`); },
    fail(status, message) { sendJson(res, status, { code: status, message }); },
    cut() { start(); res.destroy(); },
    clientGone,
  };
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
