export interface CachedBlob {
  digest: string;
  sizeBytes: number;
  /** Last use: set when the blob is written and again on every hit. */
  usedAtMs: number;
}

/**
 * The blobs to delete so that the rest fit in `maxBytes`: least recently used first, never a
 * pinned one (a running build needs it). When pinned blobs alone exceed the limit, every unpinned
 * blob goes and the cache stays over the limit until they are released.
 */
export function pickEvictions(blobs: CachedBlob[], maxBytes: number, pinned: (digest: string) => boolean): CachedBlob[] {
  let total = blobs.reduce((n, b) => n + b.sizeBytes, 0);
  const victims: CachedBlob[] = [];
  for (const b of [...blobs].sort((x, y) => x.usedAtMs - y.usedAtMs)) {
    if (total <= maxBytes) break;
    if (pinned(b.digest)) continue;
    victims.push(b);
    total -= b.sizeBytes;
  }
  return victims;
}
