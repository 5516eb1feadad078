/**
 * Idle pooled upstream connections are capped per key (upstream.ts MAX_IDLE_SOCKETS_PER_KEY):
 * the key names the sandbox, so a worker also caps its idle sockets in all (MAX_IDLE_SOCKETS_PER_WORKER).
 * After a burst of parallel requests, only the cap's worth stay open to the upstream.
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
import { MAX_IDLE_SOCKETS_PER_KEY } from './upstream.ts';

const BURST = MAX_IDLE_SOCKETS_PER_KEY + 8;
let dir: string;
let proxy: EgressProxy;
let upstream: http.Server;
let upstreamPort: number;
/** Responses held until the whole burst has arrived, so each request has its own upstream connection. */
const held: http.ServerResponse[] = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'egress-idle-cap-'));
  upstream = http.createServer((_req, res) => {
    held.push(res);
    if (held.length === BURST) for (const r of held.splice(0)) r.end('upstream');
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
  upstreamPort = (upstream.address() as net.AddressInfo).port;
  const rules = upRules(upstreamPort);
  const policies: SandboxEgressPolicy[] = [{ sandboxId: 'sbx-a', address: '127.0.0.1', rules }];
  proxy = await startPoolProxy(dir, policies);
});

after(async () => {
  await proxy?.close();
  upstream?.closeAllConnections();
  upstream?.close();
  await rm(dir, { recursive: true, force: true });
});

const openToUpstream = () => new Promise<number>((r) => upstream.getConnections((_e, n) => r(n)));

test('after a burst of parallel requests past the key\'s cap a sandbox keeps MAX_IDLE_SOCKETS_PER_KEY idle connections to one upstream', async () => {
  assert.equal(MAX_IDLE_SOCKETS_PER_KEY, 32, 'fewer than 16 reopened half the sockets of bench/nginx-peer.ts\'s 16 clients (upstream.ts)');
  const answers = await Promise.all(Array.from({ length: BURST }, (_, i) => sandboxGet(proxy.httpPort, '127.0.0.1', `up.test:${upstreamPort}`, `a${i}`)));
  for (const a of answers) assert.match(a, /^HTTP\/1\.1 200 /);
  // The connections past the cap are closed by the proxy as they come back.
  let open = await openToUpstream();
  for (let i = 0; i < 50 && open > MAX_IDLE_SOCKETS_PER_KEY; i++) {
    await new Promise((r) => setTimeout(r, 20));
    open = await openToUpstream();
  }
  assert.equal(open, MAX_IDLE_SOCKETS_PER_KEY);
});
