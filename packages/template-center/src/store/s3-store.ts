import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, rm, stat, unlink } from 'node:fs/promises';
import { Readable } from 'node:stream';
import type { ArtifactStored } from '@svc/contracts/template-center';
import type { ArtifactLocation, ArtifactStore } from './artifact-store.ts';
import { EMPTY_SHA256, presignUrl, signRequest, uriEncode, type SigV4Credentials } from './sigv4.ts';

export interface S3StoreOptions {
  /** e.g. https://s3.eu-west-1.amazonaws.com or http://127.0.0.1:9000 */
  endpoint: string;
  region: string;
  bucket: string;
  credentials: SigV4Credentials;
  /** Key prefix, e.g. "artifacts/". */
  prefix?: string;
  /** Bucket in the path (MinIO, Ceph) rather than in the host name (default true). */
  forcePathStyle?: boolean;
  /** Lifetime of the presigned download URL recorded at build time (docs/templates.md: 37 days). */
  presignExpiresSec?: number;
  /** Local directory for images being built. */
  scratchDir: string;
}

const PRESIGN_LIFETIME_SEC = 37 * 24 * 3600;
const SINGLE_PUT_LIMIT = 5 * 1024 ** 3;

/**
 * Artifacts in an S3-compatible bucket: `<prefix><id>.ext4` and `<prefix><id>.json` (the
 * ArtifactStored record, with the presigned URL minted at build time and never refreshed, so
 * every replica redirects to the same URL). Uploads are single PUTs signed with the image's
 * SHA-256, which the build has computed anyway.
 */
export class S3ArtifactStore implements ArtifactStore {
  readonly kind = 's3' as const;
  readonly scratchDir: string;
  readonly maxArtifactBytes = SINGLE_PUT_LIMIT;
  private readonly records = new Map<string, ArtifactStored>();
  private readyCache: { at: number; ok: boolean } | undefined;

  constructor(private readonly opts: S3StoreOptions) {
    this.scratchDir = opts.scratchDir;
  }

  async init(): Promise<void> {
    await rm(this.scratchDir, { recursive: true, force: true });
    // 0700, its parents made here too: images and layer uploads wait in it (private-dir.ts).
    await mkdir(this.scratchDir, { recursive: true, mode: 0o700 });
  }

  async ready(): Promise<boolean> {
    if (this.readyCache && Date.now() - this.readyCache.at < 10_000) return this.readyCache.ok;
    const ok = await this.send('HEAD', this.bucketUrl()).then((r) => r.ok, () => {
      // Unreachable (refused, DNS, timeout) is not ready: /health answers 503, and the store's
      // next read or write fails with the network error itself.
      return false;
    });
    this.readyCache = { at: Date.now(), ok };
    return ok;
  }

  async put(artifactId: string, file: string, meta: { sha256: string; sizeBytes: number }, opts: { move: boolean }): Promise<ArtifactStored> {
    const size = (await stat(file)).size;
    if (size > SINGLE_PUT_LIMIT) throw new Error(`artifact of ${size} bytes exceeds the 5 GiB single-upload limit of the S3 store`);
    const dataUrl = this.objectUrl(`${artifactId}.ext4`);
    const res = await this.send('PUT', dataUrl, {
      body: createReadStream(file, { highWaterMark: 1024 * 1024 }),
      payloadHash: meta.sha256,
      headers: { 'content-length': String(size), 'content-type': 'application/octet-stream' },
    });
    if (!res.ok) throw await s3Error(res, `upload of ${artifactId}`);
    // X-Amz-Date has whole seconds and the server counts the lifetime from it.
    const now = new Date(Math.floor(Date.now() / 1000) * 1000);
    const expiresSec = this.opts.presignExpiresSec ?? PRESIGN_LIFETIME_SEC;
    const record: ArtifactStored = {
      artifactId,
      sha256: meta.sha256,
      sizeBytes: meta.sizeBytes,
      storage: 's3',
      location: this.key(`${artifactId}.ext4`),
      downloadUrl: presignUrl({ method: 'GET', url: dataUrl, region: this.opts.region, credentials: this.opts.credentials, expiresSec, now }),
      urlExpiresAt: new Date(now.getTime() + expiresSec * 1000).toISOString(),
    };
    const body = Buffer.from(JSON.stringify(record));
    const recRes = await this.send('PUT', this.objectUrl(`${artifactId}.json`), {
      body, payloadHash: createHash('sha256').update(body).digest('hex'), headers: { 'content-type': 'application/json' },
    });
    if (!recRes.ok) throw await s3Error(recRes, `record of ${artifactId}`);
    this.records.set(artifactId, record);
    if (opts.move) await unlink(file).catch(() => { /* uploaded; a local copy left behind is only disk */ });
    return record;
  }

