import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, type WriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat, utimes } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileStreamClosed, type Logger, whenMissing } from '@svc/common';
import { ImageSourceError } from '../image/resolved-image.ts';
import { isBlobSize } from '../layers/layer-blob.ts';
import { privateDir } from '../store/private-dir.ts';
import { DigestVerifier } from './digest-verifier.ts';
import { pickEvictions, type CachedBlob } from './lru.ts';

const DIGEST_RE = /^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$/;
const ALGOS = ['sha256', 'sha512'];

export interface BlobCacheOptions {
  dir: string;
  /** Above this, the least recently used blobs that no build holds are deleted. */
  maxBytes: number;
  logger: Logger;
}

export interface BlobRequest {
  digest: string;
  /**
   * Whose copy the cached blob is: absent, anyone's (a blob pulled without credentials, which
   * any pull of the same digest may be handed); otherwise only requests with the same scope get
   * it (a blob pulled with registry credentials: a hash of the registry and the credentials). A
   * team that lists a private layer's digest in a manifest of its own registry is then not
   * handed the bytes another team pulled with its login (docs/decisions.md, "Templates").
   */
  scope?: string;
  /** The blob's size as its descriptor declares it: the download stops as soon as more arrives. */
  size: number;
  /** How the blob is named in errors. */
  label: string;
  /** The blob's bytes from its source (a registry response body). */
  open(signal: AbortSignal): Promise<Readable>;
  signal: AbortSignal;
  /** Bytes as they are downloaded; for a hit, the whole size once it is verified. */
  onBytes?: (n: number) => void;
}

/** The blobs one build uses: none of them is evicted until the build releases the lease. */
export interface BlobLease {
  hold(digest: string): void;
  /** Lets the blobs go and trims the cache to its limit. */
  release(): Promise<void>;
}

/**
 * Where a blob is kept: its digest, or for a scoped one a digest of the scope and the digest
 * (the same shape, so listing, leases and eviction treat both alike; the content is still
 * checked against the blob's own digest).
 */
function cacheKey(req: BlobRequest): string {
  if (req.scope === undefined) return req.digest;
  return `sha256:${createHash('sha256').update(`${req.scope}\n${req.digest}`).digest('hex')}`;
}

/**
 * Layer blobs on disk, content-addressed as `<dir>/<algo>/<hex>` (a scoped one under a key of
 * its own: cacheKey), shared by all builds. A blob
 * enters only after its digest was checked while it streamed into `<dir>/tmp`, and is renamed
 * into place; a hit is hashed again before it is used and deleted and downloaded anew when it is
 * damaged. So neither a partial download nor a file damaged later is ever applied. One process
 * owns a cache directory.
 */
export class BlobCache {
  private readonly tmpDir: string;
  private readonly pins = new Map<string, number>();
  private trimming: Promise<void> = Promise.resolve();

  constructor(private readonly o: BlobCacheOptions) {
    this.tmpDir = join(o.dir, 'tmp');
  }

  get dir(): string { return this.o.dir; }
  get maxBytes(): number { return this.o.maxBytes; }

  async init(): Promise<void> {
    // 0700, an existing one too, and 0600 files: teams' private layers (pulled with their
    // credentials) wait here for the next build; with an S3 store no 0700 store directory holds it.
    await privateDir(this.o.dir, (message) => this.o.logger.warn({ dir: this.o.dir }, `blob cache: ${message}`));
    // Partial downloads of a process that died.
    await rm(this.tmpDir, { recursive: true, force: true });
    await mkdir(this.tmpDir, { recursive: true, mode: 0o700 });
    await this.trim();
  }

  lease(): BlobLease {
    const held = new Set<string>();
    let released = false;
    return {
      hold: (digest) => {
        if (released) throw new Error('blob lease already released');
        if (held.has(digest)) return;
        held.add(digest);
        this.pins.set(digest, (this.pins.get(digest) ?? 0) + 1);
      },
      release: async () => {
        if (released) return;
        released = true;
        for (const d of held) {
          const n = (this.pins.get(d) ?? 1) - 1;
          if (n > 0) this.pins.set(d, n); else this.pins.delete(d);
        }
        await this.trim();
      },
    };
  }

