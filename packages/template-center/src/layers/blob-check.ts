import { createHash, type Hash } from 'node:crypto';
import { DigestMismatchError, isBlobSize } from './layer-blob.ts';

export interface BlobExpectation {
  /** `sha256:<hex>` or `sha512:<hex>`; other algorithms are counted but not hashed. */
  expectedDigest?: string;
  /**
   * The declared size, which the blob may not pass. Absent only for a local file read in place
   * (an archive's member, a tarball), whose own length bounds it: every download has one
   * (blobs/blob-cache.ts).
   */
  expectedSize?: number;
  /** How the blob is named in errors. */
  label: string;
}

/** Counts and hashes a blob chunk by chunk, and says when it is not what its manifest promised. */
export class BlobCheck {
  private readonly algo: string | undefined;
  private readonly hash: Hash | undefined;
  private total = 0;

  constructor(private readonly o: BlobExpectation) {
    if (o.expectedSize !== undefined && !isBlobSize(o.expectedSize)) {
      throw new DigestMismatchError(`layer ${o.label} declares no valid size (${JSON.stringify(o.expectedSize)})`);
    }
    const algo = o.expectedDigest?.split(':')[0];
    this.algo = algo;
    this.hash = algo === 'sha256' || algo === 'sha512' ? createHash(algo) : undefined;
  }

  /** Takes the next chunk; throws as soon as the blob is larger than promised. */
  update(chunk: Buffer): void {
    this.total += chunk.length;
    const { expectedSize, label } = this.o;
    if (expectedSize !== undefined && this.total > expectedSize) {
      throw new DigestMismatchError(`layer ${label} is larger than its manifest says (${expectedSize} bytes): digest mismatch`);
    }
    this.hash?.update(chunk);
  }

  /** After the last chunk: throws when the size or the digest is not the promised one. */
  finish(): void {
    const { expectedSize, expectedDigest, label } = this.o;
    if (expectedSize !== undefined && this.total !== expectedSize) {
      throw new DigestMismatchError(`layer ${label} digest mismatch: got ${this.total} bytes, manifest says ${expectedSize}`);
    }
    if (this.hash && expectedDigest) {
      const got = `${this.algo}:${this.hash.digest('hex')}`;
      if (got !== expectedDigest) throw new DigestMismatchError(`layer ${label} digest mismatch: content hashes to ${got}`);
    }
  }
}
