import { lstatSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';

export class UnsafePathError extends Error {}

/**
 * Splits a path from an archive into clean components relative to the root.
 * "./a//b/" → ["a","b"]; the root itself → []. A ".." component is refused rather than clamped:
 * no legitimate image needs one, and a layer that carries one is broken or hostile.
 */
export function entryComponents(name: string): string[] {
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw new UnsafePathError(`entry escapes the root: ${name}`);
  return parts;
}

const MAX_LINKS = 255;

/**
 * Resolves `components` under `root` the way the image would see them at run time: symbolic
 * links are followed, but always inside `root` (an absolute target restarts at `root`, ".." stops
 * at `root`). The last component is followed only with `followLast`. Components that do not exist
 * are kept as they are. The result is a host path that never leaves `root`.
 */
export function resolveInRoot(root: string, components: string[], followLast = false): string {
  let pending = [...components];
  let resolved: string[] = [];
  let linksFollowed = 0;
  while (pending.length > 0) {
    const c = pending.shift()!;
    if (c === '' || c === '.') continue;
    if (c === '..') { resolved.pop(); continue; }
    const isLast = pending.length === 0;
    const candidate = join(root, ...resolved, c);
    if (isLast && !followLast) { resolved.push(c); break; }
    let isLink = false;
    try { isLink = lstatSync(candidate).isSymbolicLink(); } catch { /* missing: keep lexically */ }
    if (!isLink) { resolved.push(c); continue; }
    if (++linksFollowed > MAX_LINKS) throw new UnsafePathError(`too many levels of symbolic links: /${components.join('/')}`);
    const target = readlinkSync(candidate);
    if (target.startsWith('/')) resolved = [];
    pending = [...target.split('/'), ...pending];
  }
  return join(root, ...resolved);
}

/** Host path for an absolute path inside the image, following links inside the root. */
export function pathInRoot(root: string, imagePath: string, followLast = true): string {
  return resolveInRoot(root, imagePath.split('/').filter(Boolean), followLast);
}
