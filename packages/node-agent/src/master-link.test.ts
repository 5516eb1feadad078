import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import type { NodeHeartbeat, RegisterNode } from '@svc/contracts/master-internal';
import { startNodeAgent, type NodeAgent } from './index.ts';
import { makeTestEnv, testLogger, type TestEnv } from './testing/fixtures.ts';

/** A master that records registrations and heartbeats, and can forget the node or go away. */
function fakeMaster() {
  const registrations: RegisterNode[] = [];
  const heartbeats: Array<{ nodeId: string; body: NodeHeartbeat }> = [];
  let known = new Set<string>();
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; }).on('end', () => {
      const hb = /^\/internal\/v1\/nodes\/([^/]+)\/heartbeat$/.exec(req.url ?? '');
      if (req.url === '/internal/v1/nodes/register') {
        const r = JSON.parse(body) as RegisterNode;
        registrations.push(r);
        known.add(r.nodeId);
        res.setHeader('content-type', 'application/json');
        return res.end(JSON.stringify({ nodeId: r.nodeId, heartbeatIntervalMs: 100 }));
      }
      if (hb) {
        if (!known.has(hb[1])) { res.statusCode = 404; res.setHeader('content-type', 'application/json'); return res.end('{"code":404,"message":"unknown node"}'); }
        heartbeats.push({ nodeId: hb[1], body: JSON.parse(body) as NodeHeartbeat });
        res.statusCode = 204;
        return res.end();
      }
      res.statusCode = 404;
      res.end();
    });
  });
  return {
    registrations, heartbeats,
    forget() { known = new Set(); },
    listen: (port = 0) => new Promise<number>((r) => server.listen(port, '127.0.0.1', () => r((server.address() as { port: number }).port))),
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

const until = async (cond: () => boolean, timeoutMs = 5_000) => {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) assert.fail('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('node agent and the master', () => {
  let env: TestEnv;
  let agent: NodeAgent;
  const master = fakeMaster();
  let port: number;

  before(async () => {
    env = await makeTestEnv('master', '10.201.6.0/24');
    port = await master.listen();
    const cfg = env.config({ node_id: 'node-test-1', capacity: { cpu_count: 3, memory_mb: 3000 }, host: { quota: { paused_resource_release_ratio: 0.5, memory_overcommit: 1, memory_reserve_mb: 0, max_cpu_pressure: 0, max_connections_per_sandbox: 8192 } } });
    agent = await startNodeAgent(cfg, { logger: testLogger(), masterAddr: `http://127.0.0.1:${port}`, envdBundle: env.envd.path });
  });

  after(async () => {
    await agent?.close({ destroySandboxes: true });
    await master.close().catch(() => { /* closed already by the test */ });
    await env?.cleanup();
  });

  it('registers, heartbeats, registers again when forgotten, and keeps serving while the master is down', async () => {
    await until(() => master.heartbeats.length >= 2);
    const reg = master.registrations[0];
    assert.equal(reg.nodeId, 'node-test-1');
    assert.equal(agent.nodeId, 'node-test-1');
    assert.equal(reg.address, agent.url);
    assert.equal(reg.runtime, 'gvisor');
    assert.deepEqual(reg.pauseKinds, ['freeze', 'filesystem']);
    assert.deepEqual(reg.capacity, { cpuCount: 3, memoryMB: 3000 });
    assert.equal(reg.pausedResourceReleaseRatio, 0.5);
    const beat = master.heartbeats[0].body as NodeHeartbeat;
    assert.deepEqual(beat.sandboxes, { running: 0, paused: 0 });
    assert.equal(beat.usedMemoryMB, 0);
    assert.ok(beat.memory && beat.memory.availableMB > 0, 'heartbeats carry measured memory');
    assert.equal(beat.memory.quotaMB, 3000, 'nominal quota: memory x memory_overcommit (1 here)');
    assert.equal(beat.memory.reserveMB, 512);

    master.forget();
    await until(() => master.registrations.length >= 2);

    await master.close();
    await new Promise((r) => setTimeout(r, 300));
    const res = await fetch(`${agent.url}/v1/node`);
    assert.equal(res.status, 200);
    const count = master.registrations.length;
    await master.listen(port);
    await until(() => master.heartbeats.length > 0 && master.heartbeats.at(-1)!.nodeId === 'node-test-1' && master.registrations.length >= count);
  });
});
