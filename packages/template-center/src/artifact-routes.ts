import { createReadStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { badRequest, notFound, SvcError, whenMissing } from '@svc/common';
import { TEMPLATE_CENTER_ROUTES as R, type ArtifactStored } from '@svc/contracts/template-center';
import { sha256File } from './build/file-sha256.ts';
import { parseRange } from './http-range.ts';
import { isValidArtifactId, type ArtifactStore } from './store/artifact-store.ts';

const EXT4_MAGIC_OFFSET = 1080;

/** Download (file with ranges, or redirect to the presigned URL), delete and migrate. */
export function registerArtifactRoutes(app: FastifyInstance, store: ArtifactStore): void {
  const serve = async (req: FastifyRequest<{ Params: { artifactId: string } }>, reply: FastifyReply) => {
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
  // fastify's derived HEAD would read the whole image to discard it: HEAD gets its own route.
  app.get(R.downloadArtifact.path, { exposeHeadRoute: false }, serve);
  app.head(R.downloadArtifact.path, serve);

  // What the store knows of an artifact (sha256, size), wherever its bytes are.
  app.get<{ Params: { artifactId: string } }>(R.artifactInfo.path, async (req): Promise<ArtifactStored> => {
    const { artifactId } = req.params;
    if (!isValidArtifactId(artifactId)) throw badRequest('invalid artifact id');
    const stored = await store.get(artifactId);
    if (!stored) throw notFound(`artifact ${artifactId} not found`);
    return stored;
  });

  app.post(R.deleteArtifact.path, async (req) => {
    const artifactId = (req.body as { artifactId?: unknown } | undefined)?.artifactId;
    if (!isValidArtifactId(artifactId)) throw badRequest('artifactId must be a valid artifact id');
    return { deleted: await store.delete(artifactId) };
  });

  app.post(R.migrate.path, async (req): Promise<ArtifactStored> => {
    const { artifactId, localPath } = (req.body ?? {}) as { artifactId?: unknown; localPath?: unknown };
    if (!isValidArtifactId(artifactId)) throw badRequest('artifactId must be a valid artifact id');
    if (typeof localPath !== 'string' || !localPath.startsWith('/')) throw badRequest('localPath must be an absolute path');
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
