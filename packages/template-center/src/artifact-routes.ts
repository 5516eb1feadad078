import { createReadStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { badRequest, notFound, SvcError, whenMissing } from '@svc/common';
import { serve } from '@svc/contracts/route-table';
import { TEMPLATE_CENTER_ROUTES as R } from '@svc/contracts/template-center';
import { sha256File } from './build/file-sha256.ts';
import { parseRange } from './http-range.ts';
import { isValidArtifactId, type ArtifactStore } from './store/artifact-store.ts';

const EXT4_MAGIC_OFFSET = 1080;

/** Download (file with ranges, or redirect to the presigned URL), delete and migrate. */
export function registerArtifactRoutes(app: FastifyInstance, store: ArtifactStore): void {
  const download = async (req: FastifyRequest<{ Params: { artifactId: string } }>, reply: FastifyReply) => {
    const { artifactId } = req.params;
    if (!isValidArtifactId(artifactId)) throw badRequest('invalid artifact id');
    const loc = await store.locate(artifactId);
    if (!loc) throw notFound(`artifact ${artifactId} not found`);
    if (loc.kind === 'redirect') return reply.redirect(loc.url, 302);

    const etag = `"${loc.sha256}"`;
    reply.header('etag', etag).header('accept-ranges', 'bytes').header('content-type', 'application/octet-stream');
    if (req.headers['if-none-match'] === etag) return reply.status(304).send();
    const range = parseRange(req.headers.range, loc.sizeBytes);
    if (range === 'unsatisfiable') {
      return reply.status(416).header('content-range', `bytes */${loc.sizeBytes}`).type('application/json')
        .send({ code: 416, message: `range not satisfiable for ${loc.sizeBytes} bytes` });
    }
    const start = range?.start ?? 0;
    const end = range?.end ?? loc.sizeBytes - 1;
    const length = loc.sizeBytes === 0 ? 0 : end - start + 1;
    reply.header('content-length', String(length));
    if (range) reply.status(206).header('content-range', `bytes ${start}-${end}/${loc.sizeBytes}`);
    if (req.method === 'HEAD' || length === 0) return reply.send();
    return reply.send(createReadStream(loc.path, { start, end, highWaterMark: 1024 * 1024 }));
  };
  // fastify's derived HEAD would read the whole image to discard it: HEAD gets its own route,
  // the same handler, registered first so that the GET brings none.
  app.route({ method: 'HEAD', url: R.downloadArtifact.path, handler: download });
  serve(app, R.downloadArtifact, download);

  // What the store knows of an artifact (sha256, size), wherever its bytes are.
  serve(app, R.artifactInfo, async (req) => {
    const { artifactId } = req.params;
    if (!isValidArtifactId(artifactId)) throw badRequest('invalid artifact id');
    const stored = await store.get(artifactId);
    if (!stored) throw notFound(`artifact ${artifactId} not found`);
    return stored;
  });

  // The body's schema (TEMPLATE_CENTER_ROUTES) holds a valid artifact id.
  serve(app, R.deleteArtifact, async (req) => ({ deleted: await store.delete(req.body.artifactId) }));

  // The body's schema holds a valid artifact id and an absolute localPath.
  serve(app, R.migrate, async (req) => {
    const { artifactId, localPath } = req.body;
    const st = await stat(localPath).catch(whenMissing(null));
    if (!st?.isFile()) throw notFound(`legacy artifact file ${localPath} does not exist`);
    if (!(await isExt4(localPath))) throw new SvcError(422, `${localPath} is not an ext4 file system image`);
    const sha256 = await sha256File(localPath);
    return store.put(artifactId, localPath, { sha256, sizeBytes: st.size }, { move: false });
  });
}

async function isExt4(path: string): Promise<boolean> {
  const fh = await open(path, 'r');
  try {
    const buf = Buffer.alloc(2);
    const { bytesRead } = await fh.read(buf, 0, 2, EXT4_MAGIC_OFFSET);
    return bytesRead === 2 && buf.readUInt16LE(0) === 0xef53;
  } finally {
    await fh.close();
  }
}
