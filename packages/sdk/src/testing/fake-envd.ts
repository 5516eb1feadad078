/**
 * A small envd double speaking the Connect protocol with the JSON codec, for tests of the
 * SDK's framing and headers when the real envd is not at hand. Processes run on the host
 * (no PTY: PTY output is the piped output), files are host files. Every request's headers
 * are recorded.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, watch } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { basename, dirname, join } from 'node:path';

export interface FakeEnvd {
  url: string;
  /** Path and headers of every request, in order. */
  requests: { path: string; headers: IncomingMessage['headers'] }[];
  close(): Promise<void>;
}

interface Proc {
  child: ChildProcess;
  config: { cmd: string; args: string[]; envs: Record<string, string>; cwd?: string };
  listeners: Set<(event: unknown) => void>;
  pty: boolean;
}

const envelope = (flags: number, message: unknown) => {
  const payload = Buffer.from(JSON.stringify(message));
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
};

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

function entry(path: string) {
  const st = statSync(path);
  return {
    name: basename(path), path, size: String(st.size), mode: st.mode & 0o777, permissions: '',
    owner: 'root', group: 'root', modifiedTime: st.mtime.toISOString(),
    type: st.isDirectory() ? 'FILE_TYPE_DIRECTORY' : 'FILE_TYPE_FILE',
  };
}

class RpcError extends Error {
  constructor(readonly code: string, message: string, readonly status: number) { super(message); }
}
const notFound = (what: string) => new RpcError('not_found', `${what} not found`, 404);

