import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, describe, test } from 'node:test';
import {
  ApiError, ConflictError, InvalidArgumentError, NotFoundError, Sandbox, SandboxError, Volume, VolumeMount, VolumeNotFoundError,
} from './index.ts';
import { startFakeApi, type FakeApi } from './testing/fake-api.ts';
import { startFakeEnvd, type FakeEnvd } from './testing/fake-envd.ts';

let api: FakeApi;
let envd: FakeEnvd;
let conn: { apiUrl: string; apiKey: string; sandboxUrl: string };

before(async () => {
  api = await startFakeApi({ apiKey: 'k-vol', volumeDrivers: ['local', 'nfs'] });
  envd = await startFakeEnvd();
  conn = { apiUrl: api.url, apiKey: 'k-vol', sandboxUrl: envd.url };
});
after(async () => {
  await api.close();
  await envd.close();
});

const lastRequest = () => api.requests[api.requests.length - 1]!;

describe('Volume.create', () => {
  test('with a name: POST /volumes {name}, the key sent, a live Volume back', async () => {
    const vol = await Volume.create('data-1', conn);
    assert.deepEqual({ method: lastRequest().method, url: lastRequest().url, body: lastRequest().body }, { method: 'POST', url: '/volumes', body: { name: 'data-1' } });
    assert.equal(lastRequest().headers['x-api-key'], 'k-vol');
    assert.ok(vol instanceof Volume);
    assert.equal(vol.name, 'data-1');
    assert.match(vol.volumeId, /^[0-9a-f-]{36}$/);
    assert.match(vol.token, /^vtok-/);
    assert.equal(api.volumes.get(vol.volumeId)!.driver, 'local', 'no driver: the first plugin');
    assert.deepEqual(JSON.parse(JSON.stringify(vol)), { volumeId: vol.volumeId, name: 'data-1', token: vol.token }, 'the connection (and its key) stays out of JSON');
  });

  test('without a name (the server names it), with a driver, and the options-only form', async () => {
    const unnamed = await Volume.create(undefined, { ...conn, driver: 'nfs' });
    assert.deepEqual(lastRequest().body, { driver: 'nfs' });
    assert.ok(unnamed.volumeId);
    assert.equal(api.volumes.get(unnamed.volumeId)!.driver, 'nfs');
    const bare = await Volume.create(conn);
    assert.deepEqual(lastRequest().body, {});
    assert.notEqual(bare.volumeId, unnamed.volumeId);
    const named = await Volume.create({ ...conn, name: 'opts-form' });
    assert.deepEqual(lastRequest().body, { name: 'opts-form' });
    assert.equal(named.name, 'opts-form');
  });

  test('a bad name is an InvalidArgumentError and nothing is sent', async () => {
    const before = api.requests.length;
    for (const name of ['', 'has space', 'dot.ted', 'slash/x', 'ü', 'a'.repeat(129)]) {
      await assert.rejects(Volume.create(name, conn), (e: unknown) => e instanceof InvalidArgumentError && e.status === undefined, JSON.stringify(name));
    }
    await assert.rejects(Volume.create(undefined, { ...conn, driver: '' }), InvalidArgumentError);
    assert.equal(api.requests.length, before, 'no request for a name refused here');
    const long = await Volume.create('a'.repeat(128), conn);
    assert.equal(long.name.length, 128, '128 characters is the limit');
    assert.equal((await Volume.getInfo('a'.repeat(128), conn)).volumeId, long.volumeId, 'and such a name is a reference too');
    assert.equal((await Volume.create('Az09_-', conn)).name, 'Az09_-');
  });

  test('an unknown driver is an ApiError with code 130400; a name the team has is a 400 ApiError', async () => {
    await assert.rejects(Volume.create('x1', { ...conn, driver: 'ceph' }), (e: unknown) =>
      e instanceof ApiError && !(e instanceof InvalidArgumentError) && e.status === 400 && e.code === 130400 && /unknown driver/.test(e.message));
    await Volume.create('taken', conn);
    await assert.rejects(Volume.create('taken', conn), (e: unknown) => e instanceof ApiError && e.status === 400 && /already exists/.test(e.message));
  });
});

describe('Volume.list, getInfo, connect', () => {
  test('list answers {volumeId, name}, never the token', async () => {
    const vol = await Volume.create('listed', conn);
    const all = await Volume.list(conn);
    const mine = all.find((v) => v.volumeId === vol.volumeId);
    assert.deepEqual(mine, { volumeId: vol.volumeId, name: 'listed' });
    for (const v of all) assert.deepEqual(Object.keys(v).sort(), ['name', 'volumeId']);
    assert.equal(lastRequest().url, '/volumes');
  });

  test('getInfo and connect by id or by name, with the token (\'\' when the plugin gave none)', async () => {
    const vol = await Volume.create('infoed', conn);
    assert.deepEqual(await Volume.getInfo(vol.volumeId, conn), { volumeId: vol.volumeId, name: 'infoed', token: vol.token });
    assert.deepEqual(await Volume.getInfo('infoed', conn), { volumeId: vol.volumeId, name: 'infoed', token: vol.token });
    api.volumes.get(vol.volumeId)!.token = '';
    const again = await Volume.connect('infoed', conn);
    assert.ok(again instanceof Volume);
    assert.equal(again.volumeId, vol.volumeId);
    assert.equal(again.token, '');
  });

  test('a missing volume is a VolumeNotFoundError (a NotFoundError) from getInfo and connect', async () => {
    for (const call of [() => Volume.getInfo('no-such-volume', conn), () => Volume.connect('no-such-volume', conn)]) {
      await assert.rejects(call(), (e: unknown) => e instanceof VolumeNotFoundError && e instanceof NotFoundError && e.status === 404);
    }
    assert.equal(lastRequest().url, '/volumes/no-such-volume');
    await assert.rejects(Volume.getInfo('', conn), InvalidArgumentError);
    await assert.rejects(Volume.getInfo('a/b', conn), VolumeNotFoundError, 'the id is one path segment');
    assert.equal(lastRequest().url, '/volumes/a%2Fb');
  });
});

