import { open, stat, type FileHandle } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { basename, dirname } from 'node:path';
import { ConnectError, toConnectError } from '../connect/code.ts';
import { decodedBody, forEachChunk } from '../connect/body.ts';
import { identityOf } from '../filesystem/entry.ts';
import type { MetadataStore } from '../filesystem/metadata-store.ts';
import type { EnvdState } from '../state.ts';
import { ensureDirs, resolvePath } from '../system/paths.ts';
import type { User } from '../system/users.ts';
import { checkFileAccess } from './file-access.ts';
import { metadataFromHeaders } from './metadata-headers.ts';
import { MultipartReader, multipartBoundary, type PartSink } from './multipart.ts';
import { HttpError, sendJson } from './respond.ts';
import { whenMissing } from '@svc/common/missing';

interface Uploaded {
  path: string;
  name: string;
  type: 'file';
  metadata?: { [key: string]: string };
}

interface UploadContext {
  user: User;
  metadata: { [key: string]: string } | undefined;
  store: MetadataStore;
  contentLength: number | undefined;
}

/**
 * POST /files: one raw body (`application/octet-stream`, path in the query) or a multipart form
 * with one or more `file` parts (path in the query, or each part's filename). Bodies are written
 * to disk as they arrive; parent directories are created and everything is owned by the user.
 */
export async function handleUpload(state: EnvdState, store: MetadataStore, req: IncomingMessage, res: ServerResponse, query: URLSearchParams): Promise<void> {
  const queryPath = query.get('path') ?? undefined;
  const username = query.get('username') ?? undefined;
  checkFileAccess(state, req, query);
  let body: AsyncIterable<Buffer>;
  try {
    body = decodedBody(req, req.headers['content-encoding']);
  } catch (err) {
    throw new ConnectError('invalid_argument', `error decompressing request body: ${(err as Error).message}`);
  }
  const user = state.user(username);
  const length = Number(req.headers['content-length']);
  const ctx: UploadContext = {
    user,
    metadata: metadataFromHeaders(req.headersDistinct),
    store,
    contentLength: Number.isFinite(length) && length > 0 ? length : undefined,
  };

  const contentType = req.headers['content-type'] ?? '';
  const mediaType = contentType.split(';')[0]!.trim().toLowerCase();
  let uploaded: Uploaded[];
  if (mediaType === 'application/octet-stream') {
    if (queryPath === undefined) throw new ConnectError('invalid_argument', 'path query parameter is required for raw body upload');
    const path = resolvePath(queryPath, user, state.defaultWorkdir);
    const file = await createTarget(path, ctx);
    await forEachChunk(body, (chunk) => file.write(chunk));
    uploaded = [await file.end()];
  } else if (mediaType.startsWith('multipart/')) {
    uploaded = await receiveMultipart(body, multipartBoundary(contentType), queryPath, state, ctx);
  } else {
    throw new ConnectError('invalid_argument', `unsupported content type: ${contentType || '(none)'}, expected multipart/form-data or application/octet-stream`);
  }
  sendJson(res, 200, uploaded);
}

async function receiveMultipart(body: AsyncIterable<Buffer>, boundary: string, queryPath: string | undefined, state: EnvdState, ctx: UploadContext): Promise<Uploaded[]> {
  const uploaded: Uploaded[] = [];
  const skip: PartSink = { write: async () => {}, end: async () => {} };
  const reader = new MultipartReader(boundary, async (part) => {
    if (part.name !== 'file') return skip;
    const requested = queryPath ?? part.filename;
    if (requested === undefined) throw new ConnectError('invalid_argument', 'filename not found in Content-Disposition header');
    const path = resolvePath(requested, ctx.user, state.defaultWorkdir);
    if (uploaded.some((u) => u.path === path)) {
      throw new ConnectError('invalid_argument', `you cannot upload multiple files to the same path '${path}' in one upload request`);
    }
    const file = await createTarget(path, ctx);
    return { write: (data) => file.write(data), end: async () => void uploaded.push(await file.end()) };
  });
  await forEachChunk(body, (chunk) => reader.write(chunk));
  await reader.end();
  return uploaded;
}

const writeBatchBytes = 256 * 1024;

interface TargetFile {
  write(data: Buffer): Promise<void>;
  end(): Promise<Uploaded>;
}

async function createTarget(path: string, ctx: UploadContext): Promise<TargetFile> {
  const { uid, gid } = ctx.user;
  try {
    await ensureDirs(dirname(path), uid, gid);
  } catch (err) {
    throw diskError(err, ctx, `error ensuring directories for '${path}'`);
  }
  const existing = await stat(path).catch(whenMissing(undefined));
  if (existing?.isDirectory()) throw new ConnectError('invalid_argument', `path is a directory: ${path}`);
  let handle: FileHandle;
  try {
    handle = await open(path, 'w', 0o666);
    await handle.chown(uid, gid);
  } catch (err) {
    throw diskError(err, ctx, `error opening file '${path}'`);
  }
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await handle.close();
  };
  // Network chunks are small; gather them so the disk sees fewer, larger writes.
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const flush = async () => {
    if (pendingBytes === 0) return;
    const buffers = pending;
    pending = [];
    pendingBytes = 0;
    try {
      await handle.writev(buffers);
    } catch (err) {
      await close().catch(() => { /* the upload has failed already; that failure is the answer */ });
      throw diskError(err, ctx, `error writing file '${path}'`);
    }
  };
  return {
    async write(data) {
      pending.push(data);
      pendingBytes += data.length;
      if (pendingBytes >= writeBatchBytes) await flush();
    },
    async end() {
      await flush();
      try {
        ctx.store.set(identityOf(await handle.stat({ bigint: true })), ctx.metadata);
      } finally {
        await close();
      }
      return { path, name: basename(path), type: 'file', ...(ctx.metadata ? { metadata: ctx.metadata } : {}) };
    },
  };
}

/** ENOSPC and quota errors become 507 (the SDK's NotEnoughSpaceError). */
function diskError(err: unknown, ctx: UploadContext, context: string): Error {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOSPC' || code === 'EDQUOT') {
    const attempted = ctx.contentLength ? `attempted to write ${ctx.contentLength} bytes: ` : '';
    return new HttpError(507, `${attempted}not enough disk space available`);
  }
  return toConnectError(err, context);
}
