import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { DigestMismatchError } from '../layers/layer-blob.ts';

export interface DigestVerifierOptions {
  /** `sha256:<hex>` or `sha512:<hex>`. */
  expectedDigest: string;
  expectedSize?: number;
  label: string;
  onBytes?: (n: number) => void;
  /** Fail when nothing passes for this long (default 120 s). */
  idleTimeoutMs?: number;
}

/**
 * Passes a blob through unchanged while hashing and counting it. It fails as soon as the blob is
 * larger than promised, and at the end when its size or digest is not what the manifest says;
 * a source that goes quiet fails it too.
 */
export class DigestVerifier extends Transform {
  private readonly hash: Hash;
  private readonly algo: string;
  private total = 0;
  private idle: NodeJS.Timeout | undefined;

  constructor(private readonly o: DigestVerifierOptions) {
    super({ highWaterMark: 1024 * 1024 });
    this.algo = o.expectedDigest.split(':')[0];
    this.hash = createHash(this.algo);
    this.armIdle();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.armIdle();
    this.total += chunk.length;
    const { expectedSize, label } = this.o;
    if (expectedSize !== undefined && this.total > expectedSize) {
      cb(new DigestMismatchError(`layer ${label} is larger than its manifest says (${expectedSize} bytes): digest mismatch`));
      return;
    }
    this.hash.update(chunk);
    this.o.onBytes?.(chunk.length);
    cb(null, chunk);
  }

  override _flush(cb: TransformCallback): void {
    clearTimeout(this.idle);
    const { expectedSize, expectedDigest, label } = this.o;
    if (expectedSize !== undefined && this.total !== expectedSize) {
      cb(new DigestMismatchError(`layer ${label} digest mismatch: got ${this.total} bytes, manifest says ${expectedSize}`));
      return;
    }
    const got = `${this.algo}:${this.hash.digest('hex')}`;
    cb(got === expectedDigest ? null : new DigestMismatchError(`layer ${label} digest mismatch: content hashes to ${got}`));
  }

  override _destroy(err: Error | null, cb: (err: Error | null) => void): void {
    clearTimeout(this.idle);
    cb(err);
  }

  private armIdle(): void {
    if (this.idle) { this.idle.refresh(); return; }
    const ms = this.o.idleTimeoutMs ?? 120_000;
    this.idle = setTimeout(() => this.destroy(new Error(`layer ${this.o.label}: the source sent nothing for ${ms / 1000} s`)), ms);
    this.idle.unref();
  }
}
