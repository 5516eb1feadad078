import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { SvcError } from '@svc/common';
import { clusterHeaders } from '@svc/contracts/cluster-token';

/** The master that hands out download URLs: relative ones are taken against it, and its token goes to it alone. */
export interface MasterDownloads {
  baseUrl: string;
  /** cluster_token (docs/cluster.md): the master takes it on its download routes too. */
  clusterToken?: string;
}

/** The master's download routes (MASTER_DOWNLOAD_ROUTES and the artifact route), whichever master made the URL. */
const MASTER_DOWNLOAD_PATH = /^\/(svc\/template\/artifact\/download|internal\/v1\/layers\/|internal\/v1\/template-files\/)/;

export interface ExpectedBlob {
  sha256: string;
  /** 0 or absent: any size. */
  sizeBytes?: number;
}

/** The slowest a download may run on average before its deadline ends it (downloadDeadlineMs). */
const MIN_BYTES_PER_SEC = 1024 * 1024;
const DEADLINE_BASE_MS = 60_000;
/** A blob of unknown size (sizeBytes 0) gets the deadline of one this large. */
const UNKNOWN_SIZE_BYTES = 8 * 1024 * 1024 * 1024;

/**
 * How long a download of `sizeBytes` may take in all: a minute and a second per MiB. Generous
 * for any link a cluster runs on, and finite: concurrent creates of one layer share its download,
 * so a source that stalled without closing held every later create of that layer with it.
 */
export function downloadDeadlineMs(sizeBytes: number | undefined): number {
  return DEADLINE_BASE_MS + Math.ceil((sizeBytes || UNKNOWN_SIZE_BYTES) / MIN_BYTES_PER_SEC) * 1000;
}

/**
 * Downloads `url` (a path is taken relative to the master) into `dest`, hashing on
 * the way; a sha256 or size other than expected is a 502 and the caller removes `dest`.
 * A body that runs past the expected size is cut there (a source that sent 64 MB for a
 * 10-byte blob had all of it written before the check, until 2026-12-01), and the whole
 * download is held to `deadlineMs` (504). What is fetched: template images and snapshot
 * layers, both through the master.
 */
export async function downloadVerified(
  what: string, url: string, master: MasterDownloads | undefined, dest: string, want: ExpectedBlob,
  deadlineMs = downloadDeadlineMs(want.sizeBytes),
): Promise<{ sha256: string; sizeBytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.length;
      if (want.sizeBytes && bytes > want.sizeBytes) return done(new SvcError(502, `${what}: size mismatch: the download passed the ${want.sizeBytes} bytes expected; stopped there`));
      hash.update(chunk);
      done(null, chunk);
    },
  });
  const signal = AbortSignal.timeout(deadlineMs);
  try {
    await pipeline(await open(what, url, master, signal), counter, createWriteStream(dest, { mode: 0o600 }), { signal });
  } catch (err) {
    if (signal.aborted) throw new SvcError(504, `${what}: the download did not finish within ${Math.ceil(deadlineMs / 1000)} s (${bytes} of ${want.sizeBytes || 'an unknown number of'} bytes arrived)`);
    throw err;
  }
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

async function open(what: string, url: string, master: MasterDownloads | undefined, signal: AbortSignal): Promise<Readable> {
  const resolved = url.startsWith('/') && master ? master.baseUrl.replace(/\/+$/, '') + url : url;
  let parsed: URL;
  try {
    parsed = new URL(resolved);
    if (parsed.protocol === 'file:') return createReadStream(fileURLToPath(parsed));
  } catch (err) {
    // The caller's input (POST /v1/artifacts/:id's downloadUrl), not a failed download.
    throw new SvcError(400, `${what}: its download URL is not a URL this node can read (${(err as NodeJS.ErrnoException).code ?? 'unparsable'})`);
  }
  let res: Response;
  const source = sourceOf(parsed, master);
  try {
    res = await fetchFromMaster(resolved, master, signal);
  } catch (err) {
    if (signal.aborted) throw new SvcError(504, `${what}: ${source} did not answer within the download's deadline`);
    const cause = (err as Error).cause as NodeJS.ErrnoException | undefined;
    throw new SvcError(502, `${what}: download from ${source} failed: ${cause?.code ?? (err as Error).message}`);
  }
  if (!res.ok || !res.body) {
    await res.body?.cancel();
    throw new SvcError(502, `${what}: download from ${source} answered ${res.status}`);
  }
  return Readable.fromWeb(res.body as import('node:stream/web').ReadableStream<Uint8Array>);
}

/**
 * Where a download came from, in words a team may read (a failed create passes them on): the
 * path, never the origin (an address of the platform's) nor the query (a presigned URL's
 * signature). The operator knows master.addr; the error's code (ECONNREFUSED, ...) says why.
 */
function sourceOf(u: URL, master: MasterDownloads | undefined): string {
  const ours = master && (u.origin === new URL(master.baseUrl).origin || MASTER_DOWNLOAD_PATH.test(u.pathname));
  return `${ours ? 'the master' : 'the artifact store'} (${u.pathname})`;
}

/**
 * The URL, with cluster_token when it is the master's: its origin, or one of its download routes.
 * Every master of a cluster builds download URLs from its own master.addr (artifact-url.ts,
 * layer-storage.ts), so a node registered with one master is handed URLs on another's origin;
 * sending the token to master.addr's origin alone (2026-12-01) failed cross-node restores with
 * 401. The master may answer with a redirect to its artifact store's presigned URL: that is
 * followed without the token, which never leaves the platform.
 */
async function fetchFromMaster(url: string, master: MasterDownloads | undefined, signal: AbortSignal): Promise<Response> {
  const u = new URL(url);
  const ours = master?.clusterToken && (u.origin === new URL(master.baseUrl).origin || MASTER_DOWNLOAD_PATH.test(u.pathname));
  if (!ours) return fetch(url, { signal });
  const res = await fetch(url, { headers: clusterHeaders(master.clusterToken), redirect: 'manual', signal });
  const location = res.status >= 300 && res.status < 400 ? res.headers.get('location') : null;
  if (!location) return res;
  await res.body?.cancel();
  return fetch(new URL(location, url), { signal });
}
