/**
 * The SDK's types and options of envd's calls (commands, terminals, files), shaped like the e2b
 * SDK's; re-exported by types.ts with the rest of the SDK's data types.
 */

// ---------------------------------------------------------------- envd: commands and pty

export type Username = string;

export interface RequestOpts {
  requestTimeoutMs?: number;
  signal?: AbortSignal;
}

export interface CommandStartOpts extends RequestOpts {
  background?: boolean;
  cwd?: string;
  user?: Username;
  envs?: Record<string, string>;
  onStdout?: (data: string) => void | Promise<void>;
  onStderr?: (data: string) => void | Promise<void>;
  /** Keep stdin open for `sendStdin`. Default false. */
  stdin?: boolean;
  /** Lifetime of the command's stream in milliseconds; 0 disables it. Default 60 000. */
  timeoutMs?: number;
  /**
   * svc's own (the e2b SDK has none): false hands the output to `onStdout`/`onStderr` only, and the
   * handle's `stdout`/`stderr` and the result's stay empty, for a caller that keeps what it needs
   * itself (a command printing for an hour would otherwise be held whole in memory). Default true.
   */
  keepOutput?: boolean;
}

export type CommandConnectOpts = Pick<CommandStartOpts, 'onStdout' | 'onStderr' | 'timeoutMs' | 'keepOutput'> & RequestOpts;

export interface ProcessInfo {
  pid: number;
  tag?: string;
  cmd: string;
  args: string[];
  envs: Record<string, string>;
  cwd?: string;
}

export interface PtyCreateOpts extends RequestOpts {
  cols: number;
  rows: number;
  onData: (data: Uint8Array) => void | Promise<void>;
  timeoutMs?: number;
  user?: Username;
  envs?: Record<string, string>;
  cwd?: string;
}

export type PtyConnectOpts = Pick<PtyCreateOpts, 'onData' | 'timeoutMs'> & RequestOpts;

// ---------------------------------------------------------------- envd: filesystem

export enum FileType {
  FILE = 'file',
  DIR = 'dir',
  SYMLINK = 'symlink',
}

export interface WriteInfo {
  name: string;
  type?: FileType;
  path: string;
}

export interface EntryInfo extends WriteInfo {
  size: number;
  mode: number;
  permissions: string;
  owner: string;
  group: string;
  modifiedTime?: Date;
  symlinkTarget?: string;
}

export type WriteData = string | ArrayBuffer | Uint8Array | Blob | ReadableStream<Uint8Array>;
export interface WriteEntry {
  path: string;
  data: WriteData;
}

export interface FilesystemRequestOpts extends RequestOpts {
  user?: Username;
}

export interface FilesystemListOpts extends FilesystemRequestOpts {
  depth?: number;
  /**
   * svc's own (the e2b SDK has none): the largest listing read, in bytes of envd's answer; a larger
   * one rejects with a SandboxError of code 'too_large' before it is parsed. Default 64 MiB, the
   * most envd sends in one message.
   */
  maxBytes?: number;
}

export enum FilesystemEventType {
  CHMOD = 'chmod',
  CREATE = 'create',
  REMOVE = 'remove',
  RENAME = 'rename',
  WRITE = 'write',
}

export interface FilesystemEvent {
  name: string;
  type: FilesystemEventType;
}

export interface WatchOpts extends FilesystemRequestOpts {
  /** Lifetime of the watch in milliseconds; 0 disables it. Default 60 000. */
  timeoutMs?: number;
  recursive?: boolean;
  onExit?: (err?: Error) => void | Promise<void>;
}