test('a platform without the volume routes: list and create are a NotFoundError, not a VolumeNotFoundError', async () => {
  const old = createServer((_req, res) => res.writeHead(404, { 'content-type': 'application/json' }).end('{"code":404,"message":"no route"}'));
  await new Promise<void>((r) => old.listen(0, '127.0.0.1', r));
  const apiUrl = `http://127.0.0.1:${(old.address() as { port: number }).port}`;
  try {
    for (const call of [() => Volume.list({ apiUrl }), () => Volume.create('x', { apiUrl })]) {
      await assert.rejects(call(), (e: unknown) => e instanceof NotFoundError && !(e instanceof VolumeNotFoundError) && e.message === 'no route');
    }
  } finally {
    old.close();
  }
});

describe('Volume.destroy', () => {
  test('true, then false when it is gone; delete is the same; the instance methods use its connection', async () => {
    const a = await Volume.create('gone-a', conn);
    assert.equal(await Volume.destroy(a.volumeId, conn), true);
    assert.equal(lastRequest().method, 'DELETE');
    assert.equal(await Volume.destroy(a.volumeId, conn), false);
    assert.equal(await Volume.delete(a.volumeId, conn), false);
    const b = await Volume.create('gone-b', conn);
    assert.equal(await Volume.delete('gone-b', conn), true, 'by name');
    const c = await Volume.create('gone-c', conn);
    assert.equal(await c.destroy(), true);
    assert.equal(lastRequest().headers['x-api-key'], 'k-vol');
    assert.equal(await c.delete(), false);
    assert.equal(api.volumes.has(b.volumeId) || api.volumes.has(c.volumeId), false);
  });

  test('a mounted volume: a ConflictError (an ApiError) with code 130409; free again once the sandbox is killed', async () => {
    const vol = await Volume.create('busy', conn);
    const sbx = await Sandbox.create('base', { ...conn, volumeMounts: { '/data': vol } });
    await assert.rejects(vol.destroy(), (e: unknown) =>
      e instanceof ConflictError && e instanceof ApiError && e instanceof SandboxError && e.status === 409 && e.code === 130409 && /mounted/.test(e.message));
    await assert.rejects(Volume.delete('busy', conn), (e: unknown) => e instanceof ApiError && e.code === 130409);
    await sbx.kill();
    assert.equal(await vol.destroy(), true);
  });
});

describe('volume mounts in Sandbox.create', () => {
  test('a Volume mounts by its id; VolumeMount sets readOnly; strings pass as they are', async () => {
    const vol = await Volume.create('mnt-a', conn);
    const vol2 = await Volume.create('mnt-b', conn);
    await Sandbox.create('base', { ...conn, volumeMounts: { '/data': vol, '/ro': VolumeMount(vol2, { readOnly: true }), '/x': 'name-or-id' } });
    assert.deepEqual(api.lastCreate()!.volumeMounts, [
      { name: vol.volumeId, path: '/data' },
      { name: vol2.volumeId, path: '/ro', readOnly: true },
      { name: 'name-or-id', path: '/x' },
    ]);
    assert.deepEqual(VolumeMount(vol), { name: vol.volumeId, readOnly: false });
    assert.deepEqual(VolumeMount('by-name', { readOnly: true }), { name: 'by-name', readOnly: true });
    assert.throws(() => VolumeMount(''), InvalidArgumentError);

    await Sandbox.create('base', {
      ...conn,
      volumeMounts: [{ path: '/a', ...VolumeMount(vol) }, { path: '/b', ...VolumeMount(vol2, { readOnly: true }) }, { name: 'plain', path: '/c' }],
    });
    assert.deepEqual(api.lastCreate()!.volumeMounts, [
      { name: vol.volumeId, path: '/a' },
      { name: vol2.volumeId, path: '/b', readOnly: true },
      { name: 'plain', path: '/c' },
    ]);
  });

  test('checked before sending: absolute paths, one mount per volume, a target that names a volume', async () => {
    const vol = await Volume.create('mnt-c', conn);
    const before = api.requests.length;
    const bad: unknown[] = [
      { data: vol },
      { '/a': vol, '/b': VolumeMount(vol, { readOnly: true }) },
      { '/a': vol, '/b': vol.volumeId },
      [{ name: 'x', path: '/a' }, { name: 'x', path: '/b' }],
      [{ name: 'x' }],
      { '/a': { readOnly: true } },
      { '/a': 42 },
      { '/a': null },
      { '/a': '' },
    ];
    for (const volumeMounts of bad) {
      await assert.rejects(
        Sandbox.create('base', { ...conn, volumeMounts: volumeMounts as never }),
        InvalidArgumentError,
        JSON.stringify(volumeMounts, (_k, v: unknown) => (v instanceof Volume ? `Volume(${v.volumeId})` : v)),
      );
    }
    assert.equal(api.requests.length, before);
  });
});
