import { PassThrough, type Readable } from 'node:stream';
import { BlobCheck } from './blob-check.ts';

export interface FeedOptions {
  expectedDigest?: string;
  expectedSize?: number;
  label: string;
  onBytes?: (n: number) => void;
  /** Fail when the source sends nothing for this long (default 120 s). */
  idleTimeoutMs?: number;
}

/**
 * Copies `raw` into `feed` while hashing it. If the consumer of `feed` fails part way (a corrupt
 * blob usually breaks the decompressor before its end), `stopFeeding` lets the copy continue as a
 * drain so the digest can still be checked: "digest mismatch" is a better answer than "invalid
 * gzip header" when the blob is not what the manifest promised.
 */
export class VerifiedFeed {
  readonly feed = new PassThrough({ highWaterMark: 1024 * 1024 });
  private feeding = true;
  private wake: (() => void) | undefined;
  readonly done: Promise<void>;

  constructor(private readonly raw: Readable, private readonly opts: FeedOptions) {
    this.done = this.pump();
    this.done.catch(() => { /* whoever awaits done gets the failure; this only keeps it from counting as unhandled */ });
  }

  stopFeeding(): void {
    this.feeding = false;
    this.wake?.();
  }

  private async pump(): Promise<void> {
    const { label } = this.opts;
    const check = new BlobCheck(this.opts);
    const idleMs = this.opts.idleTimeoutMs ?? 120_000;
    let idle: NodeJS.Timeout | undefined;
    const armIdle = () => {
      clearTimeout(idle);
      idle = setTimeout(() => this.raw.destroy(new Error(`layer ${label}: the source sent nothing for ${idleMs / 1000} s`)), idleMs);
    };
    armIdle();
    try {
      for await (const chunk of this.raw as AsyncIterable<Buffer>) {
        clearTimeout(idle);
        this.opts.onBytes?.(chunk.length);
        check.update(chunk);
        if (this.feeding && !this.feed.destroyed && !this.feed.write(chunk)) await this.drained();
        armIdle();
      }
      check.finish();
    } catch (err) {
      this.feed.destroy(err as Error);
      throw err;
    } finally {
      clearTimeout(idle);
    }
    this.feed.end();
  }

  private drained(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.feed.off('drain', done);
        this.feed.off('close', done);
        this.wake = undefined;
        resolve();
      };
      this.wake = done;
      this.feed.once('drain', done);
      this.feed.once('close', done);
    });
  }
}
