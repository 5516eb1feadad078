import type { BigIntStats } from 'node:fs';
import { lstat, realpath, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { ConnectError, toConnectError } from '../connect/code.ts';
import { FileType, type EntryInfoSchema } from '@svc/contracts/envd/filesystem/filesystem_pb';
import type { UserDatabase } from '../system/users.ts';
import { goModeString } from './file-mode.ts';
import type { FileIdentity, MetadataStore } from './metadata-store.ts';

export type EntryInit = MessageInitShape<typeof EntryInfoSchema>;

/** Builds EntryInfo the way E2B's envd does: symlinks report their target's type and mode. */
export class EntryReader {
  constructor(
    private readonly users: UserDatabase,
    private readonly metadata: MetadataStore,
  ) {}

  /** Entry for `path`; `not_found` if it does not exist. */
  async read(path: string): Promise<EntryInit> {
    let info: BigIntStats;
    try {
      info = await lstat(path, { bigint: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') {
        throw new ConnectError('not_found', `file not found: ${path}`);
      }
      throw toConnectError(err, 'error getting file info');
    }
    return this.fromStats(path, info);
  }

  /** Like `read`, but undefined when the entry vanished in the meantime. */
  async readIfExists(path: string): Promise<EntryInit | undefined> {
    try {
      return await this.read(path);
    } catch (err) {
      if (err instanceof ConnectError && err.code === 'not_found') return undefined;
      throw err;
    }
  }

  private async fromStats(path: string, info: BigIntStats): Promise<EntryInit> {
    let type = typeOf(info);
    let mode = Number(info.mode & 0o777n);
    let symlinkTarget: string | undefined;
    if (info.isSymbolicLink()) {
      symlinkTarget = await realpath(path).catch(() => path);
      try {
        const target = await stat(symlinkTarget, { bigint: true });
        type = typeOf(target);
        mode = Number(target.mode & 0o777n);
      } catch {
        type = FileType.UNSPECIFIED;
        mode = 0;
      }
    }
    const uid = Number(info.uid);
    const gid = Number(info.gid);
    const metadata = this.metadata.get(identityOf(info));
    return {
      name: basename(path),
      type,
      path,
      size: info.size,
      mode,
      permissions: goModeString(Number(info.mode)),
      owner: this.users.nameOfUid(uid) ?? String(uid),
      group: this.users.nameOfGid(gid) ?? String(gid),
      modifiedTime: { seconds: info.mtimeNs / 1_000_000_000n, nanos: Number(info.mtimeNs % 1_000_000_000n) },
      symlinkTarget,
      metadata: metadata ?? {},
    };
  }
}

export function identityOf(info: BigIntStats): FileIdentity {
  return { dev: info.dev, ino: info.ino, birthtimeNs: info.birthtimeNs };
}

function typeOf(info: BigIntStats): FileType {
  if (info.isFile()) return FileType.FILE;
  if (info.isDirectory()) return FileType.DIRECTORY;
  if (info.isSymbolicLink()) return FileType.SYMLINK;
  return FileType.UNSPECIFIED;
}
