import type { IncomingMessage, ServerResponse } from 'node:http';
import { ConnectError } from '../connect/code.ts';
import { decodedBody, forEachChunk } from '../connect/body.ts';
import type { MetadataStore } from '../filesystem/metadata-store.ts';
import type { EnvdState } from '../state.ts';
import { resolvePath } from '../system/paths.ts';
import { callerOf } from '../system/user-access.ts';
import type { User } from '../system/users.ts';
import { checkFileAccess } from './file-access.ts';
import { metadataFromHeaders } from './metadata-headers.ts';
import { MultipartReader, multipartBoundary, type PartSink } from './multipart.ts';
import { HttpError, sendJson } from './respond.ts';
import { createTarget, type UploadContext, type Uploaded } from './upload-target.ts';

/**
 * Parts one multipart upload may have. The SDK's `files.write([...])` sends every file as one
 * part of one request, so the cap sits far above what one call usually sends; it bounds the
 * answer (one entry a file) and the set of paths kept to refuse duplicates.
 */
const MAX_PARTS = 10_000;

/**
 * POST /files: one raw body (`application/octet-stream`, path in the query) or a multipart form
 * with one or more `file` parts (path in the query, or each part's filename). Bodies are written
 * to disk as they arrive; parent directories are created and what is created is the user's.
 * Each file is written only where the user itself could have (upload-target.ts).
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
    who: callerOf(user, state.users),
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
    uploaded = await receiveMultipart(body, multipartBoundary(contentType), queryPath, user, state, ctx);
  } else {
    throw new ConnectError('invalid_argument', `unsupported content type: ${contentType || '(none)'}, expected multipart/form-data or application/octet-stream`);
  }
  sendJson(res, 200, uploaded);
}

async function receiveMultipart(body: AsyncIterable<Buffer>, boundary: string, queryPath: string | undefined, user: User, state: EnvdState, ctx: UploadContext): Promise<Uploaded[]> {
  const uploaded: Uploaded[] = [];
  const paths = new Set<string>();
  let parts = 0;
  const skip: PartSink = { write: async () => {}, end: async () => {} };
  const reader = new MultipartReader(boundary, async (part) => {
    if (++parts > MAX_PARTS) throw new HttpError(413, `a multipart upload may have at most ${MAX_PARTS} parts; send the files in several requests`);
    if (part.name !== 'file') return skip;
    const requested = queryPath ?? part.filename;
    if (requested === undefined) throw new ConnectError('invalid_argument', 'filename not found in Content-Disposition header');
    const path = resolvePath(requested, user, state.defaultWorkdir);
    if (paths.has(path)) {
      throw new ConnectError('invalid_argument', `you cannot upload multiple files to the same path '${path}' in one upload request`);
    }
    paths.add(path);
    const file = await createTarget(path, ctx);
    return { write: (data) => file.write(data), end: async () => void uploaded.push(await file.end()) };
  });
  await forEachChunk(body, (chunk) => reader.write(chunk));
  await reader.end();
  return uploaded;
}
