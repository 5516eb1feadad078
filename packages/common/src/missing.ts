/**
 * For a file-system call's `.catch`: the path not being there (ENOENT, ENOTDIR) becomes `value`;
 * any other error (EACCES, EIO, EMFILE...) is a real problem and is rethrown, never read as "absent".
 *   const st = await stat(path).catch(whenMissing(undefined));
 */
export function whenMissing<T>(value: T): (err: unknown) => T {
  return (err) => {
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return value;
    throw err;
  };
}
