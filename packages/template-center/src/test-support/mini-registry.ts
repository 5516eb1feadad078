import { createReadStream, existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';

export interface MiniRegistry {
  host: string;
  /** Blob requests answered so far. */
  blobRequests: number;
  /** Blob requests so far, by digest. */
  blobGets(digest: string): number;
  close(): Promise<void>;
}

/**
 * A minimal read-only distribution API over an OCI layout, for situations the real registry
 * cannot stage: a layer that trickles in slowly (`slowBytesPerSec`), so a build can be caught
 * in the middle of its pull.
 */
export async function startMiniRegistry(layoutDir: string, o: { slowBytesPerSec?: number } = {}): Promise<MiniRegistry> {
  const index = JSON.parse(readFileSync(join(layoutDir, 'index.json'), 'utf8')) as { manifests: Array<{ digest: string; mediaType: string; annotations?: Record<string, string> }> };
  const state = { blobRequests: 0 };
  const gets = new Map<string, number>();
  const sockets = new Set<import('node:net').Socket>();
  const server: Server = createServer((req, res) => {
    const m = /^\/v2\/(.+)\/(manifests|blobs)\/([^/]+)$/.exec(req.url ?? '');
    if (req.url === '/v2/') { res.writeHead(200).end('{}'); return; }
    if (!m) { res.writeHead(404).end(); return; }
    const [, , kind, ref] = m;
    const desc = kind === 'manifests' ? index.manifests.find((d) => d.annotations?.['org.opencontainers.image.ref.name'] === ref || d.digest === ref) : undefined;
    const digest = kind === 'manifests' ? desc?.digest : ref;
    if (!digest) { res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[{"code":"MANIFEST_UNKNOWN"}]}'); return; }
    const path = join(layoutDir, 'blobs', 'sha256', digest.slice(7));
    if (kind === 'manifests') {
      const body = readFileSync(path);
      res.writeHead(200, { 'content-type': desc!.mediaType, 'docker-content-digest': digest, 'content-length': body.length }).end(body);
      return;
    }
    state.blobRequests++;
    gets.set(digest, (gets.get(digest) ?? 0) + 1);
    // A layout may leave a blob out: a manifest naming a layer the registry does not have.
    if (!existsSync(path)) { res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[{"code":"BLOB_UNKNOWN"}]}'); return; }
    const data = readFileSync(path);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': data.length });
    if (!o.slowBytesPerSec || data.length < 4096) { createReadStream(path).pipe(res); return; }
    let off = 0;
    const step = Math.max(1, Math.floor(o.slowBytesPerSec / 10));
    const t = setInterval(() => {
      if (res.destroyed) { clearInterval(t); return; }
      res.write(data.subarray(off, off + step));
      off += step;
      if (off >= data.length) { clearInterval(t); res.end(); }
    }, 100);
    res.on('close', () => clearInterval(t));
  });
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    host: `127.0.0.1:${(server.address() as { port: number }).port}`,
    get blobRequests() { return state.blobRequests; },
    blobGets: (digest) => gets.get(digest) ?? 0,
    close: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}
