/** A hook of a volume plugin failed: the plugin said so, could not be run or reached, or answered out of protocol. */
export type VolumeHookName = 'create' | 'destroy' | 'attach' | 'detach';

export class VolumePluginError extends Error {
  /** The plugin's `volume_plugins[].name`. */
  readonly driver: string;
  readonly op: VolumeHookName;
  /**
   * Set when svc itself worded the reason and it quotes nothing the plugin said or printed (an
   * answer out of protocol, such as a token too short): an API caller may be told it. Otherwise
   * the reason may name the host's paths and goes to the log only (docs/volume-plugins.md, "Rules").
   */
  readonly forCaller?: string;

  /** `reason` completes "volume plugin <driver>: <op> failed: ". */
  constructor(driver: string, op: VolumeHookName, reason: string, opts: { forCaller?: boolean } = {}) {
    super(`volume plugin ${driver}: ${op} failed: ${reason}`);
    this.name = 'VolumePluginError';
    this.driver = driver;
    this.op = op;
    if (opts.forCaller) this.forCaller = reason;
  }
}
