import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import { NodeRegistry, type PlacementPolicy } from './registry.ts';

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
