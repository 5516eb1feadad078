import { Transform, type TransformCallback } from 'node:stream';
import { BlobCheck } from '../layers/blob-check.ts';

export interface DigestVerifierOptions {
  /** `sha256:<hex>` or `sha512:<hex>`. */
  expectedDigest: string;
  /** The declared size: more bytes than this fail the blob at once. */
  expectedSize: number;
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
  private readonly check: BlobCheck;
  private idle: NodeJS.Timeout | undefined;

  constructor(private readonly o: DigestVerifierOptions) {
    super({ highWaterMark: 1024 * 1024 });
    this.check = new BlobCheck(o);
    this.armIdle();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.armIdle();
    try {
      this.check.update(chunk);
    } catch (err) {
      cb(err as Error);
      return;
    }
    this.o.onBytes?.(chunk.length);
    cb(null, chunk);
  }

  override _flush(cb: TransformCallback): void {
    clearTimeout(this.idle);
    try {
      this.check.finish();
      cb(null);
    } catch (err) {
      cb(err as Error);
    }
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
