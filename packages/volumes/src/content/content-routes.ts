/**
 * The volume content API over HTTP, as E2B's spec/openapi-volumecontent.yml has it (the wire of
 * the official SDK's `Volume` content methods), under `${prefix}/:volumeID/`:
 *
 *   GET    dir   ?path&depth                  → 200 VolumeEntryStat[]
 *   POST   dir   ?path&uid&gid&mode&force      → 201 VolumeEntryStat
 *   GET    file  ?path                        → 200 application/octet-stream (content-length set)
 *   PUT    file  ?path&uid&gid&mode&force      → 201 VolumeEntryStat   (body: the raw bytes, any content type)
 *   GET    path  ?path                        → 200 VolumeEntryStat
 *   PATCH  path  ?path  {uid?, gid?, mode?}   → 200 VolumeEntryStat
 *   DELETE path  ?path                        → 204
 *
 * Errors are `{code, message}` with code = the HTTP status (content-ops.ts lists them). Query
 * integers are decimal: uid and gid 0..2^32-1, mode 0..0o7777 (only 0o777 is applied), depth
 * 0..10 (0 is 1); force is `true` or `false`; path is required and checked (NUL, 4096 bytes)
 * before the volume is opened. Who may reach a volume, and where its content is,
 * is the caller's `open` (which also throws the 404 of an unknown volume); its `release` runs
 * once the request is done, for a download once the response ended or the client went away.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { SvcError, badRequest, drainRequest, sendError } from '@svc/common';
import { normalizeVolumePath } from './confined-fs.ts';
import { LIST_DEPTH, MAX_ID, MAX_MODE, VolumeContent, type MetadataUpdate, type VolumeContentOptions } from './content-ops.ts';

/** Default largest upload: 10 GiB. */
const DEFAULT_MAX_UPLOAD_BYTES = 10 * 1024 ** 3;

/** A volume's content on this host, held for one request. */
export interface OpenedVolume {
  /** The host directory that is the volume's root (trusted: from the server, never the client). */
  root: string;
  /** Called once when the request is done with the volume. */
  release(): Promise<void>;
}

export interface VolumeContentRouteOptions {
  /** Path before `/:volumeID/{dir,file,path}`, e.g. '/volumecontent' (no trailing slash). */
  prefix: string;
  /** Authorizes the request and locates the volume; throws an SvcError (401, 403, 404) to refuse. */
  open(volumeId: string, req: FastifyRequest): Promise<OpenedVolume>;
  /** Largest upload in bytes; more is a 413 (default DEFAULT_MAX_UPLOAD_BYTES). */
  maxUploadBytes?: number;
  /** An upload that sends nothing for this long is cut and keeps nothing (default 60 s). */
  uploadIdleTimeoutMs?: number;
  /** Passed to each VolumeContent (default owner, listing cap). */
  content?: VolumeContentOptions;
}

type Params = { volumeID: string };
type Query = Record<string, unknown>;

/**
 * Registers the routes in an encapsulated plugin; the upload route has a scope of its own that
 * takes any content type as a raw stream, so no other route's body parsing changes.
 */
