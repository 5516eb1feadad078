/**
 * Idle backend connections are capped per sandbox port and per sandbox (data-path.ts
 * MAX_IDLE_BACKEND_SOCKETS): after bursts of parallel requests to three ports of one sandbox,
 * each port keeps at most its cap idle and the sandbox at most its own.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { call, sandboxHost } from './testing/client.ts';
import { startPlatform, type Platform } from './testing/harness.ts';
import { MAX_IDLE_BACKEND_SOCKETS } from './data-path.ts';

const BURST = MAX_IDLE_BACKEND_SOCKETS.perPort + 8;
let p: Platform;
const ports: Array<{ server: http.Server; port: number }> = [];

/** A backend that holds its answers until a whole burst arrived, so each request has its own connection. */
async function heldBackend(): Promise<{ server: http.Server; port: number }> {
  const held: http.ServerResponse[] = [];
  const server = http.createServer((_req, res) => {
    held.push(res);
    if (held.length === BURST) for (const r of held.splice(0)) r.end('ok');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { server, port: (server.address() as AddressInfo).port };
}

const openTo = (server: http.Server) => new Promise<number>((r) => server.getConnections((_e, n) => r(n)));

before(async () => {
  // Long enough that no idle connection times out, nor its route expires, during the bursts.
  p = await startPlatform({ tuning: { idleBackendSocketMs: 120_000, routeCacheTtlMs: 120_000 } });
  for (let i = 0; i < 3; i++) ports.push(await heldBackend());
  p.master.add({ sandboxId: 'sbxidle', envdPort: ports[0]!.port });
});

after(async () => {
  await p?.close();
  for (const { server } of ports) { server.closeAllConnections(); server.close(); }
});

test('a sandbox keeps at most its cap of idle backend connections a port, and at most its own cap over all its ports', async () => {
  assert.ok(MAX_IDLE_BACKEND_SOCKETS.perSandbox < 3 * MAX_IDLE_BACKEND_SOCKETS.perPort, 'three full ports must pass the sandbox cap');
  const counts: number[] = [];
  for (const { server, port } of ports) {
    const answers = await Promise.all(Array.from({ length: BURST }, (_, i) => call(p.proxy.httpUrl, { path: `/b${i}`, host: sandboxHost(port, 'sbxidle') })));
    for (const a of answers) assert.equal(a.status, 200, a.body);
    // Those past the port's cap are closed by the proxy as they come back.
    let open = await openTo(server);
    for (let i = 0; i < 100 && open > MAX_IDLE_BACKEND_SOCKETS.perPort; i++) {
      await new Promise((r) => setTimeout(r, 20));
      open = await openTo(server);
    }
    counts.push(open);
  }
  assert.equal(counts[0], MAX_IDLE_BACKEND_SOCKETS.perPort, `first port: ${counts}`);
  let total = 0;
  for (let i = 0; i < 100; i++) {
    total = 0;
    for (const { server } of ports) total += await openTo(server);
    if (total <= MAX_IDLE_BACKEND_SOCKETS.perSandbox) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(total, MAX_IDLE_BACKEND_SOCKETS.perSandbox, `idle over the sandbox's three ports (after each burst: ${counts})`);
});
