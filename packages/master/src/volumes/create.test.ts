import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryCoordination, type SvcError } from '@svc/common';
import { NO_LIMITS, type TeamLimits } from '@svc/contracts/teams';
import { VolumePluginError } from '@svc/volumes';
import { availableTestDatabases } from '../db/test-databases.ts';
import { VolumeService } from './service.ts';
import { fakeNodes, recordingLogger, steeredPlugin, volumeDatabase } from './test-harness.ts';

const failure = (p: Promise<unknown>) => p.then(() => assert.fail('it succeeded'), (e: SvcError) => e);

for (const engine of availableTestDatabases()) {
  test(`volume create on ${engine.driver}: the team's quota, the plugin's token, what a failure says`, { skip: engine.skip }, async (t) => {
    const tdb = await engine.create!();
    const vdb = await volumeDatabase(tdb.config);
    const plugin = steeredPlugin();
    const limits: TeamLimits = { ...NO_LIMITS };
    const { logger, lines } = recordingLogger();
    // Two masters over one database and one coordination store.
    const coordination = new MemoryCoordination();
    const masters = [0, 1].map(() => new VolumeService({ repo: vdb.repo, plugins: plugin, nodes: fakeNodes(), logger, coordination, quotas: { limits: async () => limits } }));
    try {
      await t.test('maxVolumes: creates at once, on two masters, keep to it; E2B\'s 429 past it; 0 is no limit', async () => {
        limits.maxVolumes = 3;
        // A Create that takes a moment: without the team's lock every create passes the count first.
        plugin.hooks.create = async () => {
          await new Promise((r) => setTimeout(r, 20));
          return { token: `tok_${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`, privateData: '' };
        };
        const made = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => masters[i % 2].create('team-q', { name: `v${i}` })));
        const refused = made.filter((o) => o.status === 'rejected').map((o) => (o as PromiseRejectedResult).reason as SvcError);
        assert.equal(made.filter((o) => o.status === 'fulfilled').length, 3);
        for (const e of refused) {
          assert.equal(e.status, 429, e.message);
          assert.match(e.message, /^team quota maxVolumes reached: the team may keep 3 volumes and keeps 3/);
        }
        assert.equal((await masters[0].list('team-q')).length, 3);
        assert.equal((await masters[0].create('team-other', { name: 'v0' })).name, 'v0', 'another team counts its own');
        await masters[0].destroy('team-q', 'v0');
        await masters[1].create('team-q', { name: 'again' });
        limits.maxVolumes = 0;
        await masters[0].create('team-q', { name: 'unlimited' });
        plugin.hooks.create = undefined;
      });

      await t.test('a token another volume has fails the create (500), and what the plugin made is undone', async () => {
        plugin.hooks.create = async () => ({ token: 'the-same-token-for-everyone', privateData: '' });
        await masters[0].create('team-t', { name: 'first' });
        const second = await failure(masters[0].create('team-t', { name: 'second' }));
        assert.equal(second.status, 500);
        assert.match(second.message, /the volume plugin 'steered' could not create volume second: it answered a token another volume has/);
        assert.equal((await failure(masters[0].get('team-t', 'second'))).status, 404);
        assert.equal(plugin.destroyed.length > 0, true, 'the second volume\'s backend was destroyed');
        plugin.hooks.create = undefined;
      });

      await t.test('a plugin\'s failure reaches the caller without its words (they name host paths); the log has them, with the volume', async () => {
        plugin.hooks.create = async () => { throw new VolumePluginError('steered', 'create', 'exit code 1: mkdir /data/svc-shared/volume-data/abc: read-only file system'); };
        const failed = await failure(masters[0].create('team-f', { name: 'broken' }));
        assert.equal(failed.status, 500);
        assert.equal(failed.message, 'the volume plugin \'steered\' could not create volume broken; the master\'s log has the detail');
        assert.ok(lines.some((l) => l.name === 'broken' && typeof l.volumeId === 'string' && String(l.err).includes('/data/svc-shared/volume-data/abc')));
        // svc's own words about an answer out of protocol are passed on.
        plugin.hooks.create = async () => { throw new VolumePluginError('steered', 'create', 'answered a token of 5 characters; ... at least 22 random characters', { forCaller: true }); };
        assert.match((await failure(masters[0].create('team-f', { name: 'short' }))).message, /^the volume plugin 'steered' could not create volume short: answered a token of 5 characters/);
        plugin.hooks.create = undefined;
      });
    } finally {
      await vdb.close();
      await tdb.drop();
    }
  });
}
