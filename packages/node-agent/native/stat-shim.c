/*
 * Preloaded into every dynamically linked program of a gVisor sandbox (/etc/ld.so.preload):
 * the sentry of Debian 12's runsc (2022-12) answers statx and fstatat with EINVAL when they
 * carry AT_NO_AUTOMOUNT, which coreutils 9 passes on every stat, so `ls -l`, `stat`, `cp -a`
 * and `find` failed on every path. gVisor has no automount points, so the flag means nothing
 * there: these wrappers drop it and make the system call. See docs/decisions.md.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf) {
  return (int)syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
}

int fstatat(int dirfd, const char *path, struct stat *buf, int flags) {
  return (int)syscall(SYS_newfstatat, dirfd, path, buf, flags & ~AT_NO_AUTOMOUNT);
}

int fstatat64(int dirfd, const char *path, struct stat64 *buf, int flags) {
  return (int)syscall(SYS_newfstatat, dirfd, path, buf, flags & ~AT_NO_AUTOMOUNT);
}
