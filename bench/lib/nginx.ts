/**
 * Debian's nginx as a peer for the proxies' benchmarks (bench/nginx-peer.ts): an instance of its
 * own from a generated configuration in a temporary directory, run in the foreground as a child
 * of the benchmark, never the system's service. Also the CPU accounting of a server that runs as
 * several processes (nginx's master and workers; a proxy started with workers).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpuMs } from '../proxy.ts';
import { sleep } from './stats.ts';

const NGINX_BINARIES = ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx'];

/** The nginx binary, or an error that says how to install it. */
function nginxBinary(): string {
  const found = NGINX_BINARIES.find((p) => existsSync(p));
  if (!found) throw new Error(`nginx is not installed (looked for ${NGINX_BINARIES.join(', ')}); on Debian: apt-get install -y nginx`);
  return found;
}

export function nginxVersion(bin = nginxBinary()): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(bin, ['-v'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let out = '';
    p.stderr!.on('data', (d) => { out += d; });
    p.once('error', reject);
    p.once('exit', () => resolve(out.trim().replace(/^nginx version:\s*/, '')));
  });
}

/** A port nothing listens on now (nginx needs its port in the file; it could be taken before nginx binds it, rarely). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export interface NginxOptions {
  /** worker_processes. */
  workers: number;
  /** What goes inside `http { }`: upstreams and servers (see dataPlaneServer, tlsReverseProxyServer). */
  http: (dir: string) => string;
  /** Ports the servers listen on: start() returns once each accepts a connection. */
  ports: number[];
  /** Files to write into the directory before nginx starts (certificates), by name. */
  files?: Record<string, string>;
}

export interface NginxInstance {
  /** The master's pid: its workers are its children. */
  pid: number;
  dir: string;
  close(): Promise<void>;
}

/** nginx -p DIR -c DIR/nginx.conf -g 'daemon off;' with everything it writes (pid, error log, temp files) in DIR. */
export async function startNginx(o: NginxOptions): Promise<NginxInstance> {
  const bin = nginxBinary();
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-nginx-'));
  for (const [name, text] of Object.entries(o.files ?? {})) writeFileSync(join(dir, name), text, { mode: 0o600 });
  for (const t of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, 'tmp', t), { recursive: true });
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, mainConfig(dir, o.workers, o.http(dir)));
  const errorLog = join(dir, 'error.log');
  // -e: the error log before the configuration is read, which otherwise goes to the built-in path.
  const child = spawn(bin, ['-p', `${dir}/`, '-e', errorLog, '-c', conf, '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => { stderr += d; });
  const killOnExit = () => { child.kill('SIGKILL'); };
  process.once('exit', killOnExit);
  const close = async () => {
    process.off('exit', killOnExit);
    await stop(child);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitListening(child, o.ports, () => `${stderr}${readOptional(errorLog)}`);
  } catch (err) {
    await close();
    throw err;
  }
  return { pid: child.pid!, dir, close };
}

function mainConfig(dir: string, workers: number, http: string): string {
  // As root the workers would otherwise run as nobody, who cannot write the 0700 temporary directory.
  const user = process.getuid?.() === 0 ? 'user root;\n' : '';
  return `${user}worker_processes ${workers};
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/tmp/body;
  proxy_temp_path ${dir}/tmp/proxy;
  fastcgi_temp_path ${dir}/tmp/fastcgi;
  uwsgi_temp_path ${dir}/tmp/uwsgi;
  scgi_temp_path ${dir}/tmp/scgi;
  # A benchmark connection carries every request of its run: no cap on requests per connection.
  keepalive_requests 10000000;
  keepalive_timeout 60s;
${http}
}
`;
}

async function waitListening(child: ChildProcess, ports: number[], log: () => string): Promise<void> {
  const until = Date.now() + 10_000;
  for (const port of ports) {
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`nginx exited (${child.exitCode ?? child.signalCode}) before it listened on ${port}: ${log().trim()}`);
      if (await accepts(port)) break;
      if (Date.now() > until) throw new Error(`nginx did not listen on ${port} within 10 s: ${log().trim()}`);
      await sleep(20);
    }
  }
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => { s.destroy(); resolve(true); });
    // Refused: not listening yet, which is what the caller polls for.
    s.once('error', () => resolve(false));
  });
}

