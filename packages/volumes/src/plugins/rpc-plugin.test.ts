import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Server, ServerCredentials, type UntypedHandleCall } from '@grpc/grpc-js';
import { VOLUME_NAMESPACE } from '@svc/contracts/volumes';
import { LocalVolumes } from '../local-plugin/local-volumes.ts';
import { mountCount } from '../local-plugin/mounts.ts';
import { startLocalRpcServer, type LocalRpcServer } from '../local-plugin/rpc-server.ts';
import { removeTempDir, tempDir } from '../testing/host.ts';
import { VolumePluginError } from './errors.ts';
import { volumeProto } from './proto.ts';
import { RpcVolumePlugin, grpcTarget } from './rpc-plugin.ts';

const failure = (p: Promise<unknown>) =>
  p.then(
    () => assert.fail('the hook succeeded'),
    (e: unknown) => {
      assert.ok(e instanceof VolumePluginError, `a VolumePluginError, not ${String(e)}`);
      return e;
    },
  );

/** A gRPC server of both services with the handlers given. */
async function serve(socket: string, handlers: Record<'Create' | 'Destroy' | 'Attach' | 'Detach', UntypedHandleCall>): Promise<Server> {
  const server = new Server();
  server.addService(volumeProto().controller, { Create: handlers.Create, Destroy: handlers.Destroy });
  server.addService(volumeProto().node, { Attach: handlers.Attach, Detach: handlers.Detach });
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix:${socket}`, ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())),
  );
  return server;
}

describe('rpc volume plugin against the local plugin served over a Unix socket', () => {
  let dir: string;
  let socket: string;
  let base: string;
  let server: LocalRpcServer;
  let plugin: RpcVolumePlugin;
  const volumes = () => new LocalVolumes({ root: join(dir, 'data') });

  before(async () => {
    dir = tempDir('rpc');
    socket = join(dir, 'local.sock');
    base = join(dir, 'volume');
    server = await startLocalRpcServer({ socketPath: socket, volumes: volumes() });
    plugin = new RpcVolumePlugin({ name: 'local', type: 'rpc', socket_path: socket, timeout_ms: 5_000 });
  });

  after(async () => {
    await plugin?.close();
    await server?.close();
    removeTempDir(dir);
  });

  it('serves on a socket only root may use', () => {
    assert.ok(statSync(socket).isSocket());
    assert.equal(statSync(socket).mode & 0o777, 0o600);
  });

  it('create, attach, detach and destroy a volume through all four hooks', async () => {
    const created = await plugin.create({ volumeId: 'vol-a', name: 'alpha' });
    assert.match(created.token, /^svcvol_[A-Za-z0-9_-]{43}$/);
    assert.equal(created.privateData, '');
    assert.deepEqual(await plugin.create({ volumeId: 'vol-a', name: 'alpha' }), created, 'a repeated create answers the same');

    const attachInput = { sandboxId: 'sb1', namespace: VOLUME_NAMESPACE, volumeId: 'vol-a', refCount: 0, volumeBaseDir: base, privateData: '' };
    const attached = await plugin.attach(attachInput);
    assert.equal(attached.hostPath, join(base, 'local-vol-a'));
    assert.deepEqual(attached.metadata, { data_dir: join(dir, 'data', 'vol-a'), host_path: attached.hostPath });
    assert.equal(await mountCount(attached.hostPath), 1);
    writeFileSync(join(attached.hostPath, 'hello.txt'), 'hi');
    assert.equal(readFileSync(join(dir, 'data', 'vol-a', 'hello.txt'), 'utf8'), 'hi');

    assert.deepEqual(await plugin.attach({ ...attachInput, sandboxId: 'sb2', refCount: 1 }), attached);
    assert.equal(await mountCount(attached.hostPath), 1, 'no second mount');

    const detachInput = { sandboxId: 'sb2', namespace: VOLUME_NAMESPACE, volumeId: 'vol-a', refCount: 1, metadata: attached.metadata };
    await plugin.detach(detachInput);
    assert.equal(await mountCount(attached.hostPath), 1, 'another holder is left');
    await plugin.detach({ ...detachInput, sandboxId: 'sb1', refCount: 0 });
    assert.equal(await mountCount(attached.hostPath), 0);
    assert.equal(existsSync(attached.hostPath), false);
    assert.equal(readFileSync(join(dir, 'data', 'vol-a', 'hello.txt'), 'utf8'), 'hi', 'detach keeps the data');

    await plugin.destroy({ volumeId: 'vol-a' });
    assert.equal(existsSync(join(dir, 'data', 'vol-a')), false);
    await plugin.destroy({ volumeId: 'vol-a' });
  });

  it('takes the socket as unix:PATH as well', async () => {
    const prefixed = new RpcVolumePlugin({ name: 'local', type: 'rpc', socket_path: `unix:${socket}` });
    try {
      assert.match((await prefixed.create({ volumeId: 'vol-b', name: 'b' })).token, /^svcvol_/);
      await prefixed.destroy({ volumeId: 'vol-b' });
    } finally {
      await prefixed.close();
    }
  });

  it('maps a gRPC error status to a VolumePluginError with its details', async () => {
    const attachInput = { sandboxId: 'sb1', namespace: VOLUME_NAMESPACE, volumeId: 'no-data', refCount: 0, volumeBaseDir: base, privateData: '' };
    const missing = await failure(plugin.attach(attachInput));
    assert.equal(missing.driver, 'local');
    assert.equal(missing.op, 'attach');
    assert.match(missing.message, /^volume plugin local: attach failed: gRPC NOT_FOUND: volume no-data has no data on this host/);
    const invalid = await failure(plugin.create({ volumeId: '../etc', name: 'x' }));
    assert.match(invalid.message, /^volume plugin local: create failed: gRPC INVALID_ARGUMENT: volume id "\.\.\/etc" must match/);
  });

  it('checks answers as for binary plugins', async () => {
    const fakeSocket = join(dir, 'fake.sock');
    const answer = (value: object) => (_call: unknown, callback: (err: null, value: object) => void) => callback(null, value);
    const fake = await serve(fakeSocket, {
      Create: answer({ token: 't', private_data: 'x'.repeat(1025) }),
      Destroy: answer({}),
      Attach: answer({ host_path: 'etc', metadata: {} }),
      Detach: answer({}),
    });
    const liar = new RpcVolumePlugin({ name: 'liar', type: 'rpc', socket_path: fakeSocket });
    try {
      const created = await failure(liar.create({ volumeId: 'v', name: 'n' }));
      assert.match(created.message, /^volume plugin liar: create failed: answered private_data of 1025 bytes; at most 1024$/);
      const attached = await failure(liar.attach({ sandboxId: 's', namespace: 'svc', volumeId: 'v', refCount: 0, volumeBaseDir: base, privateData: '' }));
      assert.match(attached.message, /answered host_path "etc", which is not absolute/);
      await liar.destroy({ volumeId: 'v' });
    } finally {
      await liar.close();
      fake.forceShutdown();
    }
  });

  it('an unreachable socket fails within the timeout', async () => {
    const nobody = new RpcVolumePlugin({ name: 'gone', type: 'rpc', socket_path: join(dir, 'nobody.sock'), timeout_ms: 1_000 });
    try {
      const started = Date.now();
      const err = await failure(nobody.destroy({ volumeId: 'v' }));
      assert.ok(Date.now() - started < 2_000, `failed after ${Date.now() - started} ms`);
      assert.match(err.message, /^volume plugin gone: destroy failed: (cannot reach unix:.*nobody\.sock \(gRPC UNAVAILABLE\)|did not answer within 1000 ms)/);
    } finally {
      await nobody.close();
    }
  });

  it('a service that does not answer fails at the deadline', async () => {
    const silentSocket = join(dir, 'silent.sock');
    const never = () => undefined;
    const silent = await serve(silentSocket, { Create: never, Destroy: never, Attach: never, Detach: never });
    const slow = new RpcVolumePlugin({ name: 'slow', type: 'rpc', socket_path: silentSocket, timeout_ms: 300 });
    try {
      const started = Date.now();
      const err = await failure(slow.detach({ sandboxId: 's', namespace: 'svc', volumeId: 'v', refCount: 0, metadata: { a: 'b' } }));
      const took = Date.now() - started;
      assert.ok(took >= 250 && took < 1_500, `failed after ${took} ms`);
      assert.equal(err.message, `volume plugin slow: detach failed: did not answer within 300 ms (gRPC DEADLINE_EXCEEDED at unix:${silentSocket})`);
    } finally {
      await slow.close();
      silent.forceShutdown();
    }
  });

  it('a stale socket file is replaced; close removes the socket', async () => {
    const stale = join(dir, 'stale.sock');
    // a server killed without cleaning up leaves its socket file behind
    const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(stale)}, () => console.log('up'))`]);
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));
    assert.ok(statSync(stale).isSocket());
    const again = await startLocalRpcServer({ socketPath: stale, volumes: volumes() });
    const client = new RpcVolumePlugin({ name: 'local', type: 'rpc', socket_path: stale });
    try {
      await client.destroy({ volumeId: 'whatever' });
    } finally {
      await client.close();
      await again.close();
    }
    assert.equal(existsSync(stale), false);
    const notSocket = join(dir, 'regular-file');
    writeFileSync(notSocket, 'keep me');
    await assert.rejects(startLocalRpcServer({ socketPath: notSocket, volumes: volumes() }), /is not a socket/);
    assert.equal(readFileSync(notSocket, 'utf8'), 'keep me');
  });
});

describe('grpcTarget', () => {
  it('reads socket_path as a Unix socket, unix:PATH or host:port', () => {
    assert.equal(grpcTarget('/run/svc/x.sock'), 'unix:/run/svc/x.sock');
    assert.equal(grpcTarget('unix:/run/svc/x.sock'), 'unix:/run/svc/x.sock');
    assert.equal(grpcTarget('run/x.sock'), 'unix:run/x.sock');
    assert.equal(grpcTarget('127.0.0.1:7070'), '127.0.0.1:7070');
    assert.equal(grpcTarget('plugins.internal:7070'), 'plugins.internal:7070');
    assert.equal(grpcTarget('[::1]:7070'), '[::1]:7070');
  });
});
