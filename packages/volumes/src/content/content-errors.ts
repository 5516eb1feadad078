/** The wire errors of the volume content operations (content-ops.ts): a kernel error in the client's words. */
import { SvcError, badRequest, conflict, notFound } from '@svc/common';
import { ConfinedDir, childPath, errnoOf, pathComponents } from './confined-fs.ts';

/**
 * The wire error for a failure of `action` on `vpath`. A kernel error names the client's path,
 * never the host's; a component that is a symlink or a file is told apart by an lstat walk.
 */
export async function explain(err: unknown, root: ConfinedDir, vpath: string, action: string): Promise<unknown> {
  if (err instanceof SvcError) return err;
  switch (errnoOf(err)) {
    case 'ENOENT':
      return notFound(`failed to ${action}: "${vpath}" not found`);
    case 'EEXIST':
      return conflict(`failed to ${action}: "${vpath}" already exists`);
    case 'ENOTDIR':
    case 'ELOOP': {
      const found = await firstNonDirectory(root, vpath);
      if (found?.symlink) return badRequest(`failed to ${action}: "${found.path}" is a symlink; the volume content API does not follow symlinks`);
      if (found?.path === vpath) return badRequest(`failed to ${action}: "${vpath}" is not a directory`);
      return badRequest(`failed to ${action}: a component of the path is a file, but must be a directory`);
    }
    case 'EISDIR':
      return conflict(`failed to ${action}: "${vpath}" is a directory`);
    case 'ENOTEMPTY':
      return conflict(`failed to ${action}: "${vpath}" changed while it was removed`);
    case 'ENAMETOOLONG':
      return badRequest(`failed to ${action}: a component of "${vpath}" is too long`);
    case 'ENOSPC':
    case 'EDQUOT':
      return new SvcError(507, `failed to ${action}: the volume is full`);
    case 'EROFS':
      return new SvcError(403, `failed to ${action}: the volume is read-only`);
    case 'EPERM':
    case 'EACCES':
      return new SvcError(403, `failed to ${action}: "${vpath}": operation not permitted`);
    default:
      return err;
  }
}

/** The first component of `vpath` (the last included) that is not a directory, walking without following. */
async function firstNonDirectory(root: ConfinedDir, vpath: string): Promise<{ path: string; symlink: boolean } | undefined> {
  let dir = root;
  try {
    for (const name of pathComponents(vpath)) {
      const path = childPath(dir.volumePath, name);
      const st = await dir.lstat(name);
      if (!st.isDirectory()) return { path, symlink: st.isSymbolicLink() };
      const next = await dir.openDir(name, path);
      if (dir !== root) await dir.close();
      dir = next;
    }
    return undefined;
  } catch (err) {
    // Only to word an error message: a path that changed again is described as a plain ENOTDIR.
    if (errnoOf(err) !== undefined) return undefined;
    throw err;
  } finally {
    if (dir !== root) await dir.close();
  }
}
