import assert from 'node:assert/strict';
import { JobStore } from './store/jobs.ts';
import { onEveryEngine } from './testing/engines.ts';
import { Harness } from './testing/harness.ts';
import type { JobRow } from './tables.ts';

const IMAGE = { image: 'registry.example/library/python:3.12' };

function jobRow(id: string, spec: string): JobRow {
  const now = Date.now();
  return {
    job_id: id, template_id: 'tpl-x', kind: 'CREATE', status: 'PENDING', phase: null, request_json: '{}', source_image_ref: 'x',
    spec_hash: spec, active_spec_hash: null, artifact_id: null, error: null, progress_json: null, image_info: null,
    last_progress_at: now, created_at: now, updated_at: now, finished_at: null,
  };
}

async function activeJobs(h: Harness): Promise<JobRow[]> {
  return (await h.rows('t_svc_template_job')).filter((j) => j.status === 'PENDING' || j.status === 'RUNNING');
}

onEveryEngine('one active build job per spec', {
  'the database itself refuses a second active job for a spec, and frees the spec when the job ends': async (h) => {
    const jobs = new JobStore(h.kysely);
    assert.equal(await jobs.tryInsertActive(jobRow('j1', 'spec-a')), true);
    assert.equal(await jobs.tryInsertActive(jobRow('j2', 'spec-a')), false);
    assert.equal(await jobs.tryInsertActive(jobRow('j3', 'spec-b')), true);
    assert.equal(await jobs.transition('j1', ['PENDING'], { status: 'FAILED', error: 'x' }), true);
    assert.equal(await jobs.tryInsertActive(jobRow('j4', 'spec-a')), true);
    assert.equal((await jobs.activeForSpec('spec-a'))?.job_id, 'j4');
  },

  'concurrent creates of one spec: a single build, and every template gets the winner\'s READY artifact': async (h) => {
    await h.addNode('n1');
    const created = await Promise.all(Array.from({ length: 6 }, (_, i) => h.create({ ...IMAGE, alias: `py-${i}` })));
    assert.equal(h.tc.builds.length, 1);
    assert.equal((await activeJobs(h)).length, 1);
    const winner = h.tc.lastBuild().jobId;
    assert.ok(created.every((c) => c.job_id === winner));
    // Different cpu/memory do not change the spec; a different platform does.
    await h.create({ ...IMAGE, cpu_count: 4 });
    assert.equal(h.tc.builds.length, 1);
    await h.create({ ...IMAGE, platform: 'linux/riscv64' });
    assert.equal(h.tc.builds.length, 2);

    await h.finishBuild(winner);
    const artifactId = h.tc.builds[0].artifactId;
    const templates = (await h.call('GET', '/svc/template')).body.templates as Array<{ alias: string; status: string; artifact_id: string }>;
    const py = templates.filter((t) => t.alias?.startsWith('py-') || t.alias === null);
    assert.equal(py.filter((t) => t.artifact_id === artifactId).length, 7);
    assert.ok(py.filter((t) => t.artifact_id === artifactId).every((t) => t.status === 'ready'));
    assert.equal((await h.rows('t_svc_template_definition')).length, 7);
    assert.equal((await h.rows('t_svc_template_artifact')).filter((a) => a.status === 'READY').length, 1);
  },

  'two masters over one database start one job per spec between them': async (h) => {
    const h2 = await Harness.start({ database: h.cfg.master.database, templateCenter: h.tc });
    try {
      await h.addNode('n1');
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? h2 : h).create(IMAGE)));
      assert.equal(h.tc.builds.length, 1);
      assert.equal(new Set(results.map((r) => r.job_id)).size, 1);
      assert.equal((await activeJobs(h)).length, 1);
      // The callback may reach either master: the state lives in the database.
      await h2.finishBuild(results[0].job_id);
      const all = (await h.call('GET', '/svc/template')).body.templates as Array<{ status: string }>;
      assert.equal(all.length, 8);
      assert.ok(all.every((t) => t.status === 'ready'));
    } finally {
      await h2.close();
    }
  },

  'redo while the template builds joins the running job': async (h) => {
    const c = await h.create(IMAGE);
    const redo = await h.call('POST', '/svc/template/redo', { template_id: c.template_id });
    assert.equal(redo.status, 202);
    assert.equal(redo.body.job_id, c.job_id);
    assert.equal(h.tc.builds.length, 1);
  },

  'a template left building after its job finished is settled by the reconciler': async (h) => {
    await h.addNode('n1');
    const c = await h.create(IMAGE);
    await h.finishBuild(c.job_id);
    // As if a master died between finishing the job and updating the template.
    await h.kysely.updateTable('t_svc_template').set({ status: 'building', artifact_id: null }).execute();
    await h.kysely.deleteFrom('t_svc_template_definition').execute();
    await h.module.reconcileOnce();
    const t = (await h.call('GET', `/svc/template/${c.template_id}`)).body;
    assert.equal(t.status, 'ready');
    assert.equal(t.artifact_id, h.tc.lastBuild().artifactId);
    assert.equal((await h.rows('t_svc_template_definition')).length, 1);
  },
});
