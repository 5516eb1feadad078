/**
 * `sandbox.files`: file contents over envd's `/files` HTTP route, metadata and directory
 * operations over its filesystem.Filesystem service.
 */
import { readBodyText, readErrorBody } from './bounded-body.ts';
import { ConnectError, FileNotFoundError, InvalidArgumentError, SandboxError, errorFromHttp } from './errors.ts';
import { FILESYSTEM, decodeEntryInfo, decodeFileType } from './envd/messages.ts';
import { EnvdTransport, dataPlaneError, mapEnvdError, userHeader, type RequestBody } from './envd/transport.ts';
import type {
  EntryInfo, FilesystemEvent, FilesystemListOpts, FilesystemRequestOpts, WatchOpts, WriteData, WriteEntry, WriteInfo,
} from './types.ts';
import { WatchHandle } from './watch-handle.ts';

const DEFAULT_WATCH_TIMEOUT_MS = 60_000;
const MAX_UPLOAD_ANSWER_BYTES = 1024 * 1024;

type ReadFormat = 'text' | 'bytes' | 'blob' | 'stream';

export class Filesystem {
  constructor(private readonly transport: EnvdTransport) {}

  read(path: string, opts?: FilesystemRequestOpts & { format?: 'text' }): Promise<string>;
  read(path: string, opts: FilesystemRequestOpts & { format: 'bytes' }): Promise<Uint8Array>;
  read(path: string, opts: FilesystemRequestOpts & { format: 'blob' }): Promise<Blob>;
  read(path: string, opts: FilesystemRequestOpts & { format: 'stream' }): Promise<ReadableStream<Uint8Array>>;
  async read(path: string, opts: FilesystemRequestOpts & { format?: ReadFormat } = {}): Promise<unknown> {
    const format = opts.format ?? 'text';
    // A streamed read must outlive the request deadline, so only the caller's signal applies.
    const res = await this.transport.http('GET', '/files', {
      query: { path, username: opts.user },
      requestTimeoutMs: format === 'stream' ? 0 : opts.requestTimeoutMs,
      signal: opts.signal,
    });
    if (!res.ok) throw await filesError(res);
    switch (format) {
      case 'bytes': return new Uint8Array(await res.arrayBuffer());
      case 'blob': return res.blob();
      case 'stream': return res.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() });
      default: return res.text();
    }
  }

  /** Writes one file (parents are created, an existing file is replaced). */
  write(path: string, data: WriteData, opts?: FilesystemRequestOpts): Promise<WriteInfo>;
  /** Writes several files. */
  write(files: WriteEntry[], opts?: FilesystemRequestOpts): Promise<WriteInfo[]>;
  async write(
    pathOrFiles: string | WriteEntry[],
    dataOrOpts?: WriteData | FilesystemRequestOpts,
    maybeOpts?: FilesystemRequestOpts,
  ): Promise<WriteInfo | WriteInfo[]> {
    if (typeof pathOrFiles === 'string') {
      if (dataOrOpts === undefined) throw new InvalidArgumentError('write(path, data): data is required');
      return this.writeOne(pathOrFiles, dataOrOpts as WriteData, maybeOpts ?? {});
    }
    if (!Array.isArray(pathOrFiles)) throw new InvalidArgumentError('write needs a path and data, or a list of {path, data}');
    const opts = (dataOrOpts ?? {}) as FilesystemRequestOpts;
    const out: WriteInfo[] = [];
    for (const f of pathOrFiles) out.push(await this.writeOne(f.path, f.data, opts));
    return out;
  }

  /** e2b's name for writing several files. */
  writeFiles(files: WriteEntry[], opts?: FilesystemRequestOpts): Promise<WriteInfo[]> {
    return this.write(files, opts);
  }

  async list(path: string, opts: FilesystemListOpts = {}): Promise<EntryInfo[]> {
    if (opts.depth !== undefined && opts.depth < 1) throw new InvalidArgumentError('depth must be at least 1');
    const res = await this.call<{ entries?: unknown[] }>('ListDir', { path, depth: opts.depth ?? 1 }, opts, opts.maxBytes);
    return (res.entries ?? []).map(decodeEntryInfo).filter((e) => e.type !== undefined);
  }

  /** Creates the directory and its parents; false when it already existed. */
  async makeDir(path: string, opts: FilesystemRequestOpts = {}): Promise<boolean> {
    try {
      await this.transport.unary(`${FILESYSTEM}/MakeDir`, { path }, { ...opts, headers: userHeader(opts.user) });
      return true;
    } catch (err) {
      if (err instanceof ConnectError && err.connectCode === 'already_exists') return false;
      throw mapEnvdError(err, { notFound: FileNotFoundError });
    }
  }

  async rename(oldPath: string, newPath: string, opts: FilesystemRequestOpts = {}): Promise<EntryInfo> {
    const res = await this.call<{ entry?: unknown }>('Move', { source: oldPath, destination: newPath }, opts);
    if (!res.entry) throw new SandboxError('envd did not describe the moved entry');
    return decodeEntryInfo(res.entry);
  }

  async remove(path: string, opts: FilesystemRequestOpts = {}): Promise<void> {
    await this.call('Remove', { path }, opts);
  }

  async exists(path: string, opts: FilesystemRequestOpts = {}): Promise<boolean> {
    try {
      await this.transport.unary(`${FILESYSTEM}/Stat`, { path }, { ...opts, headers: userHeader(opts.user) });
      return true;
    } catch (err) {
      if (err instanceof ConnectError && err.connectCode === 'not_found') return false;
      throw mapEnvdError(err, { notFound: FileNotFoundError });
    }
  }

  async getInfo(path: string, opts: FilesystemRequestOpts = {}): Promise<EntryInfo> {
    const res = await this.call<{ entry?: unknown }>('Stat', { path }, opts);
    if (!res.entry) throw new SandboxError('envd did not describe the entry');
    return decodeEntryInfo(res.entry);
  }

  /** Calls `onEvent` for every change in `path` until `stop()` or the watch's `timeoutMs`. */
  async watchDir(path: string, onEvent: (event: FilesystemEvent) => void | Promise<void>, opts: WatchOpts = {}): Promise<WatchHandle> {
    const stream = this.transport.stream<unknown>(`${FILESYSTEM}/WatchDir`, { path, recursive: opts.recursive ?? false }, {
      headers: userHeader(opts.user),
      timeoutMs: opts.timeoutMs ?? DEFAULT_WATCH_TIMEOUT_MS,
      requestTimeoutMs: opts.requestTimeoutMs,
      signal: opts.signal,
    });
    try {
      for (;;) {
        const first = (await stream.next()) as Record<string, unknown> | undefined;
        if (first === undefined) throw new SandboxError('the watch stream ended before it started');
        if (first.keepalive) continue;
        if (!first.start) throw new SandboxError('envd did not start the watch stream with a start event');
        break;
      }
    } catch (err) {
      stream.close();
      throw mapEnvdError(err, { notFound: FileNotFoundError });
    }
    stream.markStarted();
    return new WatchHandle(stream, onEvent, opts.onExit);
  }

  private async writeOne(path: string, data: WriteData, opts: FilesystemRequestOpts): Promise<WriteInfo> {
    const body = toBody(data);
    const res = await this.transport.http('POST', '/files', {
      query: { path, username: opts.user },
      headers: { 'Content-Type': 'application/octet-stream' },
      body,
      // a streamed upload must outlive the request deadline
      requestTimeoutMs: body instanceof ReadableStream ? 0 : opts.requestTimeoutMs,
      signal: opts.signal,
    });
    if (!res.ok) throw await filesError(res);
    // a short JSON list of what was written: a larger answer is not envd's
    const text = await readBodyText(res, MAX_UPLOAD_ANSWER_BYTES, 'POST /files');
    let written: unknown;
    try {
      written = text ? JSON.parse(text) : [];
    } catch {
      throw new SandboxError('envd answered the upload with invalid JSON', { status: res.status });
    }
    const first = Array.isArray(written) ? written[0] : written;
    if (!first || typeof first !== 'object') return { name: path.split('/').pop() ?? path, path };
    const f = first as { name?: string; path?: string; type?: unknown };
    return { name: String(f.name ?? ''), path: String(f.path ?? path), type: decodeFileType(f.type) };
  }

  private async call<T>(method: string, message: unknown, opts: FilesystemRequestOpts, maxBytes?: number): Promise<T> {
    try {
      return await this.transport.unary<T>(`${FILESYSTEM}/${method}`, message, {
        requestTimeoutMs: opts.requestTimeoutMs, signal: opts.signal, headers: userHeader(opts.user), maxBytes,
      });
    } catch (err) {
      throw mapEnvdError(err, { notFound: FileNotFoundError });
    }
  }
}

function toBody(data: WriteData): RequestBody {
  if (typeof data === 'string' || data instanceof Blob || data instanceof ReadableStream) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return data;
}

async function filesError(res: Response): Promise<SandboxError> {
  const text = await readErrorBody(res);
  if (res.status === 404) return errorFromHttp(404, text, { notFound: FileNotFoundError });
  return dataPlaneError(res.status, text);
}
