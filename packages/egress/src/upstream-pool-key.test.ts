/**
 * Pooled upstream connections are kept per sandbox (upstream.ts PooledTarget): two sandboxes
 * allowed to the same host never send on one connection. A request that split on a shared
 * connection took the next sandbox's request, with the credential injected into it, as its body.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SandboxEgressPolicy } from '@svc/contracts/egress';
import type { EgressProxy } from './egress-proxy.ts';
import { sandboxGet, startPoolProxy, upRules } from './testing/pool-fixture.ts';

let dir: string;
let proxy: EgressProxy;
let upstream: http.Server;
let upstreamPort: number;
/** Per request: which upstream connection (numbered in accept order) carried it, and from whom. */
const seen: string[] = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'egress-pool-key-'));
  let connections = 0;
  upstream = http.createServer((req, res) => {
    seen.push(`${(req.socket as net.Socket & { n?: number }).n}:${String(req.headers['x-from'])}`);
    res.end('upstream');
  });
  upstream.on('connection', (s: net.Socket & { n?: number }) => { s.n = ++connections; });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
  upstreamPort = (upstream.address() as net.AddressInfo).port;
  const rules = upRules(upstreamPort);
  const policies: SandboxEgressPolicy[] = [
    { sandboxId: 'sbx-a', address: '127.0.0.1', rules },
    { sandboxId: 'sbx-b', address: '127.0.0.2', rules },
  ];
  proxy = await startPoolProxy(dir, policies);
});

after(async () => {
  await proxy?.close();
  upstream?.closeAllConnections();
  upstream?.close();
  await rm(dir, { recursive: true, force: true });
});

/** One request from a sandbox address, on its own client connection; the status line. */
const get = (localAddress: string, from: string) => sandboxGet(proxy.httpPort, localAddress, `up.test:${upstreamPort}`, from);

test('two sandboxes allowed to one upstream never share a pooled connection; each reuses its own', async () => {
  for (const [address, from] of [['127.0.0.1', 'a1'], ['127.0.0.2', 'b1'], ['127.0.0.1', 'a2'], ['127.0.0.2', 'b2']]) {
    assert.match(await get(address, from), /^HTTP\/1\.1 200 /, from);
  }
  assert.deepEqual(seen, ['1:a1', '2:b1', '1:a2', '2:b2']);
});