export async function startFakeEnvd(): Promise<FakeEnvd> {
  const requests: FakeEnvd['requests'] = [];
  const procs = new Map<number, Proc>();

  const unary: Record<string, (msg: any) => unknown> = {
    'process.Process/List': () => ({
      processes: [...procs.entries()].map(([pid, p]) => ({ pid, config: p.config })),
    }),
    'process.Process/SendSignal': (m) => {
      const p = procs.get(m.process?.pid);
      if (!p) throw notFound(`process ${m.process?.pid}`);
      p.child.kill(m.signal === 'SIGNAL_SIGTERM' ? 'SIGTERM' : 'SIGKILL');
      return {};
    },
    'process.Process/SendInput': (m) => {
      const p = procs.get(m.process?.pid);
      if (!p) throw notFound(`process ${m.process?.pid}`);
      p.child.stdin?.write(Buffer.from(m.input?.stdin ?? m.input?.pty ?? '', 'base64'));
      return {};
    },
    'process.Process/CloseStdin': (m) => {
      const p = procs.get(m.process?.pid);
      if (!p) throw notFound(`process ${m.process?.pid}`);
      p.child.stdin?.end();
      return {};
    },
    'process.Process/Update': (m) => {
      if (!procs.has(m.process?.pid)) throw notFound(`process ${m.process?.pid}`);
      return {};
    },
    'filesystem.Filesystem/Stat': (m) => {
      if (!existsSync(m.path)) throw notFound(`path ${m.path}`);
      return { entry: entry(m.path) };
    },
    'filesystem.Filesystem/ListDir': (m) => {
      if (!existsSync(m.path)) throw notFound(`path ${m.path}`);
      return { entries: readdirSync(m.path).sort().map((n) => entry(join(m.path, n))) };
    },
    'filesystem.Filesystem/MakeDir': (m) => {
      if (existsSync(m.path)) throw new RpcError('already_exists', `${m.path} exists`, 409);
      mkdirSync(m.path, { recursive: true });
      return { entry: entry(m.path) };
    },
    'filesystem.Filesystem/Move': (m) => {
      if (!existsSync(m.source)) throw notFound(`path ${m.source}`);
      renameSync(m.source, m.destination);
      return { entry: entry(m.destination) };
    },
    'filesystem.Filesystem/Remove': (m) => {
      rmSync(m.path, { recursive: true, force: true });
      return {};
    },
  };

  function startProcess(m: any): number {
    const config = { cmd: m.process.cmd, args: m.process.args ?? [], envs: m.process.envs ?? {}, cwd: m.process.cwd };
    const child = spawn(config.cmd, config.args, {
      cwd: config.cwd, env: { ...process.env, ...config.envs }, stdio: ['pipe', 'pipe', 'pipe'],
    });
    if (m.stdin === false) child.stdin.end();
    const p: Proc = { child, config, listeners: new Set(), pty: !!m.pty };
    const pid = child.pid!;
    procs.set(pid, p);
    const emit = (event: unknown) => { for (const l of p.listeners) l(event); };
    const data = (kind: string) => (chunk: Buffer) => emit({ event: { data: { [p.pty ? 'pty' : kind]: chunk.toString('base64') } } });
    child.stdout!.on('data', data('stdout'));
    child.stderr!.on('data', data('stderr'));
    child.on('close', (code, signal) => {
      procs.delete(pid);
      const exitCode = code ?? -1;
      emit({ event: { end: { ...(exitCode ? { exitCode } : {}), exited: code !== null, status: signal ? `signal: ${signal}` : `exit status ${exitCode}` } } });
    });
    return pid;
  }

  function stream(req: IncomingMessage, res: ServerResponse, procedure: string, m: any) {
    res.writeHead(200, { 'content-type': 'application/connect+json' });
    const finish = (error?: { code: string; message: string }) => {
      if (res.writableEnded) return;
      res.end(envelope(2, error ? { error } : {}));
    };
    const timeoutMs = Number(req.headers['connect-timeout-ms'] ?? 0);
    const deadline = timeoutMs > 0 ? setTimeout(() => finish({ code: 'deadline_exceeded', message: 'deadline exceeded' }), timeoutMs) : undefined;
    res.on('close', () => clearTimeout(deadline));
    const send = (message: unknown) => { if (!res.writableEnded) res.write(envelope(0, message)); };

    if (procedure === 'filesystem.Filesystem/WatchDir') {
      if (!existsSync(m.path)) return finish({ code: 'not_found', message: `path ${m.path} not found` });
      send({ start: {} });
      const watcher = watch(m.path, { recursive: !!m.recursive }, (kind, name) => {
        const full = join(m.path, String(name));
        const type = kind === 'rename' ? (existsSync(full) ? 'EVENT_TYPE_CREATE' : 'EVENT_TYPE_REMOVE') : 'EVENT_TYPE_WRITE';
        send({ filesystem: { name: String(name), type } });
      });
      res.on('close', () => watcher.close());
      return;
    }
    let pid: number;
    if (procedure === 'process.Process/Start') {
      pid = startProcess(m);
    } else {
      pid = m.process?.pid;
      if (!procs.has(pid)) return finish({ code: 'not_found', message: `process ${pid} not found` });
    }
    const p = procs.get(pid)!;
    const listener = (event: any) => {
      send(event);
      if (event.event?.end) finish();
    };
    p.listeners.add(listener);
    res.on('close', () => p.listeners.delete(listener));
    send({ event: { start: { pid } } });
  }

  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    requests.push({ path: url.pathname, headers: req.headers });
    try {
      if (url.pathname === '/health') { res.writeHead(204).end(); return; }
      if (url.pathname === '/files') {
        const path = url.searchParams.get('path') ?? '';
        if (req.method === 'GET') {
          if (!existsSync(path)) { res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 404, message: `path '${path}' does not exist` })); return; }
          res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(await readFile(path));
          return;
        }
        mkdirSync(dirname(path), { recursive: true });
        await writeFile(path, await readBody(req));
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify([{ name: basename(path), path, type: 'file' }]));
        return;
      }
      const procedure = url.pathname.slice(1);
      const body = await readBody(req);
      if (req.headers['content-type'] === 'application/connect+json') {
        const message = JSON.parse(body.subarray(5).toString() || '{}');
        stream(req, res, procedure, message);
        return;
      }
      const handler = unary[procedure];
      if (!handler) throw new RpcError('unimplemented', `${procedure} is not implemented`, 404);
      const out = handler(JSON.parse(body.toString() || '{}'));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out));
    } catch (e) {
      const r = e instanceof RpcError ? e : new RpcError('internal', (e as Error).message, 500);
      if (!res.headersSent) res.writeHead(r.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: r.code, message: r.message }));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: async () => {
      for (const p of procs.values()) p.child.kill('SIGKILL');
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
