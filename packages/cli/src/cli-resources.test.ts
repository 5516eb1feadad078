/**
 * `svc tpl`, `svc node` and `svc volume` run as a child process against the fake API: builds
 * waited on with their phases, tables, JSON, exit codes and error lines. The fixture is
 * test-support/cli-fixture.ts.
 */
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ErrorCodes } from '@svc/common';
import { api, json, run, startCliFixture, stopCliFixture } from './test-support/cli-fixture.ts';

before(startCliFixture);
after(stopCliFixture);

describe('svc tpl', () => {
  test('create waits, reporting phases, and prints the template', async () => {
    const r = await run(['tpl', 'create', '--image', 'reg.local/app:1', '--alias', 'app-1', '--registry-user', 'u', '--registry-password', 'p', '--insecure-registry', '--platform', 'linux/arm64', '--no-svc-ca',
      '--start-cmd', 'node server.js', '--ready-cmd', 'curl -sf localhost:3000']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(api.requests.findLast((q) => q.method === 'POST' && q.url === '/svc/template')!.body, {
      image: 'reg.local/app:1', alias: 'app-1', registry_auth: { username: 'u', password: 'p' }, insecure_registry: true,
      platform: 'linux/arm64', with_svc_ca: false, start_cmd: 'node server.js', ready_cmd: 'curl -sf localhost:3000',
    });
    assert.equal((await run(['tpl', 'create', '--image', 'x', '--ready-cmd', 'true'])).code, 2, '--ready-cmd without --start-cmd is a usage error');
    assert.match(r.stderr, /pulling \(.* in 2 layers\)/);
    assert.match(r.stderr, /built/);
    assert.match(r.stdout, /^status:\s+ready$/m);
    assert.match(r.stdout, /^alias:\s+app-1$/m);
  });

  test('create --json, --no-wait, local paths made absolute', async () => {
    const done = json(await run(['tpl', 'create', '--oci-layout', 'some/layout', '--json']));
    assert.equal(done.job.status, 'BUILT');
    assert.equal(done.template.status, 'ready');
    const sent = api.requests.findLast((q) => q.url === '/svc/template' && q.method === 'POST')!.body as { oci_layout: string };
    assert.equal(sent.oci_layout, resolve(import.meta.dirname, '../../..', 'some/layout'));
    const queued = json(await run(['tpl', 'create', '--rootfs-tar', '/tmp/rootfs.tar', '--no-wait', '--json']));
    assert.equal(queued.status, 'PENDING');
    const status = json(await run(['tpl', 'status', queued.jobId, '--json']));
    assert.equal(status.jobId, queued.jobId);
    assert.equal(status.progress.layers.length, 2);
    const human = await run(['tpl', 'status', queued.jobId]);
    assert.match(human.stdout, /^LAYER\s+PULLED\s+SIZE$/m);
  });

  test('a failed build exits 1 with the reason', async () => {
    const r = await run(['tpl', 'create', '--archive', '/tmp/broken.tar']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^svc: template build job-\S+ failed: image has no root filesystem$/m);
  });

  test('create needs exactly one source and paired registry credentials', async () => {
    for (const args of [
      ['tpl', 'create'],
      ['tpl', 'create', '--image', 'a', '--archive', 'b'],
      ['tpl', 'create', '--image', 'a', '--registry-user', 'u'],
      ['tpl', 'create', '--image', 'a', '--platform', 'amd64'],
    ]) {
      const r = await run(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /^svc: /);
    }
  });

  test('list, info, alias, redo, merge, delete', async () => {
    const t = json(await run(['tpl', 'create', '--image', 'reg.local/b:1', '--json'])).template;
    const table = await run(['tpl', 'list']);
    assert.match(table.stdout, /^ID\s+ALIAS\s+STATUS\s+SOURCE\s+CREATED$/m);
    assert.match(table.stdout, new RegExp(`^${t.templateId}\\s+-\\s+ready\\s+reg.local/b:1`, 'm'));
    assert.equal(json(await run(['tpl', 'alias', t.templateId, 'bee', '--json'])).alias, 'bee');
    assert.equal(json(await run(['tpl', 'info', 'bee', '--json'])).templateId, t.templateId);
    assert.match((await run(['tpl', 'alias', t.templateId])).stdout, /has no alias/);
    const redo = json(await run(['tpl', 'redo', t.templateId, '--json']));
    assert.equal(redo.job.kind, 'REDO');
    assert.equal(json(await run(['tpl', 'merge', t.templateId, '--json'])).templateId, t.templateId);
    assert.deepEqual(json(await run(['tpl', 'delete', t.templateId, '--json'])), { templateId: t.templateId, deleted: true });
    const missing = await run(['tpl', 'delete', t.templateId]);
    assert.equal(missing.code, 1);
    assert.equal(missing.stderr, `svc: template ${t.templateId} not found\n`);
    const info = await run(['tpl', 'info', t.templateId]);
    assert.match(info.stderr, new RegExp(`\\(HTTP 404, code ${ErrorCodes.templateNotFound}\\)`));
  });
});

describe('svc node', () => {
  test('list, label, unlabel', async () => {
    const table = await run(['node', 'list']);
    assert.match(table.stdout, /^ID\s+STATUS\s+RUNTIMES\s+ADDRESS\s+RUNNING\s+PAUSED\s+MEMORY MB \(USED\/CAPACITY\)\s+LABELS$/m);
    assert.match(table.stdout, /^node-1\s+ready\s+gvisor/m);
    const labeled = json(await run(['node', 'label', 'node-1', 'disk=ssd', 'svc.dev/tier=gold', '--json']));
    assert.equal(labeled.labels.disk, 'ssd');
    assert.equal(labeled.labels['svc.dev/tier'], 'gold');
    const unlabeled = json(await run(['node', 'unlabel', 'node-1', 'disk', '--json']));
    assert.equal(unlabeled.labels.disk, undefined);
    const missing = await run(['node', 'label', 'node-9', 'a=b']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /node not found \(HTTP 404\)/);
    assert.equal((await run(['node', 'label', 'node-1', 'nokey'])).code, 2);
  });

  test('drain waits for the drain and tells each sandbox on stderr; --no-wait, drain-status, undrain', async () => {
    const drained = await run(['node', 'drain', 'node-1']);
    assert.equal(drained.code, 0, drained.stderr);
    assert.equal(drained.stderr, 'draining node-1: 1 sandbox(es)\n  moved sbx-moved\n');
    assert.equal(drained.stdout, 'node-1: draining; drain done, 1 of 1 gone over; moved 1, stored 0, failed 0\n');
    const started = json(await run(['node', 'drain', 'node-1', '--no-wait', '--json']));
    assert.equal(started.state, 'running');
    assert.equal(json(await run(['node', 'drain-status', 'node-1', '--json'])).state, 'done');
    assert.equal(json(await run(['node', 'undrain', 'node-1', '--json'])).status, 'ready');
    const missing = await run(['node', 'drain', 'node-9']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /node not found \(HTTP 404\)/);
  });
});

describe('svc volume', () => {
  test('create prints id, name and token; list; info by id or name; --json everywhere', async () => {
    const made = json(await run(['volume', 'create', 'cli-vol', '--json']));
    assert.deepEqual(Object.keys(made).sort(), ['name', 'token', 'volumeId']);
    assert.equal(made.name, 'cli-vol');
    assert.deepEqual(api.requests[api.requests.length - 1].body, { name: 'cli-vol' });
    const human = await run(['volume', 'create', '--driver', 'local']);
    assert.equal(human.code, 0, human.stderr);
    assert.deepEqual(api.requests[api.requests.length - 1].body, { driver: 'local' });
    const [, id] = /^id:\s+(\S+)$/m.exec(human.stdout)!;
    assert.match(human.stdout, new RegExp(`^name:\\s+${id}$`, 'm'), 'an unnamed volume is named by its id');
    assert.match(human.stdout, /^token:\s+vtok-/m);

    const listed = json(await run(['volume', 'list', '--json']));
    assert.deepEqual(listed.find((v: { volumeId: string }) => v.volumeId === made.volumeId), { volumeId: made.volumeId, name: 'cli-vol' });
    const table = await run(['volume', 'ls']);
    assert.match(table.stdout, /^ID\s+NAME$/m);
    assert.match(table.stdout, new RegExp(`^${made.volumeId}\\s+cli-vol$`, 'm'));
    assert.deepEqual(json(await run(['volume', 'info', 'cli-vol', '--json'])), made);
    assert.match((await run(['volume', 'info', made.volumeId])).stdout, new RegExp(`^token:\\s+${made.token}$`, 'm'));
  });

  test('refusals exit 1 with one line: a bad name (nothing sent), an unknown driver, a missing volume, a mounted one', async () => {
    const sent = api.requests.length;
    const bad = await run(['volume', 'create', 'bad name']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^svc: the volume name "bad name" must match .*\n$/);
    assert.equal(api.requests.length, sent);
    const driver = await run(['volume', 'create', 'v2', '--driver', 'ceph']);
    assert.equal(driver.code, 1);
    assert.equal(driver.stderr, 'svc: unknown driver "ceph" (HTTP 400, code 130400)\n');
    const missing = await run(['volume', 'info', 'nope']);
    assert.equal(missing.code, 1);
    assert.equal(missing.stderr, 'svc: volume nope not found (HTTP 404)\n');

    const vol = json(await run(['volume', 'create', 'in-use', '--json']));
    const sbx = json(await run(['sandbox', 'create', '--json']));
    api.sandboxes.get(sbx.sandboxId)!.volumeMounts.push({ name: vol.volumeId, path: '/data' });
    const busy = await run(['volume', 'delete', 'in-use']);
    assert.equal(busy.code, 1);
    assert.equal(busy.stderr, 'svc: volume in-use is mounted by a sandbox (HTTP 409, code 130409)\n');
    json(await run(['sandbox', 'kill', sbx.sandboxId, '--json']));
    assert.deepEqual(json(await run(['volume', 'delete', 'in-use', '--json'])), { volume: 'in-use', deleted: true });
    const gone = await run(['volume', 'rm', vol.volumeId]);
    assert.equal(gone.code, 1);
    assert.equal(gone.stderr, `svc: volume ${vol.volumeId} not found\n`);
    assert.equal((await run(['volume', 'info'])).code, 2, 'a usage error');
  });
});
