/** Team quotas across a sandbox's life: what a kill under way counts, and a drain's own resume. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NO_LIMITS } from '@svc/contracts/teams';
import { availableTestDatabases } from '../db/test-databases.ts';
import { SandboxRepo } from './repo.ts';
import { input, setup, status } from './service-test-support.ts';

for (const tdb of availableTestDatabases()) {
  test(`a running sandbox being killed still counts in its team's usage; a paused one does not (${tdb.driver})`, { skip: tdb.skip }, async () => {
    const made = await tdb.create!();
    const h = await setup(made.config);
    try {
      const repo = new SandboxRepo(h.db.kysely, h.db.driver);
      const running = await h.svc.create(input(), undefined, 'team-q');
      const paused = await h.svc.create(input(), undefined, 'team-q');
      await h.svc.pause(paused.sandboxId);
      const before = await repo.teamUsage('team-q');
      assert.deepEqual(before, { sandboxes: 1, memoryMB: 256, vcpus: 1, kept: 2 });
      // Both in the middle of their kill, as while a node's delete runs. A kill the node does not
      // finish in time puts the running one back to running with no admission, so its place stays taken.
      await h.db.kysely.updateTable('t_svc_sandbox').set({ state: 'killing' }).where('sandbox_id', 'in', [running.sandboxId, paused.sandboxId]).execute();
      assert.deepEqual(await repo.teamUsage('team-q'), before);
    } finally {
      await h.close();
      await made.drop();
    }
  });
}

test('a drain\'s resume of the sandbox it paused is not refused by a create that took the place meanwhile', async () => {
  const made = await availableTestDatabases()[0].create!();
  const h = await setup(made.config, { quotas: { limits: async () => ({ ...NO_LIMITS, maxSandboxes: 1 }) } });
  try {
    const moved = await h.svc.create(input(), undefined, 'team-d');
    await h.svc.pause(moved.sandboxId, 'drain'); // the drain's pause gives the place back
    await h.svc.create(input(), undefined, 'team-d');
    assert.equal((await status(h.svc.resume(moved.sandboxId, undefined))).status, 429, 'the team\'s own resume is admitted as ever');
    assert.equal((await h.svc.resumeMoved(moved.sandboxId)).state, 'running');
  } finally {
    await h.close();
    await made.drop();
  }
});
