import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisCoordination, coordinationFor } from './redis-coordination.ts';
import { MemoryCoordination } from './memory-coordination.ts';
import { coordinationContract } from './redis-coordination.contract.ts';
import { startRedisServer, type TestRedis } from './redis-coordination-test-server.ts';
import type { Coordination } from './coordination.ts';

let redis: TestRedis;
const opened: Coordination[] = [];
const open = (prefix = 'svctest:') => {
  const c = new RedisCoordination({ host: redis.host, port: redis.port, prefix });
  opened.push(c);
  return c;
};

before(async () => { redis = await startRedisServer(); });
after(async () => {
  await Promise.all(opened.map((c) => c.close()));
  await redis.stop();
});

coordinationContract({
  // Two connections stand for two processes sharing one Redis.
  pair: async () => [open(), open()],
  settle: (c) => (c as RedisCoordination).subscriptionsReady(),
});

test('prefixes keep two platforms on one Redis apart', async () => {
  const a = open('one:');
  const b = open('two:');
  assert.equal(await a.acquireLease('leader', 'x', 1_000), true);
  assert.equal(await b.acquireLease('leader', 'y', 1_000), true);
  await a.kvSet('k', 'a');
  assert.equal(await b.kvGet('k'), null);
});

test('coordinationFor picks Redis only when a host is configured', async () => {
  const mem = coordinationFor({ host: '', port: 6379, password: '', db: 0 });
  assert.ok(mem instanceof MemoryCoordination);
  const red = coordinationFor({ host: redis.host, port: redis.port, password: '', db: 0 }, { prefix: 'cf:' });
  opened.push(red);
  assert.ok(red instanceof RedisCoordination);
  await red.kvSet('k', 'v');
  assert.equal(await red.kvGet('k'), 'v');
});

test('lease expiry is decided by Redis, nothing is cached locally', async () => {
  const a = open();
  assert.equal(await a.acquireLease('ttl-check', 'x', 100), true);
  await new Promise((r) => setTimeout(r, 180));
  assert.equal(await a.leaseHolder('ttl-check'), null);
});
