/**
 * Test wiring for the data-plane proxy: a fake master, real lifecycle replicas, the proxy,
 * and loopback upstream servers standing in for sandboxes, plus a log capture.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import pino from 'pino';
import { WebSocketServer } from 'ws';
import { MemoryCoordination, REDACTED_PATHS, type Coordination, type Logger, type SvcConfig, type WorkerEntry } from '@svc/common';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { startLifecycle, type RunningLifecycle } from '@svc/lifecycle';
import { startProxy, type ProxyTuning, type RunningProxy } from '../proxy.ts';
import { FakeMaster } from './fake-master.ts';

export interface LogCapture {
  logger: Logger;
  lines: string[];
  text(): string;
}

/** A logger at trace level (everything) that keeps its lines, with production redaction. */
export function captureLogs(): LogCapture {
  const lines: string[] = [];
  const logger = pino(
    { level: 'trace', redact: { paths: REDACTED_PATHS, censor: '[redacted]' } },
    { write: (s: string) => { lines.push(s); } },
  );
  return { logger, lines, text: () => lines.join('') };
}

/** A loopback HTTP + WebSocket server that stands in for a service inside a sandbox. */
export class Upstream {
  readonly server: Server;
  readonly requests: Array<{ method: string; url: string; headers: IncomingMessage['headers']; rawHeaders: string[] }> = [];
  connections = 0;
  port = 0;
  /** Resolving this lets /stream send its last chunk. */
  releaseStream: () => void = () => {};
  private streamGate: Promise<void> = Promise.resolve();
  private readonly sockets = new Set<Socket>();
  private readonly wss = new WebSocketServer({ noServer: true });
  /** Extra handling before the default routes; return true when handled. */
  custom: ((req: IncomingMessage, res: ServerResponse) => boolean) | undefined;

  constructor(readonly name = 'upstream') {
    this.server = createServer((req, res) => this.handle(req, res));
    this.server.keepAliveTimeout = 30_000;
    this.server.on('connection', (s: Socket) => {
      this.connections++;
      this.sockets.add(s);
      s.once('close', () => this.sockets.delete(s));
    });
    this.server.on('upgrade', (req, socket, head) => {
      this.requests.push({ method: req.method!, url: req.url!, headers: req.headers, rawHeaders: req.rawHeaders });
      this.wss.handleUpgrade(req, socket, head, (ws) => {
        ws.on('message', (data, isBinary) => ws.send(isBinary ? data : `${this.name}:${data.toString()}`, { binary: isBinary }));
      });
    });
  }

  armStream(): void {
    this.streamGate = new Promise((resolve) => { this.releaseStream = resolve; });
  }

  async listen(port = 0): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this.port;
  }

  async close(): Promise<void> {
    for (const c of this.wss.clients) c.terminate();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse) {
    this.requests.push({ method: req.method!, url: req.url!, headers: req.headers, rawHeaders: req.rawHeaders });
    if (this.custom?.(req, res)) return;
    const url = req.url ?? '/';
    if (url.startsWith('/stream')) {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first;');
      void this.streamGate.then(() => res.end('last'));
      return;
    }
    if (url.startsWith('/upload')) {
      // Answers with each chunk's arrival, to show the body streamed rather than buffered.
      res.writeHead(200, { 'content-type': 'text/plain' });
      req.on('data', (c: Buffer) => res.write(`got:${c.toString()};`));
      req.on('end', () => res.end('end'));
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.stringify({ upstream: this.name, method: req.method, url, body: Buffer.concat(chunks).toString() });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  }
}

export interface Platform {
  master: FakeMaster;
  lifecycles: RunningLifecycle[];
  proxy: RunningProxy;
  logs: LogCapture;
  coordination: Coordination;
  cfg: Pick<SvcConfig, 'proxy' | 'lifecycle'>;
  close(): Promise<void>;
}

export interface PlatformOptions {
  proxyAdminToken?: string;
  lifecycleReplicas?: number;
  /** Override the lifecycle URLs the proxy uses (e.g. an unreachable one). */
  lifecycleUrls?: string[];
  tuning?: Partial<ProxyTuning>;
  /** Shared by the proxy and the lifecycle replicas (default: in-memory). */
  coordination?: Coordination;
  /** Starts the HTTPS listener on this port with this certificate. */
  https?: { port: number; cert: string; key: string };
  /** The data path in worker processes (ProxyDeps.workers); absent: in this process. */
  workers?: { count: number; entry: WorkerEntry };
  /** proxy.worker_user: the account the workers become (default '': they stay the test's user). */
  workerUser?: string;
}

export async function startPlatform(opts: PlatformOptions = {}): Promise<Platform> {
  const logs = captureLogs();
  const master = new FakeMaster();
  await master.start();
  const coordination = opts.coordination ?? new MemoryCoordination();
  const cfg = {
    proxy: { http_port: 0, https_port: opts.https?.port ?? 0, admin_port: 0, bind: '127.0.0.1', admin_token: opts.proxyAdminToken ?? '', tls_cert_file: '', tls_key_file: '', workers: 0, worker_priority: 0, worker_user: opts.workerUser ?? '' },
    lifecycle: { replicas: opts.lifecycleReplicas ?? 2, listen: '127.0.0.1:0', sweep_interval_ms: 100, warmup_sec: 30, lease_ttl_ms: 1_000 },
  };
  const masterClient = new MasterInternalClient(master.url);
  const lifecycles: RunningLifecycle[] = [];
  for (let i = 0; i < cfg.lifecycle.replicas; i++) {
    lifecycles.push(await startLifecycle(cfg, {
      logger: logs.logger.child({ c: 'lifecycle' }), master: masterClient, coordination, replicaIndex: i,
    }));
  }
  const rest = async () => {
    await Promise.all(lifecycles.map((l) => l.close()));
    await master.close();
    await coordination.close();
  };
  let proxy: RunningProxy;
  try {
    proxy = await startProxy(cfg, {
      logger: logs.logger.child({ c: 'proxy' }),
      master: masterClient,
      lifecycleUrls: opts.lifecycleUrls ?? lifecycles.map((l) => l.url),
      coordination,
      tls: opts.https ? { cert: opts.https.cert, key: opts.https.key } : undefined,
      tuning: { activityFlushMs: 200, announceIntervalMs: 200, ...opts.tuning },
      workers: opts.workers,
    });
  } catch (err) {
    // A proxy that does not start (a test of its refusal) leaves nothing running to hold the test's process.
    await rest();
    throw err;
  }
  return {
    master, lifecycles, proxy, logs, coordination, cfg,
    async close() {
      await proxy.close();
      await rest();
    },
  };
}
