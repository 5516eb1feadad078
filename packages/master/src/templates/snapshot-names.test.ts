import assert from 'node:assert/strict';
import { onEveryEngine } from './testing/engines.ts';

/**
 * Template and snapshot names are one namespace for every team, and a create looks templates up
 * before snapshots (docs/security.md): a template given another team's snapshot name hid that
 * snapshot from its team, and the template's DELETE fell back to deleting the snapshot of that
 * name once the alias had moved away. Found by reading the master as another team would.
 */
onEveryEngine('template names and snapshot names', {
  'a template may not take a snapshot\'s name, by create, by a builder build or by a new alias; its id is taken too': async (h) => {
    await h.addNode('n1');
    await h.kysely.insertInto('t_svc_snapshot').values({
      snapshot_id: 'snap-a1', name: 'snap-of-a', sandbox_id: 'sb-1', template_id: 'base', artifact_id: 'art', layer_id: 'snap-a1', layer_sha256: 'x',
      size_bytes: 1, node_id: 'n1', status: 'ready', purpose: 'snapshot', cache_key: null, build_id: null, volume_mounts: null, contents: 'filesystem',
      cpu_count: 1, memory_mb: 256, disk_size_mb: 1024, env_vars: '{}', team_id: 'team-a', created_at: Date.now(),
    }).execute();
    const B = { 'x-svc-team': 'team-b' };
    for (const name of ['snap-of-a', 'snap-a1']) {
      const r = await h.call('POST', '/svc/template', { image: 'registry.example/app:1', alias: name }, B);
      assert.equal(r.status, 409, JSON.stringify(r.body));
      assert.equal(r.body.message, `the name ${name} is a snapshot's: choose another name`);
    }
    await assert.rejects(h.module.service.forBuild('snap-of-a', { cpuCount: 1, memoryMB: 256 }, { teamId: 'team-b' }), (e: { status?: number }) => e.status === 409);
    const own = await h.call('POST', '/svc/template', { image: 'registry.example/app:1', alias: 'b-own' }, B);
    assert.equal(own.status, 202, JSON.stringify(own.body));
    const renamed = await h.call('PUT', `/svc/template/${own.body.template_id ?? own.body.templateID}/alias`, { alias: 'snap-of-a' }, B);
    assert.equal(renamed.status, 409, JSON.stringify(renamed.body));
    assert.equal((await h.rows('t_svc_template')).filter((t) => t.alias === 'snap-of-a').length, 0, 'no template has the name');
    // A name no snapshot has is free, and clearing an alias asks nothing.
    assert.equal((await h.call('PUT', `/svc/template/${own.body.template_id ?? own.body.templateID}/alias`, { alias: 'b-renamed' }, B)).status, 200);
  },
});
