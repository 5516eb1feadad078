import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { SvcError } from '@svc/common';

export interface ExpectedBlob {
  sha256: string;
  /** 0 or absent: any size. */
  sizeBytes?: number;
}

/**
 * Downloads `url` (a path is taken relative to `baseUrl`, the master) into `dest`, hashing on
 * the way; a sha256 or size other than expected is a 502 and the caller removes `dest`.
 * What is fetched: template images and snapshot layers, both through the master.
 */
export async function downloadVerified(what: string, url: string, baseUrl: string | undefined, dest: string, want: ExpectedBlob): Promise<{ sha256: string; sizeBytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) { hash.update(chunk); bytes += chunk.length; done(null, chunk); },
  });
  await pipeline(await open(what, url, baseUrl), counter, createWriteStream(dest, { mode: 0o600 }));
  const sha256 = hash.digest('hex');
  if (sha256 !== want.sha256.toLowerCase()) {
    throw new SvcError(502, `${what}: sha256 mismatch: downloaded ${sha256}, expected ${want.sha256.toLowerCase()}`);
  }
  if (want.sizeBytes && bytes !== want.sizeBytes) {
    throw new SvcError(502, `${what}: size mismatch: downloaded ${bytes} bytes, expected ${want.sizeBytes}`);
  }
  return { sha256, sizeBytes: bytes };
}

/** The sha256 (hex) and size of a file already on this host (a linked artifact, artifact-store.ts). */
export async function fileDigest(path: string): Promise<{ sha256: string; sizeBytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: 1024 * 1024 })) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { sha256: hash.digest('hex'), sizeBytes: bytes };
}

async function open(what: string, url: string, baseUrl: string | undefined): Promise<Readable> {
  const resolved = url.startsWith('/') && baseUrl ? baseUrl.replace(/\/+$/, '') + url : url;
  if (resolved.startsWith('file://')) return createReadStream(fileURLToPath(resolved));
  let res: Response;
  try {
    res = await fetch(resolved);
  } catch (err) {
    throw new SvcError(502, `${what}: download from ${resolved} failed: ${((err as Error).cause as Error)?.message ?? (err as Error).message}`);
  }
  if (!res.ok || !res.body) {
    await res.body?.cancel();
    throw new SvcError(502, `${what}: download from ${resolved} answered ${res.status}`);
  }
  return Readable.fromWeb(res.body as import('node:stream/web').ReadableStream<Uint8Array>);
}
