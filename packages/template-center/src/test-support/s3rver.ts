import type { IncomingHttpHeaders, Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';

/** s3rver's built-in key pair (its only account). */
export const S3RVER_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

export interface S3rverRequest { method: string; url: string; headers: IncomingHttpHeaders; status: number }

export interface TestS3rver {
  /** http://127.0.0.1:<port>; requests to an IP address are path-style in s3rver. */
  endpoint: string;
  bucket: string;
  /** Every request answered, in order. */
  requests: S3rverRequest[];
  exists(key: string): Promise<boolean>;
  close(): Promise<void>;
}

/** A real s3rver in this process on a free loopback port, backed by a temp directory holding `bucket`. */
export async function startS3rver(bucket = 'artifacts'): Promise<TestS3rver> {
  const dir = await mkdtemp(join(tmpdir(), 'tc-s3rver-'));
  const s3rver = new S3rver({ directory: dir, silent: true, configureBuckets: [{ name: bucket }] });
  let server: Server;
  try {
    await s3rver.configureBuckets();
    server = await s3rver.listen(0, '127.0.0.1');
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const requests: S3rverRequest[] = [];
  // A second listener beside s3rver's own: it only watches the exchange.
  server.on('request', (req, res) => {
    res.on('finish', () => requests.push({ method: req.method!, url: req.url!, headers: req.headers, status: res.statusCode }));
  });
  return {
    endpoint: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    bucket,
    requests,
    exists: (key) => s3rver.store.existsObject(bucket, key),
    close: async () => {
      await new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections(); });
      await rm(dir, { recursive: true, force: true });
    },
  };
}
