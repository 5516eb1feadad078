import type { Readable } from 'node:stream';

/** One layer of an image, wherever it comes from (registry, OCI layout, docker archive, tarball). */
export interface LayerBlob {
  /** Digest of the stored (usually compressed) bytes, verified while streaming when known. */
  digest?: string;
  /** Size of the stored bytes, when known. */
  size?: number;
  /** Digest of the uncompressed tar (config rootfs.diff_ids), verified when set. */
  diffId?: string;
  /** How the layer is named in progress and errors. */
  label: string;
  /** Downloaded into the blob cache during PULLING (registry layers); others are read in place. */
  remote?: boolean;
  /**
   * Whose cached copy this is (BlobRequest.scope): set for a layer pulled with registry
   * credentials, so that only pulls with the same credentials are handed the copy.
   */
  cacheScope?: string;
  /** Already checked against `digest` in this build (a cached file): read without hashing again. */
  verified?: boolean;
  open(signal: AbortSignal): Promise<Readable>;
}

export class DigestMismatchError extends Error {}

/**
 * A size a download can be held to: a whole number of bytes, 0 or more, that a double holds
 * exactly. A registry's descriptor without one (absent, negative, fractional, a string) had its
 * blob downloaded without any limit (found by a helper reading the template center as an attacker).
 */
export function isBlobSize(size: unknown): size is number {
  return typeof size === 'number' && Number.isSafeInteger(size) && size >= 0;
}

export const shortDigest = (d: string) => (d.startsWith('sha256:') ? `sha256:${d.slice(7, 19)}` : d);
