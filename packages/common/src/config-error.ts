/** A configuration problem; its message is one line that names the key. */
export class ConfigError extends Error {
  constructor(readonly key: string, problem: string) {
    super(`configuration error: ${key}: ${problem}`);
    this.name = 'ConfigError';
  }
}
