/** A hook of a volume plugin failed: the plugin said so, could not be run or reached, or answered out of protocol. */
export type VolumeHookName = 'create' | 'destroy' | 'attach' | 'detach';

export class VolumePluginError extends Error {
  /** The plugin's `volume_plugins[].name`. */
  readonly driver: string;
  readonly op: VolumeHookName;

  /** `reason` completes "volume plugin <driver>: <op> failed: ". */
  constructor(driver: string, op: VolumeHookName, reason: string) {
    super(`volume plugin ${driver}: ${op} failed: ${reason}`);
    this.name = 'VolumePluginError';
    this.driver = driver;
    this.op = op;
  }
}
