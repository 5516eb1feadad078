import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryCoordination, RedisCoordination, silentLogger, type Coordination, type SvcError } from '@svc/common';
import { startRedisServer, type TestRedis } from '@svc/common/redis-coordination-test-server';
import { NO_LIMITS } from '@svc/contracts/teams';
import { SandboxQuota } from './quota.ts';

let redis: TestRedis;
const opened: Coordination[] = [];
before(async () => { redis = await startRedisServer(); });
after(async () => {
  await Promise.all(opened.map((c) => c.close()));
  await redis.stop();
});

const limits = { limits: async () => ({ ...NO_LIMITS, maxSandboxes: 3 }) };
const none = async () => ({ sandboxes: 0, memoryMB: 0, vcpus: 0, kept: 0 });

// Two masters: each its own SandboxQuota, over one store (two Redis connections, or one memory store).
const stores: Array<[string, () => [Coordination, Coordination]]> = [
  ['memory', () => { const m = new MemoryCoordination(); return [m, m]; }],
  ['Redis', () => {
    const prefix = `quota-${Math.random()}:`;
    const pair = [0, 1].map(() => new RedisCoordination({ host: redis.host, port: redis.port, prefix }));
    opened.push(...pair);
    return [pair[0], pair[1]];
  }],
];

for (const [name, open] of stores) {
  test(`team quotas hold across two masters sharing ${name}: concurrent creates never pass the limit`, async () => {
    const [ca, cb] = open();
    const masters = [new SandboxQuota(limits, none, ca, silentLogger()), new SandboxQuota(limits, none, cb, silentLogger())];
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => masters[i % 2].admit('team-1', { memoryMB: 256, cpuCount: 1, newSandbox: true })));
    const admitted = outcomes.filter((o): o is PromiseFulfilledResult<() => Promise<void>> => o.status === 'fulfilled');
    assert.equal(admitted.length, 3);
    for (const o of outcomes) if (o.status === 'rejected') assert.equal((o.reason as SvcError).status, 429);
    // Another team is not held back; a place given back is taken again, from either master.
    await (await masters[1].admit('team-2', { memoryMB: 256, cpuCount: 1, newSandbox: true }))();
    await admitted[0].value();
    await admitted[0].value(); // a second release gives back nothing more
    const again = await masters[1].admit('team-1', { memoryMB: 256, cpuCount: 1, newSandbox: true });
    await assert.rejects(masters[0].admit('team-1', { memoryMB: 256, cpuCount: 1, newSandbox: true }), (e: SvcError) => e.status === 429);
    for (const r of [again, admitted[1].value, admitted[2].value]) await r();
  });
}

test('maxKeptSandboxes counts paused sandboxes at a create, never at a resume', async () => {
  const kept = { limits: async () => ({ ...NO_LIMITS, maxKeptSandboxes: 3 }) };
  // Two paused sandboxes and none running: a create takes the third place, a second create is refused.
  const usage = async () => ({ sandboxes: 0, memoryMB: 0, vcpus: 0, kept: 2 });
  const quota = new SandboxQuota(kept, usage, new MemoryCoordination(), silentLogger());
  const created = await quota.admit('team-1', { memoryMB: 256, cpuCount: 1, newSandbox: true });
  await assert.rejects(quota.admit('team-1', { memoryMB: 256, cpuCount: 1, newSandbox: true }), (e: SvcError) => e.status === 429 && /maxKeptSandboxes reached: the team may hold 3 sandboxes running or paused, uses 3 now/.test(e.message));
  // Resuming one of the kept ones adds nothing kept.
  const resumed = await quota.admit('team-1', { memoryMB: 256, cpuCount: 1, newSandbox: false });
  await resumed();
  await created();
  await (await quota.admit('team-1', { memoryMB: 256, cpuCount: 1, newSandbox: true }))();
});

test('an admission whose team lock lapsed writes nothing back: another master\'s reservation made meanwhile stays', async () => {
  // The store gives the lock away while the admission reads the team's usage (its renewals did not land within the TTL).
  let lapsed = false;
  class Lapsing extends MemoryCoordination {
    override async acquireLease(name: string, holder: string, ttlMs: number) { return lapsed ? false : super.acquireLease(name, holder, ttlMs); }
  }
  const store = new Lapsing();
  const theirs = JSON.stringify({ other: { sandboxes: 1, memoryMB: 256, vcpus: 1, kept: 1, until: Date.now() + 60_000 } });
  const usage = async () => {
    lapsed = true;
    await store.kvSet('quota-held:team-1', theirs); // the other master, holding the lock now
    return { sandboxes: 0, memoryMB: 0, vcpus: 0, kept: 0 };
  };
  const quota = new SandboxQuota(limits, usage, store, silentLogger());
  await assert.rejects(quota.admit('team-1', { memoryMB: 256, cpuCount: 1, newSandbox: true }), (e: SvcError) => e.status === 503 && /lost its lock/.test(e.message));
  assert.equal(await store.kvGet('quota-held:team-1'), theirs);
});