  /** The path of a verified copy of the blob: the cached one when it is sound, else a new download. */
  async fetch(req: BlobRequest, lease: BlobLease): Promise<{ path: string; hit: boolean }> {
    // Checked here too, whatever the caller's type said: without a size nothing bounds the download.
    if (!isBlobSize(req.size)) throw new ImageSourceError(`layer ${req.digest} has no valid size (${JSON.stringify(req.size)}); it is not downloaded without one`);
    const key = cacheKey(req);
    const path = this.pathOf(key);
    lease.hold(key);
    const cachedSize = await this.verifyCached(path, req);
    if (cachedSize !== undefined) {
      req.onBytes?.(cachedSize);
      return { path, hit: true };
    }
    await this.download(path, req);
    await this.trim();
    return { path, hit: false };
  }

  /** Every blob in the cache with its size and last use. */
  async list(): Promise<CachedBlob[]> {
    const out: CachedBlob[] = [];
    for (const algo of ALGOS) {
      const names = await readdir(join(this.o.dir, algo)).catch(whenMissing([] as string[]));
      for (const hex of names) {
        const st = await stat(join(this.o.dir, algo, hex)).catch(whenMissing(undefined));
        if (st?.isFile()) out.push({ digest: `${algo}:${hex}`, sizeBytes: st.size, usedAtMs: st.mtimeMs });
      }
    }
    return out;
  }

  pathOf(digest: string): string {
    if (!DIGEST_RE.test(digest)) throw new ImageSourceError(`layer digest ${JSON.stringify(digest)} is not a sha256 or sha512 digest`);
    const [algo, hex] = digest.split(':');
    return join(this.o.dir, algo, hex);
  }

  /** Deletes least recently used blobs that no build holds until the rest fit in maxBytes. */
  trim(): Promise<void> {
    this.trimming = this.trimming.then(() => this.trimOnce()).catch((err: Error) => {
      this.o.logger.warn({ err: err.message, dir: this.o.dir }, 'blob cache: trimming failed');
    });
    return this.trimming;
  }

  private async trimOnce(): Promise<void> {
    const victims = pickEvictions(await this.list(), this.o.maxBytes, (d) => this.pins.has(d));
    for (const v of victims) await rm(this.pathOf(v.digest), { force: true });
    if (victims.length) {
      this.o.logger.info({ evicted: victims.length, bytes: victims.reduce((n, v) => n + v.sizeBytes, 0), maxBytes: this.o.maxBytes }, 'blob cache: evicted least recently used blobs');
    }
  }

  /** The size of the cached blob when it is there and sound (it is then marked used). */
  private async verifyCached(path: string, req: BlobRequest): Promise<number | undefined> {
    const st = await stat(path).catch(whenMissing(undefined));
    if (!st) return undefined;
    try {
      if (st.size !== req.size) throw new Error(`${st.size} bytes cached, manifest says ${req.size}`);
      await pipeline(
        createReadStream(path, { highWaterMark: 1024 * 1024 }),
        new DigestVerifier({ expectedDigest: req.digest, expectedSize: req.size, label: req.label }),
        async (verified: AsyncIterable<Buffer>) => { for await (const _ of verified); },
        { signal: req.signal },
      );
    } catch (err) {
      if (req.signal.aborted) throw req.signal.reason;
      this.o.logger.warn({ digest: req.digest, err: (err as Error).message }, 'blob cache: cached blob is damaged; downloading it again');
      await rm(path, { force: true }).catch((e: Error) => this.o.logger.warn({ digest: req.digest, err: e.message }, 'blob cache: could not remove a damaged blob'));
      return undefined;
    }
    const now = new Date();
    await utimes(path, now, now).catch(() => { /* only its place in the eviction order; removed meanwhile is fine */ });
    return st.size;
  }

  private async download(path: string, req: BlobRequest): Promise<void> {
    await mkdir(dirname(path), { recursive: true, mode: 0o700 });
    const tmp = join(this.tmpDir, `${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}`);
    let file: WriteStream | undefined;
    try {
      const source = await req.open(req.signal);
      // A deep write buffer: with the default 16 KiB the download pauses on nearly every chunk.
      file = createWriteStream(tmp, { flags: 'wx', mode: 0o600, highWaterMark: 4 * 1024 * 1024 });
      // No fsync: a blob damaged by a crash is caught by the hash check of its next use.
      await pipeline(
        source,
        new DigestVerifier({ expectedDigest: req.digest, expectedSize: req.size, label: req.label, onBytes: req.onBytes }),
        file,
        { signal: req.signal },
      );
      await rename(tmp, path);
    } catch (err) {
      if (file) await fileStreamClosed(file);
      await rm(tmp, { force: true });
      throw req.signal.aborted ? req.signal.reason : err;
    }
  }
}
