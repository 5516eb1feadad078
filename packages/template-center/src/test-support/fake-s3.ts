import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { presignUrl, signRequest, type SigV4Credentials } from '../store/sigv4.ts';

export interface FakeS3 {
  endpoint: string;
  objects: Map<string, Buffer>;
  /** Requests whose signature did not verify. */
  rejected: string[];
  close(): Promise<void>;
}

/**
 * An in-memory, path-style S3 stand-in for the store's request flow (PUT/GET/HEAD/DELETE of one
 * bucket). It re-derives each signature with the same signer, so it checks what was signed
 * (method, path, headers, payload hash) rather than the signing algorithm, which sigv4.test.ts
 * checks against AWS's published vectors.
 */
export async function startFakeS3(bucket: string, region: string, credentials: SigV4Credentials): Promise<FakeS3> {
  const objects = new Map<string, Buffer>();
  const rejected: string[] = [];
  const server: Server = createServer(async (req, res) => {
    const body = await readBody(req);
    const url = new URL(req.url ?? '/', `http://${req.headers.host}`);
    if (!verify(req, url, body)) {
      rejected.push(`${req.method} ${url.pathname}`);
      res.writeHead(403, { 'content-type': 'application/xml' }).end('<Error><Code>SignatureDoesNotMatch</Code><Message>bad signature</Message></Error>');
      return;
    }
    const [, b, ...rest] = url.pathname.split('/');
    const key = rest.map(decodeURIComponent).join('/');
    if (b !== bucket) { res.writeHead(404).end('<Error><Code>NoSuchBucket</Code></Error>'); return; }
    if (!key) { res.writeHead(200).end(); return; }
    const obj = objects.get(key);
    switch (req.method) {
      case 'PUT': objects.set(key, body); res.writeHead(200, { etag: '"x"' }).end(); return;
      case 'HEAD': res.writeHead(obj ? 200 : 404, obj ? { 'content-length': obj.length } : {}).end(); return;
      case 'GET': if (!obj) { res.writeHead(404).end('<Error><Code>NoSuchKey</Code></Error>'); return; } res.writeHead(200, { 'content-length': obj.length }).end(obj); return;
      case 'DELETE': objects.delete(key); res.writeHead(204).end(); return;
      default: res.writeHead(405).end();
    }
  });

  function verify(req: IncomingMessage, url: URL, body: Buffer): boolean {
    if (url.searchParams.has('X-Amz-Signature')) {
      const amzDate = url.searchParams.get('X-Amz-Date')!;
      const now = new Date(`${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`);
      const unsigned = new URL(url);
      for (const k of [...unsigned.searchParams.keys()]) if (k.startsWith('X-Amz-')) unsigned.searchParams.delete(k);
      const expected = presignUrl({ method: req.method!, url: unsigned, region, credentials, expiresSec: Number(url.searchParams.get('X-Amz-Expires')), now });
      return new URL(expected).searchParams.get('X-Amz-Signature') === url.searchParams.get('X-Amz-Signature');
    }
    const auth = req.headers.authorization ?? '';
    const signed = /SignedHeaders=([^,]+)/.exec(auth)?.[1].split(';') ?? [];
    const payloadHash = String(req.headers['x-amz-content-sha256']);
    if (req.method === 'PUT' && payloadHash !== createHash('sha256').update(body).digest('hex')) return false;
    const amzDate = String(req.headers['x-amz-date']);
    const now = new Date(`${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`);
    const headers: Record<string, string> = {};
    for (const h of signed) if (!['host', 'x-amz-date', 'x-amz-content-sha256', 'x-amz-security-token'].includes(h)) headers[h] = String(req.headers[h]);
    const again = signRequest({ method: req.method!, url, headers, payloadHash, region, service: 's3', credentials, now });
    return again.headers.authorization === auth;
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    objects, rejected,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}
