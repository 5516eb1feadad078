import { cp, lstat, realpath, rename, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { ConnectError, toConnectError } from '../connect/code.ts';
import type { ServiceImpl } from '../connect/router.ts';
import type { Filesystem } from '@svc/contracts/envd/filesystem/filesystem_pb';
import type { EnvdState } from '../state.ts';
import { ensureDirs, resolvePath } from '../system/paths.ts';
import { identityOf, type EntryReader } from './entry.ts';
import { listTree } from './listing.ts';
import type { MetadataStore } from './metadata-store.ts';
import { checkWatchTarget } from './watch-target.ts';
import { eventConverter } from './watch-events.ts';
import { streamWatch } from './watch-stream.ts';
import type { WatcherRegistry } from './watcher-registry.ts';
import { whenMissing } from '@svc/common/missing';

/**
 * filesystem.Filesystem. Like E2B's envd, operations run with envd's own (root) rights; the
 * calling user decides how relative paths resolve and who owns directories created for them.
 */
export function filesystemService(state: EnvdState, entries: EntryReader, metadata: MetadataStore, watchers: WatcherRegistry): ServiceImpl<typeof Filesystem> {
  const resolveFor = (path: string, headers: Parameters<EnvdState['userFromHeaders']>[0]) => {
    const user = state.userFromHeaders(headers);
    return { user, path: resolvePath(path, user, state.defaultWorkdir) };
  };

  return {
    async stat(request, ctx) {
      const { path } = resolveFor(request.path, ctx.requestHeaders);
      return { entry: await entries.read(path) };
    },

    async makeDir(request, ctx) {
      const { user, path } = resolveFor(request.path, ctx.requestHeaders);
      const existing = await stat(path).catch(whenMissing(undefined));
      if (existing?.isDirectory()) throw new ConnectError('already_exists', `directory already exists: ${path}`);
      if (existing) throw new ConnectError('invalid_argument', `path already exists but it is not a directory: ${path}`);
      await ensureDirs(path, user.uid, user.gid).catch((err) => {
        throw toConnectError(err, 'error creating directory');
      });
      return { entry: await entries.read(path) };
    },

    async move(request, ctx) {
      const { user, path: source } = resolveFor(request.source, ctx.requestHeaders);
      const destination = resolvePath(request.destination, user, state.defaultWorkdir);
      await ensureDirs(dirname(destination), user.uid, user.gid);
      try {
        await rename(source, destination);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') throw new ConnectError('not_found', `source file not found: ${source}`);
        if (code !== 'EXDEV') throw toConnectError(err, 'error renaming');
        // Different filesystems (e.g. onto a volume): copy, then remove the original.
        try {
          await cp(source, destination, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true, force: true });
          await rm(source, { recursive: true, force: true });
        } catch (cpErr) {
          // Node's cp refuses a file onto a directory and the like with ERR_FS_CP_* codes: the caller's mistake.
          if ((cpErr as NodeJS.ErrnoException).code?.startsWith('ERR_FS_CP_')) {
            throw new ConnectError('invalid_argument', `cannot move ${source} to ${destination}: ${(cpErr as Error).message}`);
          }
          throw toConnectError(cpErr, 'error moving across filesystems');
        }
      }
      return { entry: await entries.read(destination) };
    },

    async listDir(request, ctx) {
      const depth = request.depth || 1;
      const { path } = resolveFor(request.path, ctx.requestHeaders);
      let real: string;
      try {
        real = await realpath(path);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' || code === 'ENOTDIR') throw new ConnectError('not_found', `path not found: ${path}`);
        if (code === 'ELOOP') throw new ConnectError('failed_precondition', `cyclic symlink or too many links at ${path}`);
        throw toConnectError(err, 'error resolving symlink');
      }
      const info = await stat(real);
      if (!info.isDirectory()) throw new ConnectError('invalid_argument', `path is not a directory: ${path}`);
      try {
        return { entries: await listTree(real, path, depth, entries) };
      } catch (err) {
        throw toConnectError(err, `error reading directory ${path}`);
      }
    },

    async remove(request, ctx) {
      const { path } = resolveFor(request.path, ctx.requestHeaders);
      const removed = await lstat(path, { bigint: true }).catch(whenMissing(undefined));
      if (removed?.isFile()) metadata.delete(identityOf(removed));
      await rm(path, { recursive: true, force: true }).catch((err) => {
        throw toConnectError(err, 'error removing file or directory');
      });
      return {};
    },

    async watchDir(request, ctx, send) {
      const { path } = resolveFor(request.path, ctx.requestHeaders);
      await checkWatchTarget(path, request.allowNetworkMounts);
      await streamWatch(path, request.recursive, eventConverter(entries, request.includeEntry), ctx, send);
    },

    async createWatcher(request, ctx) {
      const { path } = resolveFor(request.path, ctx.requestHeaders);
      await checkWatchTarget(path, request.allowNetworkMounts);
      return { watcherId: await watchers.create(path, request.recursive, eventConverter(entries, request.includeEntry)) };
    },

    getWatcherEvents(request) {
      return { events: watchers.drain(request.watcherId) };
    },

    removeWatcher(request) {
      watchers.remove(request.watcherId);
      return {};
    },
  };
}
