import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { basename, extname } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { ConnectError, toConnectError } from '../connect/code.ts';
import type { EnvdState } from '../state.ts';
import { resolvePath } from '../system/paths.ts';
import { chooseResponseEncoding, identityAcceptable } from './encoding.ts';
import { checkFileAccess } from './file-access.ts';
import { HttpError, sendError } from './respond.ts';

// Already compressed: gzipping them again only costs the sandbox CPU.
const compressedTypes = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'application/zip', 'application/gzip', 'application/pdf']);

const contentTypes: Record<string, string> = {
  '.txt': 'text/plain; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.json': 'application/json',
  '.xml': 'text/xml; charset=utf-8',
  '.csv': 'text/csv; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.svg': 'image/svg+xml',
  '.webp': 'image/webp',
  '.pdf': 'application/pdf',
  '.zip': 'application/zip',
  '.gz': 'application/gzip',
  '.tar': 'application/x-tar',
  '.wasm': 'application/wasm',
};

/** GET /files: streams a file, gzipped when the client prefers it, with single-range support. */
export async function handleDownload(state: EnvdState, req: IncomingMessage, res: ServerResponse, query: URLSearchParams): Promise<void> {
  const path = query.get('path') ?? '';
  const username = query.get('username') ?? undefined;
  checkFileAccess(state, req, query);
  const user = state.user(username);
  const file = resolvePath(path, user, state.defaultWorkdir);
  let info;
  try {
    info = await stat(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new ConnectError('not_found', `path '${file}' does not exist`);
    throw toConnectError(err, `error getting file info of '${file}'`);
  }
  if (info.isDirectory()) throw new ConnectError('invalid_argument', `path '${file}' is a directory`);
  // A device or a pipe could stream without end (/dev/zero); only regular files are served.
  if (!info.isFile()) throw new ConnectError('invalid_argument', `path '${file}' is not a regular file`);
  // Files of /proc and /sys say size 0 and have content: their length is known only once read.
  const sizeKnown = info.size > 0;

  const acceptEncoding = req.headers['accept-encoding'];
  const contentType = contentTypes[extname(file).toLowerCase()] ?? 'application/octet-stream';
  let encoding = chooseResponseEncoding(acceptEncoding);
  if (encoding === 'gzip' && (compressedTypes.has(contentType) || info.size < 1024) && identityAcceptable(acceptEncoding)) encoding = 'identity';
  const rangeHeader = sizeKnown ? req.headers.range : undefined;
  if (rangeHeader) {
    if (!identityAcceptable(acceptEncoding)) throw new HttpError(406, 'identity encoding not acceptable for Range request');
    encoding = 'identity';
  }

  const headers: Record<string, string | number> = {
    'content-type': contentType,
    'content-disposition': `inline; filename*=UTF-8''${encodeURIComponent(basename(file))}`,
    'last-modified': info.mtime.toUTCString(),
    'accept-ranges': 'bytes',
    vary: 'Accept-Encoding',
  };
  let range: { start: number; end: number } | undefined;
  if (rangeHeader) {
    range = parseRange(rangeHeader, info.size);
    if (!range) {
      res.setHeader('content-range', `bytes */${info.size}`);
      sendError(res, 416, `range ${rangeHeader.slice(0, 100)} is not satisfiable for a file of ${info.size} bytes`);
      return;
    }
  }

  const source = createReadStream(file, range ? { start: range.start, end: range.end } : {});
  await new Promise<void>((resolve, reject) => {
    source.once('open', () => resolve());
    source.once('error', reject);
  }).catch((err) => {
    throw toConnectError(err, `error opening file '${file}'`);
  });

  if (encoding === 'gzip') {
    res.writeHead(200, { ...headers, 'content-encoding': 'gzip' });
    // A HEAD's body is dropped by node without back-pressure: compressing the file for it kept a
    // core busy per request, as fast as it could read, for a caller that got nothing.
    if (req.method === 'HEAD') {
      source.destroy();
      res.end();
      return;
    }
    // Level 1: most of the size win for a fraction of the CPU of the default level.
    await pipeline(source, createGzip({ level: 1 }), res).catch(() => res.destroy());
    return;
  }
  if (range) {
    res.writeHead(206, { ...headers, 'content-range': `bytes ${range.start}-${range.end}/${info.size}`, 'content-length': range.end - range.start + 1 });
  } else {
    res.writeHead(200, sizeKnown ? { ...headers, 'content-length': info.size } : headers);
  }
  if (req.method === 'HEAD') {
    source.destroy();
    res.end();
    return;
  }
  await pipeline(source, res).catch(() => res.destroy());
}

/** One "bytes=a-b" range (also "a-" and "-n"); undefined when unsatisfiable or malformed. */
function parseRange(header: string, size: number): { start: number; end: number } | undefined {
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  let start: number;
  let end: number;
  if (match[1] === '') {
    const suffix = Number(match[2]);
    if (suffix === 0) return undefined;
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(match[1]);
    end = match[2] === '' ? size - 1 : Math.min(Number(match[2]), size - 1);
  }
  if (start > end || start >= size) return undefined;
  return { start, end };
}
