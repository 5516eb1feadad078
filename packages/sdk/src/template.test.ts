import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { InvalidArgumentError, Node, NotFoundError, SandboxError, Template, TemplateNotFoundError, type JobInfo } from './index.ts';
import { startFakeApi, type FakeApi } from './testing/fake-api.ts';
import { ErrorCodes } from '@svc/common';

let api: FakeApi;
let conn: { apiUrl: string };
before(async () => {
  api = await startFakeApi();
  conn = { apiUrl: api.url };
});
after(() => api.close());

test('create sends snake_case fields and the build is followed to BUILT', async () => {
  const ref = await Template.create({
    image: 'registry.local/app:1', alias: 'app', registryAuth: { username: 'u', password: 'p' },
    insecureRegistry: true, platform: 'linux/amd64', withSvcCa: false, startCmd: 'python3 -m http.server 8000', readyCmd: 'curl -sf localhost:8000',
  }, conn);
  assert.deepEqual(api.requests[api.requests.length - 1].body, {
    image: 'registry.local/app:1', alias: 'app', registry_auth: { username: 'u', password: 'p' },
    insecure_registry: true, platform: 'linux/amd64', with_svc_ca: false, start_cmd: 'python3 -m http.server 8000', ready_cmd: 'curl -sf localhost:8000',
  });
  await assert.rejects(Template.create({ image: 'x', readyCmd: 'true' }, conn), /readyCmd needs startCmd/);
  assert.match(ref.templateId, /^tpl-/);
  const seen: JobInfo[] = [];
  const job = await Template.waitForBuild(ref.jobId, { ...conn, pollMs: 1, onProgress: (j) => seen.push(j) });
  assert.equal(job.status, 'BUILT');
  assert.ok(seen.some((j) => j.phase === 'PULLING' && j.progress.layers.length === 2));
  assert.equal(seen[seen.length - 1].progress.layers[0].doneBytes, 4000);
  const info = await Template.get('app', conn);
  assert.equal(info.templateId, ref.templateId);
  assert.equal(info.status, 'ready');
  assert.ok(info.createdAt instanceof Date);
  assert.ok((await Template.list(conn)).some((t) => t.templateId === ref.templateId));
});

test('a failed build throws with the job error', async () => {
  const ref = await Template.create({ ociLayout: '/tmp/broken-layout' }, conn);
  await assert.rejects(Template.waitForBuild(ref.jobId, { ...conn, pollMs: 1 }), (e: unknown) => e instanceof SandboxError && /no root filesystem/.test(e.message));
});

test('alias, redo, migrate, delete', async () => {
  const ref = await Template.create({ rootfsTar: '/tmp/rootfs.tar' }, conn);
  assert.equal((await Template.setAlias(ref.templateId, 'my-tpl', conn)).alias, 'my-tpl');
  assert.deepEqual(api.requests[api.requests.length - 1].body, { alias: 'my-tpl' });
  assert.equal((await Template.setAlias(ref.templateId, undefined, conn)).alias, undefined);
  assert.deepEqual(api.requests[api.requests.length - 1].body, { alias: null });
  const redo = await Template.redo(ref.templateId, conn);
  assert.equal(redo.templateId, ref.templateId);
  assert.notEqual(redo.jobId, ref.jobId);
  assert.equal((await Template.status(redo.jobId, conn)).kind, 'REDO');
  assert.equal((await Template.migrate(ref.templateId, conn)).templateId, ref.templateId);
  assert.equal(await Template.delete(ref.templateId, conn), true);
  assert.equal(await Template.delete(ref.templateId, conn), false);
  await assert.rejects(Template.get(ref.templateId, conn), (e: unknown) => e instanceof TemplateNotFoundError && e.code === ErrorCodes.templateNotFound);
});

test('bad specs are refused before any request', async () => {
  const n = api.requests.length;
  await assert.rejects(Template.create({ image: 'a', ociLayout: 'b' } as never, conn), InvalidArgumentError);
  await assert.rejects(Template.create({ image: 'a', alias: 'Bad_Alias' }, conn), InvalidArgumentError);
  await assert.rejects(Template.create({ image: 'a', platform: 'amd64' }, conn), InvalidArgumentError);
  assert.equal(api.requests.length, n);
});

test('nodes: list, label, unlabel', async () => {
  const nodes = await Node.list(conn);
  assert.equal(nodes[0].id, 'node-1');
  assert.deepEqual(nodes[0].labels, { zone: 'a' });
  assert.deepEqual((await Node.label('node-1', { 'svc.dev/gpu': 'yes' }, conn))?.labels, { zone: 'a', 'svc.dev/gpu': 'yes' });
  assert.deepEqual((await Node.unlabel('node-1', ['zone'], conn))?.labels, { 'svc.dev/gpu': 'yes' });
  await assert.rejects(Node.label('node-1', { 'bad label': 'x' }, conn), InvalidArgumentError);
});

test('nodes: drain and undrain', async () => {
  const seen: string[] = [];
  const drained = await Node.drain('node-1', { ...conn, pollIntervalMs: 10, onProgress: (s) => seen.push(`${s.state} ${s.remaining}/${s.total}`) });
  assert.equal(drained.node.id, 'node-1');
  assert.equal(drained.node.status, 'draining');
  assert.equal(drained.state, 'done');
  assert.deepEqual([drained.moved, drained.stored, drained.failed], [['sbx-moved'], [], []]);
  assert.deepEqual(seen, ['running 1/1', 'done 0/1'], 'told as it starts and as it goes over the sandbox');
  assert.deepEqual(await Node.drainStatus('node-1', conn), drained);
  const started = await Node.drain('node-1', { ...conn, wait: false });
  assert.equal(started.state, 'running', 'wait: false answers once it has started');
  await assert.rejects(Node.drainStatus('node-2', conn), NotFoundError);
  assert.equal((await Node.undrain('node-1', conn)).status, 'ready');
  await assert.rejects(Node.drain('no-such-node', conn), NotFoundError);
});
