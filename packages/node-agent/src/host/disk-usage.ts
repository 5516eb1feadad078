import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/** Allocated bytes under a directory tree (like du), cached briefly since a walk is not free. */
export class DiskUsage {
  private readonly cache = new Map<string, { bytes: number; at: number }>();

  constructor(private readonly maxAgeMs = 5_000) {}

  async of(dir: string): Promise<number> {
    const hit = this.cache.get(dir);
    if (hit && Date.now() - hit.at < this.maxAgeMs) return hit.bytes;
    const bytes = await walk(dir);
    this.cache.set(dir, { bytes, at: Date.now() });
    if (this.cache.size > 10_000) this.cache.clear();
    return bytes;
  }
}

async function walk(dir: string): Promise<number> {
  let total = 0;
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => { /* removed while walked (a running sandbox's files come and go): holds nothing now */ return []; });
  for (const e of entries) {
    const p = join(dir, e.name);
    if (e.isDirectory()) total += await walk(p);
    const st = await lstat(p).catch(() => { /* removed while walked: counts nothing */ return undefined; });
    if (st) total += st.blocks * 512;
  }
  return total;
}
