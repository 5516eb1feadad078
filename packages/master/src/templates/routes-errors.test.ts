/**
 * The template routes' errors: an unknown id or alias (404 code 130404), a missing template id
 * (400 ErrTemplateIDRequired), bad source, platform and option combinations (400 with a clear
 * message), and store failures (database errors on the wire).
 * Every routes-*.test.ts file here adds its cases to the suite "template routes", on every engine.
 */
import assert from 'node:assert/strict';
import { onEveryEngine } from './testing/engines.ts';
import { IMAGE } from './testing/routes-fixtures.ts';

onEveryEngine('template routes', {
  'unknown id or alias: 404 code 130404; missing template id: 400 ErrTemplateIDRequired': async (h) => {
    for (const [method, path, body] of [
      ['GET', '/svc/template/tpl-nope', undefined],
      ['GET', '/svc/template/no-such-alias', undefined],
      ['DELETE', '/svc/template/tpl-nope', undefined],
      ['PUT', '/svc/template/tpl-nope/alias', { alias: 'x' }],
      ['POST', '/svc/template/redo', { template_id: 'tpl-nope' }],
      ['POST', '/svc/template/migrate', { template_id: 'nope' }],
      ['GET', '/templates/tpl-nope', undefined],
      ['GET', '/templates/aliases/nope', undefined],
    ] as const) {
      const r = await h.call(method, path, body);
      assert.equal(r.status, 404, `${method} ${path}`);
      assert.equal(r.body.code, 130404, `${method} ${path}`);
      assert.match(r.body.message, /template .* not found/);
    }
    // E2B's DELETE /templates/{id} also deletes snapshots; the official SDK reads only code 404 there.
    const gone = await h.call('DELETE', '/templates/tpl-nope');
    assert.deepEqual([gone.status, gone.body.code], [404, 404]);
    assert.match(gone.body.message, /no template or snapshot tpl-nope/);
    for (const path of ['/svc/template/redo', '/svc/template/migrate']) {
      for (const body of [{}, { template_id: '' }, undefined]) {
        const r = await h.call('POST', path, body);
        assert.equal(r.status, 400, `${path} ${JSON.stringify(body)}`);
        assert.equal(r.body.code, 130400);
        assert.match(r.body.message, /^ErrTemplateIDRequired/);
      }
    }
    assert.equal((await h.call('GET', '/svc/template/build/nope/status')).status, 404);
    assert.equal((await h.call('GET', '/svc/template/from-image')).status, 400);
    const resolve = await h.module.resolver.resolveForCreate('nope').catch((e) => e);
    assert.equal(resolve.status, 404);
    assert.equal(resolve.code, 130404);
    assert.deepEqual(await h.module.resolver.idsFor('tpl-deleted'), ['tpl-deleted']);
  },

  'bad source, platform and option combinations are 400 with a clear message': async (h) => {
    const cases: Array<[Record<string, unknown> | string, RegExp]> = [
      [{}, /exactly one source is required/],
      [{ image: 'a:1', rootfs_tar: '/x.tar' }, /exactly one source .*got image and rootfs_tar/],
      [{ rootfs_tar: 'relative.tar' }, /absolute path/],
      [{ rootfs_tar: '/r.tar', platform: 'linux/amd64' }, /platform applies only to image and oci_layout/],
      [{ docker_archive: '/d.tar', registry_auth: { username: 'u', password: 'p' } }, /registry_auth applies only to an image source/],
      [{ oci_layout: '/l', insecure_registry: true }, /insecure_registry applies only to an image source/],
      [{ image: 'a:1', platform: 'amd64' }, /os\/arch\[\/variant\]/],
      [{ image: 'a:1', platform: 'windows/amd64' }, /os must be linux/],
      [{ image: 'a:1', platform: 'linux/m68k' }, /unknown architecture/],
      [{ image: 'a:1', registry_auth: { username: 'u' } }, /^registry_auth\.password is required$/],
      [{ image: 'a:1', with_cube_ca: true, with_svc_ca: false }, /disagree/],
      [{ image: 'a:1', disk_size_mb: 65_537 }, /^disk_size_mb 65537 is more than svclet_conf\.max_disk_size_mb \(65536\)$/],
      [{ image: 'a:1', cpu_count: 0 }, /^cpu_count must be >= 1$/],
      [{ image: 'a:1', memory_mb: 1.5 }, /^memory_mb must be integer or null$/],
      [{ image: 'a:1', memoryMB: 512 }, /^memoryMB is not a known field$/],
      [{ image: 7 }, /^image must be string or null$/],
      [{ image: 'has space:1' }, /without spaces/],
      [{ image: 'a:1', ready_cmd: 'true' }, /ready_cmd needs a start_cmd/],
      [{ image: 'a:1', start_cmd: 7 }, /^start_cmd must be string or null$/],
      [{ image: 'a:1', runtime: 'docker' }, /^runtime must be one of gvisor, microvm/],
      ['[1,2]', /^request body must be object$/],
    ];
    for (const [body, message] of cases) {
      const r = typeof body === 'string'
        ? await fetch(`${h.url}/svc/template`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(async (x) => ({ status: x.status, body: await x.json() }))
        : await h.call('POST', '/svc/template', body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.code, 130400);
      assert.match(r.body.message, message, JSON.stringify(body));
    }
    const malformed = await fetch(`${h.url}/svc/template`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{bad' });
    assert.equal(malformed.status, 400);
    assert.equal(h.tc.builds.length, 0);
    // The accepted spellings.
    assert.equal((await h.call('POST', '/svc/template/from-image', { ...IMAGE, platform: 'linux/arm64/v8', with_svc_ca: false })).status, 202);
    assert.deepEqual(h.tc.lastBuild().source, { kind: 'registry', ref: IMAGE.image, platform: { os: 'linux', architecture: 'arm64', variant: 'v8' } });
    assert.equal(h.tc.lastBuild().withSvcCa, false);
    assert.equal((await h.call('POST', '/svc/template', { oci_layout: '/srv/layout', insecure_registry: undefined })).status, 202);
    assert.equal((await h.call('POST', '/svc/template', { docker_archive: '/srv/image.tar' })).status, 202);
    assert.deepEqual(h.tc.lastBuild().source, { kind: 'docker-archive', path: '/srv/image.tar' });
    // The host's files are the operator's: a team's call is refused at the master too, not only by the gateway.
    const builds = h.tc.builds.length;
    for (const body of [{ oci_layout: '/srv/layout' }, { docker_archive: '/etc/shadow' }, { rootfs_tar: '/dev/zero' }]) {
      const r = await h.call('POST', '/templates', body, { 'x-svc-team': 'team-a' });
      assert.equal(r.status, 403, JSON.stringify(r.body));
      assert.match(r.body.message, /are the operator's/);
    }
    assert.equal(h.tc.builds.length, builds);
    assert.equal((await h.call('POST', '/svc/template', { image: 'localhost:5000/a:1', insecure_registry: true, registry_auth: { username: 'u', password: 'p' } })).status, 202);
    assert.equal((h.tc.lastBuild().source as { insecure?: boolean }).insecure, true);
  },

  'store failures are database errors on the wire': async (h) => {
    await h.kysely.schema.dropTable('t_svc_template').execute();
    const r = await h.call('GET', '/svc/template');
    assert.equal(r.status, 500);
    assert.match(r.body.message, /^database error: ErrTemplateStoreNotInitialized/);
  },
});
