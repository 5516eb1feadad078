import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SvcError } from '@svc/common';
import { NO_PLUGIN_FOR_DRIVER, UNKNOWN_DRIVER, VOLUME_CODES, type VolumePlugin, type VolumePluginConfig } from '@svc/contracts/volumes';
import { BinaryVolumePlugin } from './binary-plugin.ts';
import { VolumePluginRegistry, pluginFor } from './registry.ts';
import { RpcVolumePlugin } from './rpc-plugin.ts';

const local: VolumePluginConfig = { name: 'local', type: 'binary', binary_path: '/opt/svc/dist/svc-volume-local.mjs' };
const nfs: VolumePluginConfig = { name: 'nfs.v2', type: 'rpc', socket_path: '/run/svc/nfs.sock', timeout_ms: 5_000 };

describe('volume plugin registry', () => {
  it('looks plugins up by name; the first entry is the default driver', async () => {
    const registry = new VolumePluginRegistry([local, nfs]);
    assert.deepEqual(registry.names(), ['local', 'nfs.v2']);
    assert.equal(registry.defaultDriver(), 'local');
    assert.equal(registry.has('nfs.v2'), true);
    assert.equal(registry.has('s3'), false);
    assert.ok(registry.controller('local') instanceof BinaryVolumePlugin);
    assert.ok(registry.node('nfs.v2') instanceof RpcVolumePlugin);
    assert.equal(registry.node('nfs.v2').name, 'nfs.v2');
    assert.equal((registry.node('nfs.v2') as RpcVolumePlugin).timeoutMs, 5_000);
    await registry.close();
  });

  it('an empty configuration has no default driver', () => {
    const registry = new VolumePluginRegistry();
    assert.deepEqual(registry.names(), []);
    assert.equal(registry.defaultDriver(), undefined);
  });

  it('the master side answers an unknown driver with 400 and code 130400', () => {
    const registry = new VolumePluginRegistry([local, nfs]);
    assert.throws(
      () => registry.controller('s3'),
      (err: unknown) => {
        assert.ok(err instanceof SvcError);
        assert.equal(err.status, 400);
        assert.equal(err.code, VOLUME_CODES.unknownDriver);
        assert.equal(err.code, 130400);
        assert.ok(err.message.startsWith(`${UNKNOWN_DRIVER} "s3": `), err.message);
        assert.match(err.message, /the master's volume_plugins name "local", "nfs.v2"/);
        return true;
      },
    );
    assert.throws(() => new VolumePluginRegistry().controller('local'), /unknown driver "local": the master's volume_plugins is empty/);
  });

  it('the node side names the missing driver: no plugin registered for driver', () => {
    const registry = new VolumePluginRegistry([local]);
    assert.throws(
      () => registry.node('nfs'),
      (err: unknown) => {
        assert.ok(err instanceof SvcError);
        assert.equal(err.status, 400);
        assert.ok(err.message.startsWith(`${NO_PLUGIN_FOR_DRIVER} "nfs" on this node`), err.message);
        assert.match(err.message, /volume_plugins name "local"/);
        return true;
      },
    );
  });

  it('refuses a bad configuration, naming the entry', () => {
    const bad: [unknown[], RegExp][] = [
      [[{ ...local, name: '' }], /volume_plugins\[0\]: name must be a non-empty string$/],
      [[{ ...local, name: 'has space' }], /volume_plugins\[0\] \("has space"\): name must match/],
      [[{ ...local, name: 'x'.repeat(65) }], /name must match/],
      [[local, { ...nfs, name: 'local' }], /volume_plugins\[1\] \("local"\): name is used by an earlier entry$/],
      [[{ ...local, type: 'fuse' }], /volume_plugins\[0\] \("local"\): type must be "binary" or "rpc", not "fuse"$/],
      [[{ name: 'b', type: 'binary' }], /volume_plugins\[0\] \("b"\): binary_path is required for type binary$/],
      [[{ name: 'r', type: 'rpc', binary_path: '/x' }], /volume_plugins\[0\] \("r"\): socket_path is required for type rpc$/],
      [[{ ...nfs, timeout_ms: 0 }], /timeout_ms must be a positive integer, not 0/],
      [[{ ...nfs, timeout_ms: 1.5 }], /timeout_ms must be a positive integer/],
      [[{ ...nfs, timeout_ms: '100' }], /timeout_ms must be a positive integer, not "100"/],
      [[null], /volume_plugins\[0\]: must be an object$/],
    ];
    for (const [configs, pattern] of bad) {
      assert.throws(() => new VolumePluginRegistry(configs as VolumePluginConfig[]), pattern, JSON.stringify(configs));
    }
  });

  it('pluginFor makes the client of an entry type; a factory can stand in for it', async () => {
    assert.ok(pluginFor(local) instanceof BinaryVolumePlugin);
    assert.ok(pluginFor(nfs) instanceof RpcVolumePlugin);
    const closed: string[] = [];
    const fake = (c: VolumePluginConfig) =>
      ({ name: c.name, type: c.type, close: async () => void closed.push(c.name) }) as unknown as VolumePlugin;
    const registry = new VolumePluginRegistry([local, nfs], fake);
    await registry.close();
    assert.deepEqual(closed.sort(), ['local', 'nfs.v2']);
  });
});
