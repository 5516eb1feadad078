import net from 'node:net';
import { join } from 'node:path';
import { silentLogger } from '@svc/common';
import type { SandboxEgressPolicy } from '@svc/contracts/egress';
import { startEgressProxy, type EgressProxy } from '../egress-proxy.ts';

/** The pool tests' upstream: plain http to `up.test` on `port`, allowed. */
export const upRules = (port: number) => [{ name: 'up', match: { scheme: 'http' as const, port, host: 'up.test' }, action: { allow: true } }];

/** An egress proxy for the pool tests, in `dir`, with these policies and `up.test` at 127.0.0.1; resolves once it is ready. */
export async function startPoolProxy(dir: string, policies: SandboxEgressPolicy[]): Promise<EgressProxy> {
  const proxy = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: 't',
    caDir: join(dir, 'ca'), auditLogPath: join(dir, 'audit.jsonl'), policySource: async () => policies,
    resolve: { 'up.test': '127.0.0.1' }, logger: silentLogger(),
  });
  while (!proxy.ready()) await new Promise((r) => setTimeout(r, 10));
  return proxy;
}

/**
 * One plain-http GET through the egress proxy from a sandbox's address (a loopback alias such as
 * 127.0.0.2 stands for another sandbox), on its own client connection, marked `X-From: from`;
 * resolves to the answer's status line (empty when the proxy closed without one).
 */
export function sandboxGet(proxyPort: number, localAddress: string, host: string, from: string): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect({ port: proxyPort, host: '127.0.0.1', localAddress });
    let got = '';
    s.on('data', (b: Buffer) => { got += b.toString(); });
    s.on('error', () => resolve(got.split('\r\n')[0]!));
    s.on('close', () => resolve(got.split('\r\n')[0]!));
    s.write(`GET / HTTP/1.1\r\nHost: ${host}\r\nX-From: ${from}\r\nConnection: close\r\n\r\n`);
  });
}
