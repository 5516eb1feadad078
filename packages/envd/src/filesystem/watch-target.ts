import { stat, statfs } from 'node:fs/promises';
import { ConnectError, toConnectError } from '../connect/code.ts';

// Filesystem magic numbers (linux/magic.h) of network and FUSE mounts.
const networkFilesystems = new Set([0x6969, 0xff534d42, 0x517b, 0xfe534d42, 0x65735546]);

/** Checks that `path` can be watched: an existing directory, not on a network mount unless allowed. */
export async function checkWatchTarget(path: string, allowNetworkMounts: boolean): Promise<void> {
  let info;
  try {
    info = await stat(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new ConnectError('not_found', `path ${path} not found`);
    throw toConnectError(err, `error statting path ${path}`);
  }
  if (!info.isDirectory()) throw new ConnectError('invalid_argument', `path ${path} is not a directory`);
  if (allowNetworkMounts) return;
  const fs = await statfs(path).catch((err) => {
    throw toConnectError(err, `error statting the filesystem of ${path}`);
  });
  if (networkFilesystems.has(Number(fs.type) >>> 0)) {
    throw new ConnectError('invalid_argument', `cannot watch path on network filesystem: ${path}`);
  }
}
