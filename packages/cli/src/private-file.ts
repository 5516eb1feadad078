import { renameSync, rmSync, writeFileSync } from 'node:fs';

/**
 * Writes a file only its owner may read (0600), whatever was at its name: a new file renamed over
 * the old. writeFile's mode applies only when it creates the file, and it writes through a link,
 * so an endpoint.json an older version made 0644 kept its mode (and the admin key in it, for every
 * user of the host); a crash or a full disk mid-write leaves the old one whole. 'wx' refuses a
 * link at the temporary name too.
 */
export function writePrivateFile(file: string, text: string): void {
  const tmp = `${file}.tmp`;
  rmSync(tmp, { force: true });
  writeFileSync(tmp, text, { mode: 0o600, flag: 'wx' });
  renameSync(tmp, file);
}
