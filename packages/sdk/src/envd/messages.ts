/**
 * envd's protobuf messages in their JSON form (proto3 JSON mapping: lowerCamelCase names,
 * bytes as base64, enums by name, int64 as strings, oneof members as plain fields), and
 * the conversions into the SDK's public types. Decoders accept the original snake_case
 * names and numeric enums too, as the JSON mapping allows.
 */
import { FileType, FilesystemEventType, type EntryInfo, type ProcessInfo } from '../types.ts';

export const PROCESS = 'process.Process';
export const FILESYSTEM = 'filesystem.Filesystem';

// ------------------------------------------------------------------ process

interface ProcessConfigJson {
  cmd: string;
  args?: string[];
  envs?: Record<string, string>;
  cwd?: string;
}

export interface StartRequestJson {
  process: ProcessConfigJson;
  pty?: { size: { cols: number; rows: number } };
  tag?: string;
  stdin?: boolean;
}

export type ProcessEvent =
  | { type: 'start'; pid: number }
  | { type: 'stdout' | 'stderr' | 'pty'; data: Uint8Array }
  | { type: 'end'; exitCode: number; exited: boolean; status: string; error?: string }
  | { type: 'keepalive' };

/** `{event: ProcessEvent}` of StartResponse and ConnectResponse. */
export function decodeProcessEvent(message: unknown): ProcessEvent | undefined {
  const ev = (message as { event?: Record<string, any> } | undefined)?.event;
  if (!ev || typeof ev !== 'object') return undefined;
  if (ev.start) return { type: 'start', pid: Number(ev.start.pid ?? 0) };
  if (ev.data) {
    for (const kind of ['stdout', 'stderr', 'pty'] as const) {
      if (typeof ev.data[kind] === 'string') return { type: kind, data: fromBase64(ev.data[kind]) };
    }
    return undefined;
  }
  if (ev.end) {
    const end = ev.end;
    return {
      type: 'end',
      exitCode: Number(end.exitCode ?? end.exit_code ?? 0),
      exited: Boolean(end.exited),
      status: String(end.status ?? ''),
      error: typeof end.error === 'string' && end.error ? end.error : undefined,
    };
  }
  if (ev.keepalive) return { type: 'keepalive' };
  return undefined;
}

export function decodeProcessInfo(p: any): ProcessInfo {
  const config = p?.config ?? {};
  const info: ProcessInfo = {
    pid: Number(p?.pid ?? 0),
    cmd: String(config.cmd ?? ''),
    args: Array.isArray(config.args) ? config.args.map(String) : [],
    envs: config.envs ?? {},
  };
  if (p?.tag) info.tag = String(p.tag);
  if (config.cwd) info.cwd = String(config.cwd);
  return info;
}

export const SIGKILL = 'SIGNAL_SIGKILL';

// ------------------------------------------------------------------ filesystem

const fileTypes: Record<string, FileType> = {
  FILE_TYPE_FILE: FileType.FILE, '1': FileType.FILE,
  FILE_TYPE_DIRECTORY: FileType.DIR, '2': FileType.DIR,
  FILE_TYPE_SYMLINK: FileType.SYMLINK, '3': FileType.SYMLINK,
  // /files answers use the short names
  file: FileType.FILE, dir: FileType.DIR, directory: FileType.DIR, symlink: FileType.SYMLINK,
};

export function decodeFileType(t: unknown): FileType | undefined {
  return t === undefined || t === null ? undefined : fileTypes[String(t)];
}

const eventTypes: Record<string, FilesystemEventType> = {
  EVENT_TYPE_CREATE: FilesystemEventType.CREATE, '1': FilesystemEventType.CREATE,
  EVENT_TYPE_WRITE: FilesystemEventType.WRITE, '2': FilesystemEventType.WRITE,
  EVENT_TYPE_REMOVE: FilesystemEventType.REMOVE, '3': FilesystemEventType.REMOVE,
  EVENT_TYPE_RENAME: FilesystemEventType.RENAME, '4': FilesystemEventType.RENAME,
  EVENT_TYPE_CHMOD: FilesystemEventType.CHMOD, '5': FilesystemEventType.CHMOD,
};

export function decodeEventType(t: unknown): FilesystemEventType | undefined {
  return t === undefined || t === null ? undefined : eventTypes[String(t)];
}

export function decodeEntryInfo(e: any): EntryInfo {
  const modified = e?.modifiedTime ?? e?.modified_time;
  const symlink = e?.symlinkTarget ?? e?.symlink_target;
  const info: EntryInfo = {
    name: String(e?.name ?? ''),
    type: decodeFileType(e?.type),
    path: String(e?.path ?? ''),
    size: Number(e?.size ?? 0),
    mode: Number(e?.mode ?? 0),
    permissions: String(e?.permissions ?? ''),
    owner: String(e?.owner ?? ''),
    group: String(e?.group ?? ''),
  };
  if (modified) info.modifiedTime = decodeTimestamp(modified);
  if (symlink) info.symlinkTarget = String(symlink);
  return info;
}

/** google.protobuf.Timestamp: an RFC 3339 string in JSON, `{seconds, nanos}` from lenient servers. */
function decodeTimestamp(t: unknown): Date | undefined {
  if (typeof t === 'string') return new Date(t);
  if (t && typeof t === 'object' && 'seconds' in t) {
    const { seconds, nanos } = t as { seconds: string | number; nanos?: number };
    return new Date(Number(seconds) * 1000 + Math.floor((nanos ?? 0) / 1e6));
  }
  return undefined;
}

// ------------------------------------------------------------------ bytes

export function toBase64(data: Uint8Array | string): string {
  return (typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data.buffer, data.byteOffset, data.byteLength)).toString('base64');
}

function fromBase64(s: string): Uint8Array {
  const b = Buffer.from(s, 'base64');
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}
