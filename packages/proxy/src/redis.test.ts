import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisCoordination } from '@svc/common/redis-coordination';
import { startRedisServer, type TestRedis } from '@svc/common/redis-coordination-test-server';
import { silentLogger } from '@svc/common';
import { PROXY_INDEX_KEY } from '@svc/contracts/lifecycle';
import { ProxyAdminClient } from '@svc/contracts/proxy-admin';
import { ProxyRegistry } from '@svc/contracts/proxy-registry';
import { call } from './testing/client.ts';
import { startPlatform, Upstream } from './testing/harness.ts';

let redis: TestRedis;
before(async () => { redis = await startRedisServer(); });
after(async () => { await redis.stop(); });

test('on Redis coordination: announcements land in Redis, auto-resume works, and a purge to the proxies listed there drops cached routes', async () => {
  const coordination = new RedisCoordination({ host: redis.host, port: redis.port, prefix: 'pxtest:' });
  const p = await startPlatform({ coordination, proxyAdminToken: 'redis-admin-token' });
  const up = new Upstream('r');
  await up.listen();
  try {
    await coordination.subscriptionsReady();
    const observer = new RedisCoordination({ host: redis.host, port: redis.port, prefix: 'pxtest:' });
    try {
      await waitFor(async () => (await observer.kvGet(PROXY_INDEX_KEY)) !== null);
      assert.deepEqual(JSON.parse((await observer.kvGet(PROXY_INDEX_KEY))!), [p.proxy.proxyId]);

      p.master.add({ sandboxId: 'rz', envdPort: up.port, state: 'paused', autoResume: true });
      const h = { 'E2b-Sandbox-Id': 'rz' };
      assert.equal((await call(p.proxy.httpUrl, { headers: h })).status, 200);
      assert.equal(p.master.calls.resume.length, 1);
      assert.equal((await call(p.proxy.httpUrl, { headers: h })).status, 200);

      // Killed; another process (the master) lists the proxies from Redis and purges the route.
      p.master.set('rz', { state: 'terminated', terminateReason: 'killed' });
      assert.equal((await call(p.proxy.httpUrl, { headers: h })).status, 200, 'still cached');
      for (const a of await new ProxyRegistry(observer, 'observer', silentLogger()).list()) await new ProxyAdminClient(a.adminUrl, 'redis-admin-token').purge(['rz']);
      // No port named: envd's, which answers a killed sandbox with 502 (docs/compatibility.md).
      assert.equal((await call(p.proxy.httpUrl, { headers: h })).status, 502);
    } finally {
      await observer.close();
    }
  } finally {
    await p.close();
    await up.close();
  }
});

async function waitFor(cond: () => Promise<boolean>, timeoutMs = 3_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
