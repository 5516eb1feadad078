/**
 * A create holds its volumes claimed from its read of them until its node answered
 * (volumes/attach-claims.ts): a DELETE of one of them meanwhile is refused, where before it
 * passed the nodes' check (no node listed the volume yet) and destroyed the data the new sandbox
 * then mounted. Through the master's sandbox service, a real volume service and a fake node.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '@svc/common';
import { availableTestDatabases } from '../db/test-databases.ts';
import { VolumeRepo } from '../volumes/repo.ts';
import { VolumeService } from '../volumes/service.ts';
import { fakeNodes, steeredPlugin } from '../volumes/test-harness.ts';
import type { SandboxVolumes } from './ports.ts';
import { input, setup, status, waitUntil } from './service-test-support.ts';

const TEAM = 'team-claims';

for (const tdb of availableTestDatabases()) {
  test(`a volume's DELETE while a create that mounts it waits for its node, on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    let volumes!: VolumeService;
    // The volume service needs the database the sandbox service's set-up opens: given once it is.
    const port: SandboxVolumes = {
      resolveMounts: (teamId, mounts) => volumes.resolveMounts(teamId, mounts),
      current: (recorded, teamId) => volumes.current(recorded, teamId),
      applyFlips: (flips) => volumes.applyFlips(flips),
      whileAttaching: (ids, attach) => volumes.whileAttaching(ids, attach),
    };
    const h = await setup(made.config, { volumes: port });
    h.cfg.master.create_timeout_insec = 5;
    const plugin = steeredPlugin();
    volumes = new VolumeService({ repo: new VolumeRepo(h.db.kysely), plugins: plugin, nodes: fakeNodes(), logger: silentLogger() });
    try {
      await t.test('refused (409 130409) until the node answered; after the sandbox is killed it deletes', async () => {
        const v = await volumes.create(TEAM, { name: 'shared' });
        h.node.behaviour.createDelayMs = 400;
        const creating = h.svc.create(input({ volumeMounts: [{ name: 'shared', path: '/mnt/shared', readOnly: false }] }), undefined, TEAM);
        await waitUntil(() => h.node.calls.some((c) => c.startsWith('create ')));
        const refused = await status(volumes.destroy(TEAM, 'shared'));
        assert.deepEqual([refused.status, refused.code], [409, 130409], refused.message);
        assert.match(refused.message, /being attached by a sandbox that is starting or resuming/);
        const s = await creating;
        assert.equal(s.state, 'running');
        assert.deepEqual(plugin.destroyed, [], 'nothing was destroyed under the new sandbox');
        await h.svc.kill(s.sandboxId);
        await volumes.destroy(TEAM, 'shared');
        assert.deepEqual(plugin.destroyed, [v.volumeID]);
      });

      await t.test('a create that fails on its node ends its claim: the DELETE goes on at once', async () => {
        const v = await volumes.create(TEAM, { name: 'failed' });
        h.node.behaviour.createDelayMs = 0;
        h.node.behaviour.failCreate = true;
        const failed = await status(h.svc.create(input({ volumeMounts: [{ name: 'failed', path: '/mnt/f', readOnly: false }] }), undefined, TEAM));
        assert.ok(failed.status >= 500, failed.message);
        h.node.behaviour.failCreate = false;
        await volumes.destroy(TEAM, 'failed');
        assert.equal(plugin.destroyed.at(-1), v.volumeID);
      });
    } finally {
      await h.close();
      await made.drop();
    }
  });
}
