/**
 * The configured volume plugins (`volume_plugins[]`, the same on the master and every node agent),
 * looked up by driver name: the master calls a plugin's controller hooks, the node agent its node
 * hooks. A bad entry is a configuration error at start.
 */
import { badRequest } from '@svc/common/errors';
import {
  NO_PLUGIN_FOR_DRIVER,
  UNKNOWN_DRIVER,
  VOLUME_CODES,
  type VolumeControllerHooks,
  type VolumeNodeHooks,
  type VolumePlugin,
  type VolumePluginConfig,
} from '@svc/contracts/volumes';
import { BinaryVolumePlugin } from './binary-plugin.ts';
import { RpcVolumePlugin } from './rpc-plugin.ts';

export const PLUGIN_NAME_PATTERN = /^[a-zA-Z0-9_.-]{1,64}$/;

/** The client of one (valid) `volume_plugins[]` entry. */
export function pluginFor(config: VolumePluginConfig): VolumePlugin {
  return config.type === 'rpc' ? new RpcVolumePlugin(config) : new BinaryVolumePlugin(config);
}

/** Throws an Error naming the entry and what is wrong with it. */
export function checkPluginConfigs(configs: readonly VolumePluginConfig[]): void {
  if (!Array.isArray(configs)) throw new Error('volume_plugins must be a list');
  const seen = new Set<string>();
  configs.forEach((c, i) => {
    const where = `volume_plugins[${i}]${typeof c?.name === 'string' && c.name !== '' ? ` (${JSON.stringify(c.name)})` : ''}`;
    const bad = (what: string) => new Error(`${where}: ${what}`);
    if (typeof c !== 'object' || c === null || Array.isArray(c)) throw bad('must be an object');
    if (typeof c.name !== 'string' || c.name === '') throw bad('name must be a non-empty string');
    if (!PLUGIN_NAME_PATTERN.test(c.name)) throw bad('name must match ^[a-zA-Z0-9_.-]{1,64}$');
    if (seen.has(c.name)) throw bad('name is used by an earlier entry');
    seen.add(c.name);
    if (c.type !== 'binary' && c.type !== 'rpc') throw bad(`type must be "binary" or "rpc", not ${JSON.stringify(c.type)}`);
    if (c.type === 'binary' && (typeof c.binary_path !== 'string' || c.binary_path === '')) throw bad('binary_path is required for type binary');
    if (c.type === 'rpc' && (typeof c.socket_path !== 'string' || c.socket_path === '')) throw bad('socket_path is required for type rpc');
    if (c.timeout_ms !== undefined && !(Number.isSafeInteger(c.timeout_ms) && c.timeout_ms > 0)) {
      throw bad(`timeout_ms must be a positive integer, not ${JSON.stringify(c.timeout_ms)}`);
    }
  });
}

export class VolumePluginRegistry {
  private readonly plugins = new Map<string, VolumePlugin>();

  /** `factory` replaces pluginFor (tests). */
  constructor(configs: readonly VolumePluginConfig[] = [], factory: (config: VolumePluginConfig) => VolumePlugin = pluginFor) {
    checkPluginConfigs(configs);
    for (const c of configs) this.plugins.set(c.name, factory(c));
  }

  /** The configured names, in configuration order. */
  names(): string[] {
    return [...this.plugins.keys()];
  }

  /** The driver of a volume created without one: the first entry. */
  defaultDriver(): string | undefined {
    return this.names()[0];
  }

  has(name: string): boolean {
    return this.plugins.has(name);
  }

  /** The master's side; a driver without an entry is a 400 with code 130400 (`unknown driver`). */
  controller(driver: string): VolumeControllerHooks & Pick<VolumePlugin, 'name' | 'type'> {
    const plugin = this.plugins.get(driver);
    if (!plugin) {
      throw badRequest(`${UNKNOWN_DRIVER} ${JSON.stringify(driver)}: ${this.listed("the master's")}`, VOLUME_CODES.unknownDriver);
    }
    return plugin;
  }

  /** The node agent's side; a driver without an entry is a 400 (`no plugin registered for driver`). */
  node(driver: string): VolumeNodeHooks & Pick<VolumePlugin, 'name' | 'type'> {
    const plugin = this.plugins.get(driver);
    if (!plugin) {
      throw badRequest(`${NO_PLUGIN_FOR_DRIVER} ${JSON.stringify(driver)} on this node: ${this.listed("this node agent's")}, and the names must match the master's`);
    }
    return plugin;
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.plugins.values()].map((p) => p.close()));
  }

  private listed(whose: string): string {
    const names = this.names();
    if (names.length === 0) return `${whose} volume_plugins is empty`;
    return `${whose} volume_plugins name ${names.map((n) => JSON.stringify(n)).join(', ')}`;
  }
}
