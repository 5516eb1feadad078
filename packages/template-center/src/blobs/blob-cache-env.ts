import type { SvcConfig } from '@svc/common';

const MiB = 1024 * 1024;

/**
 * The blob cache's place and size limit from the config (`template_center.blob_cache`, or
 * SVC_TEMPLATE_CENTER_BLOB_CACHE_{DIR,MB}): default 5 GiB under `fallbackDir`; 0 keeps nothing
 * once a build ends.
 */
export function blobCacheOf(c: SvcConfig['template_center']['blob_cache'], fallbackDir: string): { dir: string; maxBytes: number } {
  if (!Number.isFinite(c.max_mb) || c.max_mb < 0) throw new Error(`template_center.blob_cache.max_mb must be a number of MiB >= 0 (got ${c.max_mb})`);
  return { dir: c.dir.trim() || fallbackDir, maxBytes: Math.floor(c.max_mb * MiB) };
}
