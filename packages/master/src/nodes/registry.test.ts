import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import { CLIENT_RECHECK_MS, NodeRegistry, type PlacementPolicy } from './registry.ts';

const [sqlite] = availableTestDatabases();

test('placement: spread takes the node with the most memory free, pack the one with the least that still fits', async () => {
  const made = await sqlite.create!();
  const db = await openDatabase(made.config);
  try {
    await migrate(db.kysely, db.driver, migrations);
    const pick = async (policy: PlacementPolicy, memoryMB: number) => (await new NodeRegistry(db.kysely, policy).pick({ memoryMB, cpuCount: 1 })).nodeId;
    const setup = new NodeRegistry(db.kysely);
    for (const [nodeId, memoryMB] of [['big', 8192], ['small', 2048], ['mid', 4096]] as const) {
      await setup.register({ nodeId, address: `http://127.0.0.1:1/${nodeId}`, runtime: 'gvisor', pauseKinds: ['freeze'], capacity: { cpuCount: 4, memoryMB }, pausedResourceReleaseRatio: 0, version: 't' });
    }
    assert.equal(await pick('spread', 512), 'big');
    assert.equal(await pick('pack', 512), 'small');
    assert.equal(await pick('pack', 3000), 'mid', 'the fullest node that still fits');
    assert.equal(await pick('pack', 6000), 'big');
  } finally {
    await db.close();
    await made.drop();
  }
});

for (const tdb of availableTestDatabases()) {
  test(`a node registering again stays drained, whenever the drain began (${tdb.driver})`, { skip: tdb.skip }, async () => {
    const made = await tdb.create!();
    const db = await openDatabase(made.config);
    try {
      await migrate(db.kysely, db.driver, migrations);
      const nodes = new NodeRegistry(db.kysely);
      const reg = { nodeId: 'n1', address: 'http://127.0.0.1:1/n1', runtime: 'gvisor' as const, pauseKinds: ['freeze' as const], capacity: { cpuCount: 4, memoryMB: 4096 }, pausedResourceReleaseRatio: 0, version: 't' };
      await nodes.register(reg);
      // A register that read the row before the drain and wrote after it undid the drain.
      const both = await Promise.all([nodes.register(reg), nodes.setDraining('n1', true)]);
      assert.equal(both[1].status, 'draining');
      assert.equal((await nodes.get('n1')).status, 'draining');
      await nodes.register(reg);
      assert.equal((await nodes.get('n1')).status, 'draining');
      await nodes.setDraining('n1', false);
      await nodes.register(reg);
      assert.equal((await nodes.get('n1')).status, 'ready');
    } finally {
      await db.close();
      await made.drop();
    }
  });
}

test('a node that registers again at a new address with one master is dialled there by the others', async (t) => {
  const made = await sqlite.create!();
  const db = await openDatabase(made.config);
  try {
    await migrate(db.kysely, db.driver, migrations);
    const reg = { nodeId: 'n1', runtime: 'gvisor' as const, pauseKinds: ['freeze' as const], capacity: { cpuCount: 4, memoryMB: 4096 }, pausedResourceReleaseRatio: 0, version: 't' };
    const masterA = new NodeRegistry(db.kysely), masterB = new NodeRegistry(db.kysely);
    await masterA.register({ ...reg, address: 'http://10.0.0.5:8088' });
    let now = Date.now();
    t.mock.method(Date, 'now', () => now);
    const before = await masterB.client('n1');
    assert.equal(before.baseUrl, 'http://10.0.0.5:8088');
    await masterA.register({ ...reg, address: 'http://10.0.0.9:8088' }); // the agent restarted on a new pod IP
    now += CLIENT_RECHECK_MS;
    assert.equal((await masterB.client('n1')).baseUrl, 'http://10.0.0.9:8088');
    now += CLIENT_RECHECK_MS;
    const again = await masterB.client('n1');
    assert.equal(await masterB.client('n1'), again, 'an unchanged address keeps its client');
  } finally {
    await db.close();
    await made.drop();
  }
});
