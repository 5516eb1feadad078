import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryCoordination, silentLogger, type SvcError } from '@svc/common';
import { availableTestDatabases } from '../db/test-databases.ts';
import { VolumeService } from './service.ts';
import { fakeNodes, holding, recordingLogger, steeredPlugin, volumeDatabase } from './test-harness.ts';

const TEAM = 'team-del';
const failure = (p: Promise<unknown>) => p.then(() => assert.fail('it succeeded'), (e: SvcError) => e);

for (const engine of availableTestDatabases()) {
  test(`volume delete on ${engine.driver}: marked first, never handed out while its data goes`, { skip: engine.skip }, async (t) => {
    const tdb = await engine.create!();
    const vdb = await volumeDatabase(tdb.config);
    const nodes = fakeNodes();
    const plugin = steeredPlugin();
    const { logger, lines } = recordingLogger();
    const service = new VolumeService({ repo: vdb.repo, plugins: plugin, nodes, logger });
    try {
      await t.test('while Destroy runs and after it failed, no mount, resume or content call gets the volume; a delete again finishes it', async (st) => {
        const v = await service.create(TEAM, { name: 'gated' });
        let entered!: () => void;
        const inDestroy = new Promise<void>((r) => { entered = r; });
        let release!: (err?: Error) => void;
        const gate = new Promise<void>((resolve, reject) => { release = (err) => (err ? reject(err) : resolve()); });
        plugin.hooks.destroy = async () => {
          entered();
          await gate;
        };
        const deleting = failure(service.destroy(TEAM, 'gated'));
        // Whatever fails below, the held Destroy ends and the next tests get a plugin of their own.
        st.after(() => { release(new Error('the test ended')); plugin.hooks.destroy = undefined; });
        await inDestroy;
        const mount = await failure(service.resolveMounts(TEAM, [{ name: 'gated', path: '/mnt', readOnly: false }]));
        assert.deepEqual([mount.status, /being deleted/.test(mount.message)], [409, true], mount.message);
        assert.equal((await failure(service.resolveMounts(TEAM, [{ name: v.volumeID, path: '/mnt', readOnly: false }]))).status, 409, 'by id too');
        assert.equal((await failure(service.current([{ name: 'gated', volumeId: v.volumeID, path: '/mnt', readOnly: false }], TEAM))).status, 409, 'a resume');
        assert.equal((await failure(service.authorizeContent(v.volumeID, undefined, v.token))).status, 409, 'a content call with the token');
        assert.equal((await failure(service.authorizeContent('gated', TEAM, undefined))).status, 409, 'a content call with the team\'s key');
        assert.equal((await failure(service.authorizeContent(v.volumeID, undefined, `${v.token}x`))).status, 401, 'a wrong token learns nothing');
        const second = await failure(service.destroy(TEAM, 'gated'));
        assert.deepEqual([second.status, /another request/.test(second.message)], [409, true], 'one delete of a volume at a time');

        // The plugin fails, with words that name the host's paths.
        release(new Error('rm: cannot remove \'/data/svc-shared/volume-data/x/d\': Device or resource busy'));
        const failed = await deleting;
        assert.equal(failed.status, 500);
        assert.match(failed.message, /^the volume plugin 'steered' could not delete the data of volume gated; the master's log has the detail\. .*delete it again/);
        assert.ok(!failed.message.includes('/data/'), `no host path: ${failed.message}`);
        assert.ok(lines.some((l) => l.volumeId === v.volumeID && String(l.err).includes('/data/svc-shared/volume-data/x/d')), 'the log has the detail with the volume\'s id');
        assert.equal((await failure(service.resolveMounts(TEAM, [{ name: 'gated', path: '/mnt', readOnly: false }]))).status, 409, 'a failed Destroy leaves it unusable');
        assert.equal((await service.get(TEAM, 'gated')).volumeID, v.volumeID, 'and listed, to be deleted again');
        assert.equal((await failure(service.create(TEAM, { name: 'gated' }))).message.includes('being deleted'), true, 'its name is still taken, and why is said');

        plugin.hooks.destroy = undefined;
        await service.destroy(TEAM, 'gated');
        assert.equal((await failure(service.get(TEAM, 'gated'))).status, 404);
        assert.deepEqual(plugin.destroyed, [v.volumeID]);
      });

      await t.test('a delete refused while a node holds the volume takes its mark back: the volume stays usable', async () => {
        const v = await service.create(TEAM, { name: 'held' });
        nodes.held.set('node-1', [holding(v.volumeID)]);
        const busy = await failure(service.destroy(TEAM, 'held'));
        assert.deepEqual([busy.status, busy.code], [409, 130409]);
        assert.equal((await service.resolveMounts(TEAM, [{ name: 'held', path: '/mnt', readOnly: false }]))[0].onNode.volumeId, v.volumeID);
        await service.authorizeContent(v.volumeID, undefined, v.token);
        nodes.held.clear();
        await service.destroy(TEAM, 'held');
        assert.equal(plugin.destroyed.at(-1), v.volumeID);
      });

      await t.test('a node that does not answer, where a sandbox mounts the volume, refuses the delete (409), naming the node', async () => {
        const v = await service.create(TEAM, { name: 'away' });
        nodes.away.set(v.volumeID, [{ nodeId: 'node-gone', sandboxId: 'sb-away' }]);
        const refused = await failure(service.destroy(TEAM, 'away'));
        assert.deepEqual([refused.status, refused.code], [409, 130409]);
        assert.match(refused.message, /node node-gone, which does not answer: sandbox sb-away/);
        assert.equal(plugin.destroyed.includes(v.volumeID), false, 'nothing was destroyed');
        await service.resolveMounts(TEAM, [{ name: 'away', path: '/mnt', readOnly: false }]);
        nodes.away.clear();
        await service.destroy(TEAM, 'away');
      });

      await t.test('a sandbox that attached it while Destroy ran (its create read the record before the mark) keeps the record marked, and says so', async () => {
        const v = await service.create(TEAM, { name: 'raced' });
        plugin.hooks.destroy = async () => { await service.applyFlips([{ volumeId: v.volumeID, delta: 1 }]); };
        const raced = await failure(service.destroy(TEAM, 'raced'));
        assert.deepEqual([raced.status, raced.code], [409, 130409]);
        assert.match(raced.message, /attached by a sandbox started while it was being deleted/);
        assert.equal((await failure(service.resolveMounts(TEAM, [{ name: 'raced', path: '/mnt', readOnly: false }]))).status, 409);
        plugin.hooks.destroy = undefined;
        await service.applyFlips([{ volumeId: v.volumeID, delta: -1 }]);
        await service.destroy(TEAM, 'raced');
      });

      await t.test('a content call goes to a node that holds the volume, when one does', async () => {
        const v = await service.create(TEAM, { name: 'served' });
        // A service of its own: the node lists are kept for a moment.
        const fresh = new VolumeService({ repo: vdb.repo, plugins: plugin, nodes, logger: silentLogger(), coordination: new MemoryCoordination() });
        for (const n of ['node-a', 'node-b', 'node-c', 'node-d']) nodes.held.set(n, []);
        nodes.held.set('node-c', [holding(v.volumeID)]);
        for (let i = 0; i < 20; i++) assert.equal((await fresh.contentNode(v.volumeID)).nodeId, 'node-c');
        nodes.held.clear();
      });
    } finally {
      await vdb.close();
      await tdb.drop();
    }
  });
}
