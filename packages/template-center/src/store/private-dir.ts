import { chmod, mkdir } from 'node:fs/promises';

/**
 * Makes `dir` (and its missing parents) a directory only its owner reads: 0700, an existing one
 * too. The template center's scratch directories hold teams' layers, staging trees and images;
 * the local store's own directory is 0700, but with an S3 store they sat 0755 under a data
 * directory anyone on the host could walk (found by a helper reading the template center as an
 * attacker). A directory it may not change (another owner, a root-squashed mount) still works:
 * `warn` says so.
 */
export async function privateDir(dir: string, warn: (message: string) => void): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700).catch((err: Error) => warn(`${dir} could not be made 0700 (${err.message}): other users of the host may read what is in it`));
}
