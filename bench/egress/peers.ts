/**
 * The peers of the egress proxy bench (bench/egress.ts), each a role that file runs as a child
 * process: the upstream (HTTPS with a leaf for HOST from the test CA, and HTTP) and the egress
 * proxy as svc runs it; and how a child is stopped.
 */
import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { silentLogger } from '@svc/common';
import { EgressCa, startEgressProxy } from '@svc/egress';

/** The upstream's name: its leaf is for it, and the proxy resolves it to loopback. */
export const HOST = 'api.example.test';

/** The upstream: HTTPS (a leaf for api.example.test from the test CA) and HTTP, a small JSON body. */
export async function serveUpstream(rest: Record<string, string>) {
  const ca = await EgressCa.loadOrCreate(rest['ca-dir']);
  const leaf = ca.leafFor(HOST);
  const body = Buffer.from('{"ok":true,"from":"upstream"}');
  const handler: http.RequestListener = (req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  };
  const httpsServer = https.createServer({ cert: leaf.cert, key: leaf.key, keepAliveTimeout: 60_000 }, handler);
  const httpServer = http.createServer({ keepAliveTimeout: 60_000 }, handler);
  const listen = (s: net.Server) => new Promise<number>((resolve) => s.listen(0, '127.0.0.1', 511, () => resolve((s.address() as net.AddressInfo).port)));
  const [httpsPort, httpPort] = await Promise.all([listen(httpsServer), listen(httpServer)]);
  process.stdout.write(`READY ${JSON.stringify({ httpsPort, httpPort })}\n`);
}

/** The egress proxy as svc runs it, bound to 127.0.0.1, the upstream name resolved to loopback. */
export async function serveProxy(rest: Record<string, string>) {
  const upstreamCa = await EgressCa.loadOrCreate(rest['upstream-ca-dir']);
  const proxy = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, adminBind: '127.0.0.1', adminPort: 0,
    adminToken: rest['admin-token'],
    caDir: rest['ca-dir'],
    auditLogPath: rest['audit-log'],
    resolve: { [HOST]: '127.0.0.1' },
    upstreamCa: upstreamCa.caPem,
    logger: silentLogger(),
  });
  process.stdout.write(`READY ${JSON.stringify({ httpPort: proxy.httpPort, httpsPort: proxy.httpsPort, adminPort: proxy.adminPort, caPem: proxy.caPem })}\n`);
}

export function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); resolve(); }, 10_000);
    child.once('exit', () => { clearTimeout(timer); resolve(); });
    child.kill('SIGTERM');
  });
}
