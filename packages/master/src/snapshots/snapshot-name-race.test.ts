import assert from 'node:assert/strict';
import { onEveryEngine } from '../templates/testing/engines.ts';
import { SnapshotRepo } from './repo.ts';

/**
 * A snapshot's name is checked before its capture and set when its layer is stored, seconds
 * later. Another team's capture that took the name meanwhile had it cleared and taken over
 * (markReady cleared the name from every row): the first team's creates by that name then
 * started the other team's snapshot.
 */
onEveryEngine('a snapshot name set when the layer is stored', {
  'moves from the team\'s own snapshot, never from another team\'s (409, the row stays pending); two at once are kept apart': async (h) => {
    await h.addNode('n1');
    const row = (id: string, team: string, status: 'ready' | 'pending', name: string | null = null) => ({
      snapshot_id: id, name, sandbox_id: 'sb-1', template_id: 'base', artifact_id: 'art', layer_id: id, layer_sha256: 'x',
      size_bytes: 1, node_id: 'n1', status, purpose: 'snapshot' as const, cache_key: null, build_id: null, volume_mounts: null, contents: 'filesystem',
      cpu_count: 1, memory_mb: 256, disk_size_mb: 1024, env_vars: '{}', team_id: team, created_at: Date.now(),
    });
    await h.kysely.insertInto('t_svc_snapshot').values([
      row('snap-a1', 'team-a', 'ready', 'base'), row('snap-a2', 'team-a', 'pending'), row('snap-b1', 'team-b', 'pending'),
      row('snap-b2', 'team-b', 'pending'), row('snap-c1', 'team-c', 'pending'),
    ]).execute();
    const repo = new SnapshotRepo(h.kysely);
    const names = async () => Object.fromEntries((await h.rows('t_svc_snapshot')).map((r) => [r.snapshot_id, `${r.status}:${r.name ?? ''}`]));

    await assert.rejects(repo.markReady('snap-b1', { name: 'base', teamId: 'team-b' }), (e: { status?: number; message?: string }) => e.status === 409 && /the snapshot name base was taken by another team/.test(e.message ?? ''));
    assert.equal((await names())['snap-a1'], 'ready:base', 'team A keeps its name');
    assert.equal((await names())['snap-b1'], 'pending:', 'the refused capture is left for its caller to discard');

    await repo.markReady('snap-a2', { name: 'base', teamId: 'team-a' });
    assert.deepEqual([(await names())['snap-a1'], (await names())['snap-a2']], ['ready:', 'ready:base'], 'the name moves within the team');

    // Two teams naming a free name at once: one has it, the other a 409, never both.
    const both = await Promise.allSettled([
      repo.markReady('snap-b2', { name: 'fresh', teamId: 'team-b' }),
      repo.markReady('snap-c1', { name: 'fresh', teamId: 'team-c' }),
    ]);
    assert.equal(both.filter((r) => r.status === 'fulfilled').length, 1, JSON.stringify(both));
    const refused = both.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    assert.equal((refused.reason as { status?: number }).status, 409, String(refused.reason));
    assert.equal(Object.values(await names()).filter((v) => v === 'ready:fresh').length, 1);
    // A template that took the name while the layer was stored: the snapshot would be hidden behind it.
    await h.kysely.insertInto('t_svc_snapshot').values(row('snap-c2', 'team-c', 'pending')).execute();
    const tpl = await h.call('POST', '/svc/template', { image: 'registry.example/app:1', alias: 'late-name' }, { 'x-svc-team': 'team-b' });
    assert.equal(tpl.status, 202, JSON.stringify(tpl.body));
    await assert.rejects(repo.markReady('snap-c2', { name: 'late-name', teamId: 'team-c' }), (e: { status?: number; message?: string }) => e.status === 409 && /taken by a template/.test(e.message ?? ''));
    // A capture without a name is made ready as before.
    await repo.markReady('snap-b1', null);
    assert.equal((await names())['snap-b1'], 'ready:');
  },
});
