const MiB = 1024 * 1024;
export const DEFAULT_BLOB_CACHE_MB = 5 * 1024;

/**
 * The blob cache's size limit from SVC_TEMPLATE_CENTER_BLOB_CACHE_MB (default 5 GiB; 0 keeps
 * nothing once a build ends). Its place: SVC_TEMPLATE_CENTER_BLOB_CACHE_DIR, else `fallbackDir`.
 */
export function blobCacheFromEnv(env: NodeJS.ProcessEnv, fallbackDir: string): { dir: string; maxBytes: number } {
  const raw = env.SVC_TEMPLATE_CENTER_BLOB_CACHE_MB?.trim();
  const mb = raw ? Number(raw) : DEFAULT_BLOB_CACHE_MB;
  if (!Number.isFinite(mb) || mb < 0) throw new Error(`SVC_TEMPLATE_CENTER_BLOB_CACHE_MB must be a number of MiB >= 0 (got ${JSON.stringify(raw)})`);
  return { dir: env.SVC_TEMPLATE_CENTER_BLOB_CACHE_DIR?.trim() || fallbackDir, maxBytes: Math.floor(mb * MiB) };
}