/** SIGTERM is nginx's fast shutdown (the master ends its workers); SIGKILL after 5 s. */
function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      for (const pid of processTree(child.pid!).reverse()) killQuietly(pid);
      resolve();
    }, 5_000);
    child.once('exit', () => { clearTimeout(timer); resolve(); });
    child.kill('SIGTERM');
  });
}

function killQuietly(pid: number) {
  try {
    process.kill(pid, 'SIGKILL');
  } catch (err) {
    // Gone already between listing and killing: what we wanted.
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') console.error(`nginx bench: SIGKILL ${pid} failed: ${(err as Error).message}`);
  }
}

function readOptional(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    return `(no ${file}: ${(err as Error).message})`;
  }
}

// ---------------------------------------------------------------------------------------------
// The two roles nginx plays

/**
 * The data-plane peer: plain HTTP keep-alive, the backend chosen by the E2b-Sandbox-Id header
 * (a map to an upstream group: nginx's cheapest routed look-up), a keep-alive pool to it.
 */
export function dataPlaneServer(o: { port: number; sandboxId: string; upstreamPort: number }): string {
  return `
  map $http_e2b_sandbox_id $sandbox_backend { ${o.sandboxId} dataplane_backend; default ""; }
  upstream dataplane_backend {
    server 127.0.0.1:${o.upstreamPort};
    keepalive 64;
    keepalive_requests 10000000;
  }
  server {
    listen 127.0.0.1:${o.port} reuseport;
    location / {
      if ($sandbox_backend = "") { return 404; }
      proxy_pass http://$sandbox_backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
    }
  }
`;
}

/**
 * The egress peer: a TLS-terminating, re-encrypting reverse proxy. It presents `certFile` (a leaf
 * for `serverName` from a CA the client trusts), verifies the upstream against `upstreamCaFile`
 * with SNI, and keeps upstream TLS connections alive in a pool, as the egress proxy does.
 */
export function tlsReverseProxyServer(o: { port: number; serverName: string; upstreamPort: number; certFile: string; keyFile: string; upstreamCaFile: string }): string {
  return `
  upstream tls_backend {
    server 127.0.0.1:${o.upstreamPort};
    keepalive 64;
    keepalive_requests 10000000;
  }
  server {
    listen 127.0.0.1:${o.port} ssl reuseport;
    server_name ${o.serverName};
    ssl_certificate ${o.certFile};
    ssl_certificate_key ${o.keyFile};
    location / {
      proxy_pass https://tls_backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_ssl_verify on;
      proxy_ssl_trusted_certificate ${o.upstreamCaFile};
      proxy_ssl_name ${o.serverName};
      proxy_ssl_server_name on;
      proxy_ssl_session_reuse on;
    }
  }
`;
}

// ---------------------------------------------------------------------------------------------
// Process trees

/** pid and all its descendants, parents first (from /proc/<pid>/task/<tid>/children). */
export function processTree(pid: number): number[] {
  const out: number[] = [];
  const visit = (p: number) => {
    out.push(p);
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      return; // the process ended since its parent listed it: nothing below it to count
    }
    for (const tid of tasks) {
      let children = '';
      try {
        children = readFileSync(`/proc/${p}/task/${tid}/children`, 'utf8');
      } catch {
        continue; // the thread ended since the listing: it has no children to give
      }
      for (const c of children.split(' ')) if (c.trim()) visit(Number(c));
    }
  };
  visit(pid);
  return out;
}

/** CPU time (user + system, all threads) of pid and its descendants alive now, in ms, by pid. */
export function treeCpu(pid: number | undefined): Map<number, number> {
  const out = new Map<number, number>();
  if (pid === undefined) return out;
  for (const p of processTree(pid)) {
    const ms = cpuMs(p);
    if (ms !== undefined) out.set(p, ms);
  }
  return out;
}

/**
 * CPU the tree used between two snapshots. A process that started in between counts from zero;
 * one that ended in between loses its last interval (none do during a run).
 */
export function treeCpuDelta(before: Map<number, number>, after: Map<number, number>): number {
  let sum = 0;
  for (const [p, ms] of after) sum += ms - (before.get(p) ?? 0);
  return sum;
}