  async delete(artifactId: string): Promise<boolean> {
    this.records.delete(artifactId);
    const head = await this.send('HEAD', this.objectUrl(`${artifactId}.ext4`));
    const existed = head.ok;
    for (const name of [`${artifactId}.json`, `${artifactId}.ext4`]) {
      const res = await this.send('DELETE', this.objectUrl(name));
      if (!res.ok && res.status !== 404) throw await s3Error(res, `delete of ${name}`);
    }
    return existed;
  }

  async locate(artifactId: string): Promise<ArtifactLocation | null> {
    const record = this.records.get(artifactId) ?? await this.get(artifactId);
    return record?.downloadUrl ? { kind: 'redirect', url: record.downloadUrl } : null;
  }

  /** Reads the bucket, not the cache: another replica may have stored or deleted the artifact. */
  async get(artifactId: string): Promise<ArtifactStored | null> {
    const res = await this.send('GET', this.objectUrl(`${artifactId}.json`));
    if (res.status === 404) {
      await res.body?.cancel();
      this.records.delete(artifactId);
      return null;
    }
    if (!res.ok) throw await s3Error(res, `record of ${artifactId}`);
    const record = JSON.parse(await res.text()) as ArtifactStored;
    this.records.set(artifactId, record);
    return record;
  }

  private key(name: string) { return `${this.opts.prefix ?? ''}${name}`; }

  private bucketUrl(): string {
    const ep = new URL(this.opts.endpoint);
    if (this.opts.forcePathStyle ?? true) return `${ep.origin}/${this.opts.bucket}`;
    return `${ep.protocol}//${this.opts.bucket}.${ep.host}`;
  }

  private objectUrl(name: string): string {
    // Sent exactly as SigV4 canonicalises it (encodeURIComponent leaves !'()* alone).
    const encoded = this.key(name).split('/').map(uriEncode).join('/');
    return `${this.bucketUrl()}/${encoded}`;
  }

  private async send(method: string, url: string, o: { body?: Readable | Buffer; payloadHash?: string; headers?: Record<string, string> } = {}): Promise<Response> {
    const { headers } = signRequest({
      method, url, headers: o.headers, payloadHash: o.payloadHash ?? EMPTY_SHA256,
      region: this.opts.region, service: 's3', credentials: this.opts.credentials,
    });
    const streaming = o.body instanceof Readable;
    const body = streaming ? Readable.toWeb(o.body as Readable) : o.body;
    return fetch(url, { method, headers, body, ...(streaming ? { duplex: 'half' } : {}) } as RequestInit);
  }
}

async function s3Error(res: Response, what: string): Promise<Error> {
  const text = await res.text().catch(() => {
    /* the error answer's body was cut off: the status alone makes the error */
    return '';
  });
  const code = /<Code>([^<]+)<\/Code>/.exec(text)?.[1];
  const msg = /<Message>([^<]+)<\/Message>/.exec(text)?.[1];
  return new Error(`S3 store: ${what} failed: ${res.status}${code ? ` ${code}` : ''}${msg ? `: ${msg}` : ''}`);
}
