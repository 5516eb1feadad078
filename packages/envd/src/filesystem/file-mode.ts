import { constants } from 'node:fs';

const { S_IFMT, S_IFDIR, S_IFLNK, S_IFBLK, S_IFCHR, S_IFIFO, S_IFSOCK } = constants;
const S_ISUID = 0o4000;
const S_ISGID = 0o2000;
const S_ISVTX = 0o1000;

/**
 * Renders st_mode the way Go's os.FileMode.String() does, which is what E2B's envd reports as
 * `permissions` (e.g. "-rw-r--r--", "drwxr-xr-x", "Lrwxrwxrwx", "Dcrw-rw-rw-").
 */
export function goModeString(mode: number): string {
  const type = mode & S_IFMT;
  let prefix = '';
  if (type === S_IFDIR) prefix += 'd';
  if (type === S_IFLNK) prefix += 'L';
  if (type === S_IFBLK || type === S_IFCHR) prefix += 'D';
  if (type === S_IFIFO) prefix += 'p';
  if (type === S_IFSOCK) prefix += 'S';
  if (mode & S_ISUID) prefix += 'u';
  if (mode & S_ISGID) prefix += 'g';
  if (type === S_IFCHR) prefix += 'c';
  if (mode & S_ISVTX) prefix += 't';
  let perms = '';
  const letters = 'rwxrwxrwx';
  for (let i = 0; i < 9; i++) perms += mode & (1 << (8 - i)) ? letters[i] : '-';
  return (prefix || '-') + perms;
}
