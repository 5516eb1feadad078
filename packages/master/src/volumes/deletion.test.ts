import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryCoordination, silentLogger, type SvcError } from '@svc/common';
import { availableTestDatabases } from '../db/test-databases.ts';
import { attachClaimTtlMs } from './attach-claims.ts';
import { attachesUnderWay } from './repo.ts';
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

      await t.test('an attach under way (its create read the volume before the mark) refuses the delete until its node answered: 409 130409, the mark taken back, nothing destroyed', async () => {
        const v = await service.create(TEAM, { name: 'attaching' });
        const [m] = await service.resolveMounts(TEAM, [{ name: 'attaching', path: '/mnt', readOnly: false }]);
        let refused: SvcError | undefined;
        await service.whileAttaching([m.onNode.volumeId], async () => {
          // The delete comes between the create's read and its node's answer; no node lists the volume yet.
          refused = await failure(service.destroy(TEAM, 'attaching'));
          // The node attached it and answers.
          nodes.held.set('node-1', [holding(v.volumeID)]);
          await service.applyFlips([{ volumeId: v.volumeID, delta: 1 }]);
        });
        assert.deepEqual([refused!.status, refused!.code], [409, 130409]);
        assert.match(refused!.message, /being attached by a sandbox that is starting or resuming/);
        assert.equal(plugin.destroyed.includes(v.volumeID), false, 'nothing was destroyed');
        // The mark was taken back: the volume is usable, and now held, which refuses the delete as before.
        await service.resolveMounts(TEAM, [{ name: 'attaching', path: '/mnt', readOnly: false }]);
        assert.match((await failure(service.destroy(TEAM, 'attaching'))).message, /is mounted \(held on 1 node\)/);
        nodes.held.clear();
        await service.applyFlips([{ volumeId: v.volumeID, delta: -1 }]);
        await service.destroy(TEAM, 'attaching');
        assert.equal(plugin.destroyed.at(-1), v.volumeID);
      });

      await t.test('an attach that reaches its claim after the mark is refused (409) and never runs; one that fails ends its claims', async (st) => {
        const v = await service.create(TEAM, { name: 'late' });
        const other = await service.create(TEAM, { name: 'other' });
        let entered!: () => void;
        const inDestroy = new Promise<void>((r) => { entered = r; });
        let release!: () => void;
        const gate = new Promise<void>((r) => { release = r; });
        plugin.hooks.destroy = async () => { entered(); await gate; };
        st.after(() => { release(); plugin.hooks.destroy = undefined; });
        const deleting = service.destroy(TEAM, 'late');
        await inDestroy;
        let ran = false;
        // The other volume is claimed first, then this one's claim fails: the other's claim ends too.
        const late = await failure(service.whileAttaching([other.volumeID, v.volumeID], async () => { ran = true; }));
        assert.deepEqual([late.status, ran], [409, false]);
        assert.match(late.message, /volume late is being deleted/);
        release();
        await deleting;
        assert.equal((await failure(service.get(TEAM, 'late'))).status, 404);
        await assert.rejects(service.whileAttaching([v.volumeID], async () => {}), { status: 404 }, 'a volume gone since it was read');
        await assert.rejects(service.whileAttaching([other.volumeID], async () => { throw new Error('the node refused'); }), /the node refused/);
        const row = await vdb.repo.byId(other.volumeID);
        assert.equal(Number(row!.attach_claims), 0, 'a failed attach and a refused claim end their claims');
        await service.destroy(TEAM, 'other');
      });

      await t.test('claims count: two attaches under way, one ended, still refuse; claims of a master that died lapse at their time', async () => {
        const v = await service.create(TEAM, { name: 'counted' });
        const now = Date.now();
        assert.equal(await vdb.repo.claimAttach(v.volumeID, now, now + 60_000), true);
        assert.equal(await vdb.repo.claimAttach(v.volumeID, now, now + 30_000), true);
        await vdb.repo.releaseAttach(v.volumeID);
        const held = await failure(service.destroy(TEAM, 'counted'));
        assert.equal(held.code, 130409, 'one claim is still under way');
        assert.match(held.message, new RegExp(`claims lapse at ${new Date(now + 60_000).toISOString().replace(/\./g, '\\.')} at the latest`), 'it says until when a stopped master\'s claim holds it');
        await vdb.repo.releaseAttach(v.volumeID);
        await vdb.repo.releaseAttach(v.volumeID);
        assert.equal(Number((await vdb.repo.byId(v.volumeID))!.attach_claims), 0, 'never below 0');
        await service.destroy(TEAM, 'counted');
        // Claims whose master died: they count until their time, then a new claim starts the count again.
        const reset = await service.create(TEAM, { name: 'reset' });
        assert.equal(await vdb.repo.claimAttach(reset.volumeID, now - 120_000, now - 60_000), true);
        assert.equal(await vdb.repo.claimAttach(reset.volumeID, now - 120_000, now - 60_000), true);
        assert.equal(Number((await vdb.repo.byId(reset.volumeID))!.attach_claims), 2);
        assert.equal(await vdb.repo.claimAttach(reset.volumeID, now, now + 60_000), true);
        assert.equal(Number((await vdb.repo.byId(reset.volumeID))!.attach_claims), 1, 'the lapsed claims are forgotten by the next one');
        await vdb.repo.releaseAttach(reset.volumeID);
        await service.destroy(TEAM, 'reset');
        const lapsed = await service.create(TEAM, { name: 'lapsed' });
        assert.equal(await vdb.repo.claimAttach(lapsed.volumeID, now - 120_000, now - 60_000), true);
        await service.destroy(TEAM, 'lapsed');
        assert.equal(plugin.destroyed.at(-1), lapsed.volumeID, 'a lapsed claim does not hold the delete');
      });

      await t.test('a claim counts as long as the longest attach: every node a placement may ask, each within the create timeout', async () => {
        assert.equal(attachClaimTtlMs(60, 3), 15 * 60_000, 'the default create timeout keeps the least');
        assert.equal(attachClaimTtlMs(900, 3), (3 * 900 + 60) * 1000, 'a create timeout of 15 minutes: three nodes of it and a minute');
        const v = await service.create(TEAM, { name: 'patient' });
        const patient = new VolumeService({ repo: vdb.repo, plugins: plugin, nodes, logger: silentLogger(), attachClaimTtlMs: attachClaimTtlMs(900, 3) });
        const before = Date.now();
        await patient.whileAttaching([v.volumeID], async () => {
          const until = Number((await vdb.repo.byId(v.volumeID))!.attach_claims_until);
          assert.ok(until >= before + (3 * 900 + 60) * 1000, `the claim counts until ${until - before} ms from now`);
          // 20 minutes on, past the least, the attach is still under way and the DELETE still refused.
          const row = (await vdb.repo.byId(v.volumeID))!;
          assert.equal(attachesUnderWay(row, before + 20 * 60_000), true);
        });
        await service.destroy(TEAM, 'patient');
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
