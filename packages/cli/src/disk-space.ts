import { statfsSync } from 'node:fs';

/**
 * What a fresh data directory fills as `svc up` makes its templates, measured on the 2-core
 * machine (docs/quickstart.md, "Disk"): `base` about 2 GB (its 0.9 GB artifact in the store and
 * again on the node, and the first sandboxes' disks), `code-interpreter-v1` about 3 GB more.
 * The root filesystem tarballs are cached outside it, in /var/cache/svc.
 */
export const FRESH_DATA_DIR_BYTES = { base: 2 * 1024 ** 3, codeInterpreter: 3 * 1024 ** 3 };

/**
 * Why a fresh data directory cannot hold what `svc up` is about to make there, or undefined when
 * it can (or its filesystem cannot be asked: then the build says so if it runs out).
 */
export function dataDirShortOfSpace(dataDir: string, codeInterpreter: boolean, free = freeBytes(dataDir)): string | undefined {
  if (free === undefined) return undefined;
  const need = FRESH_DATA_DIR_BYTES.base + (codeInterpreter ? FRESH_DATA_DIR_BYTES.codeInterpreter : 0);
  if (free >= need) return undefined;
  const gb = (n: number) => (n / 1024 ** 3).toFixed(1);
  return `the data directory ${dataDir} has ${gb(free)} GB free; a fresh one needs about ${gb(need)} GB for its templates` +
    `${codeInterpreter ? ` (${gb(FRESH_DATA_DIR_BYTES.base)} GB with --no-code-interpreter)` : ''}: free some space or choose another with --data-dir`;
}

function freeBytes(dir: string): number | undefined {
  try {
    const s = statfsSync(dir);
    return s.bavail * s.bsize;
  } catch {
    // A filesystem statfs cannot read (rare): no check rather than a false refusal.
    return undefined;
  }
}
