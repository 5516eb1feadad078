import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import assert from 'node:assert/strict';
import type { SandboxRow } from '../db/schema.ts';
import { onEveryEngine } from './testing/engines.ts';
import type { Harness } from './testing/harness.ts';

const IMAGE = { image: 'registry.example/library/golang:1.23' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function readyTemplate(h: Harness, body: Record<string, unknown> = IMAGE): Promise<{ templateId: string; artifactId: string }> {
  const c = await h.create(body);
  await h.finishBuild(c.job_id);
  const t = (await h.call('GET', `/svc/template/${c.template_id}`)).body;
  assert.equal(t.status, 'ready');
  return { templateId: c.template_id, artifactId: t.artifact_id };
}

async function artifact(h: Harness, id: string) {
  return (await h.rows('t_svc_template_artifact')).find((a) => a.artifact_id === id);
}

async function addSandbox(h: Harness, id: string, templateId: string, state: string): Promise<void> {
  const now = Date.now();
  const row: SandboxRow = {
    sandbox_id: id, template_id: templateId, alias: null, node_id: 'n1', state, pause_kind: state === 'paused' ? 'freeze' : null,
    address: '10.0.0.2', envd_port: 49983, envd_version: '0', envd_access_token: null, traffic_access_token: null, secure: 0,
    runtime: 'gvisor', cpu_count: 1, memory_mb: 256, disk_size_mb: 1024, metadata: '{}', network: '{}', allow_internet_access: null,
    on_timeout: 'kill', auto_resume: 0, timeout_sec: -1, end_at: null, started_at: now, created_at: now, updated_at: now,
    terminated_at: null, terminate_reason: null, volume_mounts: '[]', env_vars: null, auto_pause_memory: 1, team_id: DEFAULT_TEAM_ID, iam: null, pause_snapshot_id: null, node_selector: null,
  };
  await h.kysely.insertInto('t_svc_sandbox').values(row).execute();
}

onEveryEngine('artifact deletion', {
  'template delete: mark CLEANUP_PENDING, destroy on placement nodes, then drop placements and ask the template center': async (h) => {
    const n1 = await h.addNode('n1');
    const n2 = await h.addNode('n2');
    const { templateId, artifactId } = await readyTemplate(h);
    assert.ok(n1.artifacts.has(artifactId) && n2.artifacts.has(artifactId));

    // A node that does not confirm stops the deletion after phase 2: the artifact stays CLEANUP_PENDING.
    n2.failDeleteWith = 500;
    h.tc.log.length = 0;
    assert.equal((await h.call('DELETE', `/svc/template/${templateId}`)).status, 204);
    assert.equal((await h.call('GET', `/svc/template/${templateId}`)).status, 404);
    assert.equal((await artifact(h, artifactId))?.status, 'CLEANUP_PENDING');
    assert.ok(!n1.artifacts.has(artifactId));
    assert.deepEqual(h.tc.deletes, []);
    const placements = await h.rows('t_svc_template_placement');
    assert.ok(placements.every((p) => p.status === 'DELETING'));
    assert.deepEqual(await h.rows('t_svc_template_definition'), []);
    // The resolver and the download route no longer hand it out.
    assert.equal((await h.call('GET', `/svc/template/artifact/download?artifact_id=${artifactId}`)).status, 404);

    // The sweep carries the deletion on once the node answers.
    n2.failDeleteWith = null;
    h.tc.log.length = 0;
    const swept = await h.module.sweepOnce();
    assert.deepEqual(swept.deleted, [artifactId]);
    assert.ok(!n2.artifacts.has(artifactId));
    assert.equal(await artifact(h, artifactId), undefined);
    assert.deepEqual(await h.rows('t_svc_template_placement'), []);
    assert.deepEqual(h.tc.deletes, [artifactId]);
    // Phase order: node copies first, the stored object last.
    assert.equal(h.tc.log.at(-1), `tc delete ${artifactId}`);
    assert.ok(h.tc.log.slice(0, -1).every((l) => l.startsWith('node ')));
  },

  'one template delete runs all three phases at once when nothing else needs the artifact': async (h) => {
    await h.addNode('n1');
    const { templateId, artifactId } = await readyTemplate(h);
    h.tc.log.length = 0;
    assert.equal((await h.call('DELETE', `/svc/template/${templateId}`)).status, 204);
    assert.equal(await artifact(h, artifactId), undefined);
    assert.deepEqual(h.tc.log, [`node n1 delete ${artifactId}`, `tc delete ${artifactId}`]);
    assert.deepEqual(await h.rows('t_svc_template_placement'), []);
  },

  'a template deleted during its build: the job fails, the template center cancels it, and the late FAILED report changes nothing': async (h) => {
    const c = await h.call('POST', '/svc/template', { ...IMAGE, alias: 'doomed' }, { 'x-svc-team': 'team-a' });
    assert.equal(c.status, 202, JSON.stringify(c.body));
    const jobId: string = c.body.job_id;
    assert.equal(h.tc.lastBuild().queue, 'team-a', 'the build is queued in the template center by its team');
    assert.equal(await h.tc.callback(h.url, jobId, { status: 'RUNNING', phase: 'PULLING' }), 204);
    assert.equal((await h.call('DELETE', `/svc/template/${c.body.template_id}`, undefined, { 'x-svc-team': 'team-a' })).status, 204);
    assert.deepEqual(h.tc.cancels, [jobId]);
    const failed = (await h.rows('t_svc_template_job')).find((j) => j.job_id === jobId)!;
    assert.equal(failed.status, 'FAILED');
    assert.equal(failed.error, `template ${c.body.template_id} was deleted during the build`);
    // What the template center reports once its build is aborted.
    assert.equal(await h.tc.callback(h.url, jobId, { status: 'FAILED', error: 'the build was cancelled because its template was deleted' }), 204);
    const after = (await h.rows('t_svc_template_job')).find((j) => j.job_id === jobId)!;
    assert.equal(after.error, failed.error, 'the job keeps the reason it ended with');
    assert.deepEqual(await h.rows('t_svc_template'), [], 'nothing resurrected');
    assert.equal((await h.call('GET', '/svc/template/doomed')).status, 404);
  },

  'the cancel is best effort: a template center that refuses it does not fail the delete; a build another template waits for is not cancelled': async (h) => {
    const [a, b] = await Promise.all([h.create({ ...IMAGE, alias: 'a' }), h.create({ ...IMAGE, alias: 'b' })]);
    assert.equal(a.job_id, b.job_id);
    assert.equal(h.tc.lastBuild().queue, DEFAULT_TEAM_ID, 'the operator\'s builds are queued as the default team\'s');
    assert.equal((await h.call('DELETE', '/svc/template/a')).status, 204);
    assert.deepEqual(h.tc.log.filter((l) => l.startsWith('tc cancel')), [], 'b still follows the job');
    h.tc.failCancelWith = 503;
    assert.equal((await h.call('DELETE', '/svc/template/b')).status, 204);
    assert.deepEqual(h.tc.log.filter((l) => l.startsWith('tc cancel')), [`tc cancel ${a.job_id}`], 'asked once, refused');
    assert.deepEqual(await h.rows('t_svc_template'), []);
    assert.equal((await h.rows('t_svc_template_job'))[0]?.status, 'FAILED');
    assert.deepEqual(await h.rows('t_svc_template_artifact'), [], 'the build\'s artifact row is cleaned up all the same');
  },

  'an artifact shared by two templates stays until the last owner goes': async (h) => {
    await h.addNode('n1');
    const [a, b] = await Promise.all([h.create({ ...IMAGE, alias: 'a' }), h.create({ ...IMAGE, alias: 'b' })]);
    assert.equal(a.job_id, b.job_id);
    await h.finishBuild(a.job_id);
    const artifactId = h.tc.lastBuild().artifactId;
    assert.equal((await h.call('DELETE', '/svc/template/a')).status, 204);
    assert.equal((await artifact(h, artifactId))?.status, 'READY');
    assert.deepEqual(h.tc.deletes, []);
    assert.equal((await h.module.resolver.resolveForCreate('b')).artifact.artifactId, artifactId);
    assert.equal((await h.call('DELETE', '/svc/template/b')).status, 204);
    assert.equal(await artifact(h, artifactId), undefined);
    assert.deepEqual(h.tc.deletes, [artifactId]);
  },

  'a template in use by running and paused sandboxes is deleted; its artifact stays until they are gone': [{ graceMs: 50 }, async (h) => {
    await h.addNode('n1');
    const { templateId, artifactId } = await readyTemplate(h);
    await addSandbox(h, 'sb-run', templateId, 'running');
    await addSandbox(h, 'sb-paused', templateId, 'paused');
    assert.equal((await h.call('DELETE', `/svc/template/${templateId}`)).status, 204);
    assert.equal((await h.call('GET', `/svc/template/${templateId}`)).status, 404);
    assert.equal((await artifact(h, artifactId))?.status, 'READY');
    const [def] = await h.rows('t_svc_template_definition');
    assert.ok(def.superseded_at);
    // The download keeps working for the nodes that run those sandboxes.
    assert.equal((await h.call('HEAD', `/svc/template/artifact/download?artifact_id=${artifactId}`)).status, 200);

    await sleep(80);
    assert.deepEqual((await h.module.sweepOnce()).deleted, []);
    assert.equal((await artifact(h, artifactId))?.gc_deadline_at, null);

    await h.kysely.updateTable('t_svc_sandbox').set({ state: 'terminated' }).where('sandbox_id', '=', 'sb-run').execute();
    await sleep(80);
    assert.deepEqual((await h.module.sweepOnce()).deleted, [], 'the paused sandbox still needs it');

    await h.kysely.updateTable('t_svc_sandbox').set({ state: 'terminated' }).where('sandbox_id', '=', 'sb-paused').execute();
    await h.module.sweepOnce(); // prunes the definition and starts the artifact's grace period
    assert.deepEqual(await h.rows('t_svc_template_definition'), []);
    assert.ok((await artifact(h, artifactId))?.gc_deadline_at);
    await sleep(80);
    assert.deepEqual((await h.module.sweepOnce()).deleted, [artifactId]);
    assert.deepEqual(h.tc.deletes, [artifactId]);
  }],

  'a refusal names the templates built on it before its many snapshots; a pause package does not hold it': async (h) => {
    await h.addNode('n1');
    const { templateId, artifactId } = await readyTemplate(h);
    const snapshot = (id: string, purpose: 'snapshot' | 'build' | 'pause') => h.kysely.insertInto('t_svc_snapshot').values({
      snapshot_id: id, name: null, sandbox_id: 'sb-1', template_id: templateId, artifact_id: artifactId, layer_id: id, layer_sha256: 'x',
      size_bytes: 1, node_id: 'n1', status: 'ready', purpose, cache_key: null, build_id: null, volume_mounts: null, contents: 'filesystem',
      cpu_count: 1, memory_mb: 256, disk_size_mb: 1024, env_vars: '{}', team_id: DEFAULT_TEAM_ID, created_at: Date.now(),
    }).execute();
    await snapshot('snap-pkg', 'pause');
    for (let i = 0; i < 25; i++) await snapshot(`snap-${String(i).padStart(2, '0')}`, 'snapshot');
    await snapshot('snap-built', 'build');
    const { templateId: builtId } = await readyTemplate(h, { ...IMAGE, alias: 'built-on-it' });
    await h.kysely.updateTable('t_svc_template').set({ layer_snapshot_id: 'snap-built' }).where('template_id', '=', builtId).execute();

    const refused = await h.call('DELETE', `/svc/template/${templateId}`);
    assert.equal(refused.status, 409);
    assert.match(refused.body.message, new RegExp(`^template ${templateId} has snapshots or built templates that start from it: template built-on-it, snap-00, snap-01, .* and 6 more; delete them first$`));
    assert.doesNotMatch(refused.body.message, /snap-pkg|snap-built/, 'neither the pause package nor the build snapshot is for the user to delete');

    await h.kysely.deleteFrom('t_svc_snapshot').where('purpose', '!=', 'pause').execute();
    await h.kysely.updateTable('t_svc_template').set({ layer_snapshot_id: null }).where('template_id', '=', builtId).execute();
    assert.equal((await h.call('DELETE', `/svc/template/${templateId}`)).status, 204, 'a paused sandbox\'s package does not hold the template');
    assert.equal((await artifact(h, artifactId))?.status, 'READY', 'the package still needs the artifact');
  },

  'GC sweep: an artifact a redo left behind is deleted once unreferenced past its deadline': [{ graceMs: 500 }, async (h) => {
    const node = await h.addNode('n1');
    const { templateId, artifactId: first } = await readyTemplate(h);
    // Make the first artifact unusable for a redo, so the redo rebuilds a second one.
    await h.kysely.updateTable('t_svc_template_artifact').set({ status: 'BUILDING' }).where('artifact_id', '=', first).execute();
    const redo = await h.call('POST', '/svc/template/redo', { template_id: templateId });
    await h.finishBuild(redo.body.job_id);
    const second = h.tc.lastBuild().artifactId;
    await h.kysely.updateTable('t_svc_template_artifact').set({ status: 'READY' }).where('artifact_id', '=', first).execute();
    assert.equal((await h.call('GET', `/svc/template/${templateId}`)).body.artifact_id, second);

    // Superseded moments ago: a sandbox create may still be on its way with it.
    await h.module.sweepOnce();
    assert.equal((await artifact(h, first))?.gc_deadline_at, null);
    await sleep(600);
    await h.module.sweepOnce(); // definition pruned, deadline set
    assert.ok((await artifact(h, first))?.gc_deadline_at);
    assert.ok(node.artifacts.has(first));
    await sleep(600);
    assert.deepEqual((await h.module.sweepOnce()).deleted, [first]);
    assert.ok(!node.artifacts.has(first));
    assert.ok(node.artifacts.has(second));
    assert.deepEqual(h.tc.deletes, [first]);
    assert.equal((await artifact(h, second))?.status, 'READY');
  }],

  'GC sweep: orphans from failed or joined builds are removed; a referenced deadline is cleared': [{ graceMs: 50 }, async (h) => {
    const c = await h.create(IMAGE);
    await h.tc.callback(h.url, c.job_id, { status: 'FAILED', error: 'boom' });
    const failedArtifact = h.tc.lastBuild().artifactId;
    // Still the template's latest job's artifact: kept.
    await h.module.sweepOnce();
    await sleep(80);
    assert.deepEqual((await h.module.sweepOnce()).deleted, []);
    // A redo starts a new job: the old artifact loses its last reference.
    await h.call('POST', '/svc/template/redo', { template_id: c.template_id });
    await h.module.sweepOnce();
    await sleep(80);
    assert.deepEqual((await h.module.sweepOnce()).deleted, [failedArtifact]);
    // The new build's artifact is referenced by its active job and never gets a deadline.
    const active = h.tc.lastBuild().artifactId;
    assert.equal((await artifact(h, active))?.gc_deadline_at, null);
  }],

  'a template center that does not delete leaves CLEANUP_PENDING for the sweep; a dead node does not block': async (h) => {
    await h.addNode('n1');
    const dead = await h.addNode('n2');
    const { templateId, artifactId } = await readyTemplate(h);
    await h.kysely.updateTable('t_svc_node').set({ last_heartbeat_at: Date.now() - 3600_000 }).where('node_id', '=', 'n2').execute();
    dead.failDeleteWith = 500;
    h.tc.failDeleteWith = 503;
    assert.equal((await h.call('DELETE', `/svc/template/${templateId}`)).status, 204);
    assert.equal((await artifact(h, artifactId))?.status, 'CLEANUP_PENDING');
    assert.deepEqual(await h.rows('t_svc_template_placement'), []);
    h.tc.failDeleteWith = null;
    assert.deepEqual((await h.module.sweepOnce()).deleted, [artifactId]);
    // When the dead node comes back it drops the copy the master no longer knows.
    assert.ok(dead.artifacts.has(artifactId));
    dead.failDeleteWith = null;
    h.module.onNodeRegistered('n2');
    await h.module.settled();
    assert.ok(!dead.artifacts.has(artifactId));
  },
});