export async function registerVolumeContentRoutes(app: FastifyInstance, opts: VolumeContentRouteOptions): Promise<void> {
  const prefix = opts.prefix.replace(/\/+$/, '');
  const maxUploadBytes = opts.maxUploadBytes ?? DEFAULT_MAX_UPLOAD_BYTES;
  const uploadIdleTimeoutMs = opts.uploadIdleTimeoutMs ?? 60_000;

  /** Runs `fn` on the opened volume; releases it when `fn` settles. */
  async function withVolume<T>(req: FastifyRequest<{ Params: Params }>, fn: (content: VolumeContent) => Promise<T>): Promise<T> {
    const volume = await opts.open(volumeIdOf(req.params), req);
    try {
      return await fn(new VolumeContent(volume.root, opts.content));
    } finally {
      await releaseLogged(volume, req);
    }
  }

  await app.register(async (scope) => {
    scope.get<{ Params: Params; Querystring: Query }>(`${prefix}/:volumeID/dir`, async (req) => {
      const path = pathParam(req.query);
      const depth = intParam(req.query, 'depth', 0, LIST_DEPTH.max) ?? 1;
      return withVolume(req, (c) => c.list(path, depth));
    });

    scope.post<{ Params: Params; Querystring: Query }>(`${prefix}/:volumeID/dir`, async (req, reply) => {
      const path = pathParam(req.query);
      const create = createParams(req.query);
      const entry = await withVolume(req, (c) => c.makeDir(path, create));
      return reply.status(201).send(entry);
    });

    scope.get<{ Params: Params; Querystring: Query }>(`${prefix}/:volumeID/path`, async (req) => {
      const path = pathParam(req.query);
      return withVolume(req, (c) => c.stat(path));
    });

    scope.patch<{ Params: Params; Querystring: Query; Body: unknown }>(`${prefix}/:volumeID/path`, async (req) => {
      const path = pathParam(req.query);
      const update = metadataBody(req.body);
      return withVolume(req, (c) => c.updateMetadata(path, update));
    });

    scope.delete<{ Params: Params; Querystring: Query }>(`${prefix}/:volumeID/path`, async (req, reply) => {
      const path = pathParam(req.query);
      await withVolume(req, (c) => c.remove(path));
      return reply.status(204).send();
    });

    scope.get<{ Params: Params; Querystring: Query }>(`${prefix}/:volumeID/file`, { exposeHeadRoute: false }, async (req, reply) => {
      const path = pathParam(req.query);
      const volume = await opts.open(volumeIdOf(req.params), req);
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        void releaseLogged(volume, req);
      };
      try {
        const { stream, size } = await new VolumeContent(volume.root, opts.content).readFile(path);
        // Released once the file is closed (so an unmount in release finds no descriptor open):
        // the stream closes when it ends, or when fastify destroys it as the client goes away;
        // a response that closed without consuming it destroys it here.
        stream.once('close', release);
        reply.raw.once('close', () => { if (!stream.closed) stream.destroy(); });
        return reply.status(200).header('content-type', 'application/octet-stream').header('content-length', String(size)).send(stream);
      } catch (err) {
        release();
        throw err;
      }
    });

    await scope.register(async (raw) => {
      raw.removeAllContentTypeParsers();
      // The handler streams req.raw into the file itself, without fastify's body limit.
      raw.addContentTypeParser('*', (_req, _payload, done) => done(null));
      raw.put<{ Params: Params; Querystring: Query }>(`${prefix}/:volumeID/file`, async (req, reply) => {
        const path = pathParam(req.query);
        const create = createParams(req.query);
        const declared = contentLength(req.headers['content-length']);
        if (declared !== undefined && declared > maxUploadBytes) {
          return sendError(reply, new SvcError(413, `the upload is ${declared} bytes; at most ${maxUploadBytes} are accepted`));
        }
        let reading = false;
        // Not destroyed when the write fails: that would cut the connection before the answer.
        const body = (async function* () {
          reading = true;
          // A sender that stalls without closing would hold the volume and a partial file.
          const idle = setTimeout(() => req.raw.destroy(new Error(`the upload sent nothing for ${uploadIdleTimeoutMs} ms`)), uploadIdleTimeoutMs);
          try {
            for await (const chunk of req.raw.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
              idle.refresh();
              yield chunk;
              idle.refresh();
            }
          } finally {
            clearTimeout(idle);
          }
        })();
        try {
          const entry = await withVolume(req, (c) => c.writeFile(path, body, { ...create, maxBytes: maxUploadBytes }));
          return await reply.status(201).send(entry);
        } catch (err) {
          // Refused before the body was read: node drops the rest once answered. Refused midway:
          // the rest is read (within bounds) so that the answer reaches a client still sending.
          if (reading && !req.raw.complete && !req.raw.destroyed) await drainRequest(req.raw);
          // Sent here: the app's handler words a 413 after its own body limit.
          if (err instanceof SvcError && err.status === 413) return sendError(reply, err);
          throw err;
        }
      });
    });
  });
}

async function releaseLogged(volume: OpenedVolume, req: FastifyRequest): Promise<void> {
  try {
    await volume.release();
  } catch (err) {
    req.log.error({ err, path: req.url?.split('?')[0] }, 'releasing a volume after a content request failed');
  }
}

function volumeIdOf(params: Params): string {
  const id = params.volumeID;
  if (typeof id !== 'string' || id === '') throw badRequest('volumeID is required');
  return id;
}

function single(query: Query, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw badRequest(`query parameter ${name} must be given once`);
  return v;
}

/** The path, normalized (400 for an invalid one) before any volume is opened. */
function pathParam(query: Query): string {
  const path = single(query, 'path');
  if (path === undefined || path === '') throw badRequest('query parameter path is required');
  return normalizeVolumePath(path);
}

function intParam(query: Query, name: string, min: number, max: number): number | undefined {
  const raw = single(query, name);
  if (raw === undefined) return undefined;
  const n = /^\d{1,16}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw badRequest(`query parameter ${name} must be an integer from ${min} to ${max}`);
  return n;
}

function boolParam(query: Query, name: string): boolean | undefined {
  const raw = single(query, name);
  if (raw === undefined) return undefined;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  throw badRequest(`query parameter ${name} must be true or false`);
}

function createParams(query: Query): { uid?: number; gid?: number; mode?: number; force?: boolean } {
  return {
    uid: intParam(query, 'uid', 0, MAX_ID),
    gid: intParam(query, 'gid', 0, MAX_ID),
    mode: intParam(query, 'mode', 0, MAX_MODE),
    force: boolParam(query, 'force'),
  };
}

function metadataBody(body: unknown): MetadataUpdate {
  if (body === undefined || body === null) return {};
  if (typeof body !== 'object' || Array.isArray(body)) throw badRequest('the body must be a JSON object {uid?, gid?, mode?}');
  const b = body as Record<string, unknown>;
  const field = (name: 'uid' | 'gid' | 'mode', max: number): number | undefined => {
    const v = b[name];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max) throw badRequest(`${name} must be an integer from 0 to ${max}`);
    return v;
  };
  return { uid: field('uid', MAX_ID), gid: field('gid', MAX_ID), mode: field('mode', MAX_MODE) };
}

function contentLength(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = /^\d{1,20}$/.test(value) ? Number(value) : NaN;
  if (!Number.isFinite(n)) throw badRequest('content-length must be a non-negative integer');
  return n;
}

