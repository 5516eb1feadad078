/*
 * sudo for gVisor sandboxes (docs/decisions.md, "sudo under gVisor").
 *
 * Debian 12's runsc runs every process of a sandbox with "no new privileges", so a set-uid
 * program cannot raise privileges and the real sudo fails. envd runs as root and listens on a
 * unix socket (/run/svc-envd/sudo.sock); this one static binary is both sides of it:
 *
 *   sudo [options] [VAR=value...] command...   (the client, installed as the sandbox's sudo)
 *     sends its standard input, output and error (SCM_RIGHTS), its working directory, the
 *     command and its environment, forwards the signals it gets, and exits as the command did.
 *   svc-sudo --sync                             (the node agent, before a snapshot: sync(2) of the
 *                                                sandbox's kernel, in images that have no sync)
 *   svc-sudo --after-restore MS HEX             (the node agent, after a microvm guest is restored
 *                                                from a saved state: sets the clock, which stood still,
 *                                                and adds the host's random bytes to the kernel's pool
 *                                                and reseeds it, so guests restored from one saved
 *                                                state do not draw the same random numbers)
 *   svc-sudo --after-restore-service            (started once by envd as root in a microvm guest: the same,
 *                                                one "MS HEX" line a request on its standard input, so that a
 *                                                restore's renewal starts no process)
 *   svc-sudo --serve                            (started by envd as root, the socket on fd 0)
 *     checks the caller (its SCM_CREDENTIALS, which the kernel vouches for) against the sudoers rules, runs the command as the target
 *     user on the caller's own descriptors, and sends back its wait status.
 *
 * A caller may use it when it is root, or when a line of /etc/sudoers or of a file in /etc/sudoers.d names
 * it or one of its groups (%group). No password is asked: gVisor is the isolation boundary.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/random.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SOCKET_PATH "/run/svc-envd/sudo.sock"
#define MAX_REQUEST (4 * 1024 * 1024)
#define SECURE_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define MAX_GROUPS 256

extern char **environ;

/* ---------------------------------------------------------------- shared */

static int write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) { if (errno == EINTR) continue; return -1; }
    p += n; len -= (size_t)n;
  }
  return 0;
}

static int read_all(int fd, void *buf, size_t len) {
  char *p = buf;
  while (len > 0) {
    ssize_t n = read(fd, p, len);
    if (n < 0) { if (errno == EINTR) continue; return -1; }
    if (n == 0) return -1;
    p += n; len -= (size_t)n;
  }
  return 0;
}

/* A passwd entry, read from /etc/passwd by hand: a static binary has no NSS. */
struct user { char name[256]; uid_t uid; gid_t gid; char home[1024]; char shell[1024]; };

static int find_user(const char *name, long uid, struct user *out) {
  FILE *f = fopen("/etc/passwd", "r");
  if (!f) return -1;
  char line[4096];
  int found = -1;
  while (fgets(line, sizeof line, f)) {
    char *fields[7] = {0};
    char *s = line;
    int i = 0;
    for (; i < 7 && s; i++) { fields[i] = s; s = strchr(s, ':'); if (s) *s++ = 0; }
    if (i < 7 || !fields[6]) continue;
    fields[6][strcspn(fields[6], "\n")] = 0;
    long u = strtol(fields[2], NULL, 10);
    if ((name && strcmp(name, fields[0]) == 0) || (!name && u == uid)) {
      snprintf(out->name, sizeof out->name, "%s", fields[0]);
      out->uid = (uid_t)u;
      out->gid = (gid_t)strtol(fields[3], NULL, 10);
      snprintf(out->home, sizeof out->home, "%s", fields[5]);
      snprintf(out->shell, sizeof out->shell, "%s", fields[6][0] ? fields[6] : "/bin/sh");
      found = 0;
      break;
    }
  }
  fclose(f);
  return found;
}

/* The groups of a user: its primary group and every /etc/group line that lists it. */
static int groups_of(const struct user *u, gid_t *gids, char names[][256], int max) {
  int n = 0;
  gids[n] = u->gid; names[n][0] = 0; n++;
  FILE *f = fopen("/etc/group", "r");
  if (!f) return n;
  char line[8192];
  while (fgets(line, sizeof line, f) && n < max) {
    line[strcspn(line, "\n")] = 0;
    char *name = line, *rest = strchr(line, ':');
    if (!rest) continue;
    *rest++ = 0;
    char *gidf = strchr(rest, ':');
    if (!gidf) continue;
    gidf++;
    char *members = strchr(gidf, ':');
    if (!members) continue;
    *members++ = 0;
    gid_t gid = (gid_t)strtol(gidf, NULL, 10);
    int member = gid == u->gid;
    for (char *m = strtok(members, ","); m && !member; m = strtok(NULL, ",")) member = strcmp(m, u->name) == 0;
    if (!member) continue;
    if (gid == u->gid) { snprintf(names[0], 256, "%.255s", name); continue; }
    gids[n] = gid;
    snprintf(names[n], 256, "%.255s", name);
    n++;
  }
  fclose(f);
  return n;
}

/* ---------------------------------------------------------------- serve */

/* Whether a sudoers file has a rule line for the user or one of its groups. */
static int sudoers_file_allows(const char *path, const struct user *u, char groups[][256], int ngroups) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[4096];
  int allowed = 0;
  while (!allowed && fgets(line, sizeof line, f)) {
    char *s = line;
    while (*s == ' ' || *s == '\t') s++;
    if (*s == '#' || *s == 0 || *s == '\n') continue;
    size_t len = strcspn(s, " \t");
    if (len == 0 || s[len] == 0) continue;
    if (len == strlen(u->name) && strncmp(s, u->name, len) == 0) allowed = 1;
    for (int i = 0; i < ngroups && !allowed; i++) {
      if (s[0] == '%' && groups[i][0] && len - 1 == strlen(groups[i]) && strncmp(s + 1, groups[i], len - 1) == 0) allowed = 1;
    }
  }
  fclose(f);
  return allowed;
}

static int may_sudo(const struct user *u) {
  if (u->uid == 0) return 1;
  gid_t gids[MAX_GROUPS];
  static char names[MAX_GROUPS][256];
  int n = groups_of(u, gids, names, MAX_GROUPS);
  if (sudoers_file_allows("/etc/sudoers", u, names, n)) return 1;
  DIR *d = opendir("/etc/sudoers.d");
  if (!d) return 0;
  int allowed = 0;
  struct dirent *e;
  while (!allowed && (e = readdir(d))) {
    if (e->d_name[0] == '.' || strchr(e->d_name, '~')) continue;
    char path[512];
    snprintf(path, sizeof path, "/etc/sudoers.d/%s", e->d_name);
    allowed = sudoers_file_allows(path, u, names, n);
  }
  closedir(d);
  return allowed;
}

static void refuse(int sock, int err_fd, int code, const char *fmt, const char *arg) {
  if (err_fd >= 0) dprintf(err_fd, fmt, arg);
  int32_t status = (code & 0xff) << 8;
  write_all(sock, &status, sizeof status);
  _exit(0);
}

/* The request: NUL-separated fields "v1", flags, user, cwd, argc, argv..., envc, env... */
struct request { const char *flags, *user, *cwd; int argc; char **argv; int envc; char **env; };

static int parse_request(char *buf, size_t len, struct request *r) {
  char *p = buf, *end = buf + len;
  char *field[5];
  for (int i = 0; i < 5; i++) {
    if (p >= end) return -1;
    field[i] = p;
    p += strnlen(p, (size_t)(end - p)) + 1;
  }
  if (strcmp(field[0], "v1") != 0) return -1;
  r->flags = field[1]; r->user = field[2]; r->cwd = field[3];
  r->argc = atoi(field[4]);
  if (r->argc < 0 || r->argc > 65536) return -1;
  r->argv = calloc((size_t)r->argc + 1, sizeof(char *));
  for (int i = 0; i < r->argc; i++) { if (p >= end) return -1; r->argv[i] = p; p += strnlen(p, (size_t)(end - p)) + 1; }
  if (p >= end) return -1;
  r->envc = atoi(p);
  p += strnlen(p, (size_t)(end - p)) + 1;
  if (r->envc < 0 || r->envc > 65536) return -1;
  r->env = calloc((size_t)r->envc + 1, sizeof(char *));
  for (int i = 0; i < r->envc; i++) { if (p >= end) return -1; r->env[i] = p; p += strnlen(p, (size_t)(end - p)) + 1; }
  return 0;
}

static const char *env_get(char **env, int envc, const char *name) {
  size_t n = strlen(name);
  for (int i = 0; i < envc; i++) if (strncmp(env[i], name, n) == 0 && env[i][n] == '=') return env[i] + n + 1;
  return NULL;
}

/* The command's environment: sudo's env_reset (a few of the caller's variables, the target's
 * identity, SUDO_*), or the caller's whole environment with -E; VAR=value words on top. */
static char **command_env(const struct request *r, const struct user *caller, const struct user *target, int *assignments_end) {
  int preserve = strchr(r->flags, 'E') != NULL;
  size_t cap = (size_t)r->envc + (size_t)r->argc + 16, n = 0;
  char **out = calloc(cap + 1, sizeof(char *));
  static const char *kept[] = { "TERM", "COLORTERM", "DISPLAY", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", NULL };
  char buf[4096];
#define PUT(...) do { snprintf(buf, sizeof buf, __VA_ARGS__); out[n++] = strdup(buf); } while (0)
  if (preserve) {
    for (int i = 0; i < r->envc; i++) if (strncmp(r->env[i], "SUDO_", 5) != 0) out[n++] = r->env[i];
  } else {
    for (int k = 0; kept[k]; k++) { const char *v = env_get(r->env, r->envc, kept[k]); if (v) PUT("%s=%s", kept[k], v); }
    PUT("PATH=%s", SECURE_PATH);
    PUT("HOME=%s", target->home);
    PUT("SHELL=%s", target->shell);
    PUT("USER=%s", target->name);
    PUT("LOGNAME=%s", target->name);
    PUT("MAIL=/var/mail/%s", target->name);
  }
  PUT("SUDO_USER=%s", caller->name);
  PUT("SUDO_UID=%u", (unsigned)caller->uid);
  PUT("SUDO_GID=%u", (unsigned)caller->gid);
  int a = 0;
  for (; a < r->argc && strchr(r->argv[a], '=') && r->argv[a][0] != '=' && r->argv[a][0] != '-'; a++) out[n++] = r->argv[a];
  *assignments_end = a;
  out[n] = NULL;
  return out;
#undef PUT
}

/* Seconds a connection has to deliver its whole request: every local user may connect, and one
 * that sends nothing would otherwise hold this root process, blocked in recvmsg, for good. envd's
 * tests shorten it with SVC_SUDO_REQUEST_TIMEOUT_S (envd's own environment, never a caller's). */
#define REQUEST_TIMEOUT_S 30

static unsigned request_timeout(void) {
  const char *text = getenv("SVC_SUDO_REQUEST_TIMEOUT_S");
  long s = text ? strtol(text, NULL, 10) : 0;
  return s > 0 && s <= 3600 ? (unsigned)s : REQUEST_TIMEOUT_S;
}

static void request_timed_out(int sig) {
  static const char msg[] = "svc-sudo: no complete request in time; the connection was closed\n";
  (void)sig;
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

static int serve(int sock) {
  /* The whole request under one deadline (SO_RCVTIMEO would bound each read, not all of them).
   * Whatever envd left of SIGALRM is set here: the handler ends the helper. */
  struct sigaction on_alarm = { .sa_handler = request_timed_out };
  sigemptyset(&on_alarm.sa_mask);
  sigaction(SIGALRM, &on_alarm, NULL);
  sigset_t alarm_set;
  sigemptyset(&alarm_set);
  sigaddset(&alarm_set, SIGALRM);
  sigprocmask(SIG_UNBLOCK, &alarm_set, NULL);
  alarm(request_timeout());
  /* The caller's identity travels as SCM_CREDENTIALS, which the kernel checks on sending (a
   * process can claim only its own ids). SO_PEERCRED is not used: this gVisor answers it with the
   * accepting side's credentials. */
  int on = 1;
  if (setsockopt(sock, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) return 1;
  uint32_t len = 0;
  union { char buf[CMSG_SPACE(3 * sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))]; struct cmsghdr align; } ctrl;
  struct iovec iov = { &len, sizeof len };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl.buf, .msg_controllen = sizeof ctrl.buf };
  ssize_t got;
  do got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC); while (got < 0 && errno == EINTR);
  if (got != (ssize_t)sizeof len) return 1;
  int fds[3] = { -1, -1, -1 };
  struct ucred cred;
  int have_fds = 0, have_cred = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET) continue;
    if (c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(3 * sizeof(int))) { memcpy(fds, CMSG_DATA(c), sizeof fds); have_fds = 1; }
    if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len == CMSG_LEN(sizeof cred)) { memcpy(&cred, CMSG_DATA(c), sizeof cred); have_cred = 1; }
  }
  if (!have_fds) return 1;
  if (!have_cred) refuse(sock, fds[2], 1, "sudo: the request carries no credentials%s\n", "");
  if (len == 0 || len > MAX_REQUEST) refuse(sock, fds[2], 1, "sudo: the request is too large%s\n", "");
  char *buf = malloc(len + 1);
  if (!buf || read_all(sock, buf, len) != 0) return 1;
  alarm(0); /* the request is in; the command may run as long as it likes */
  buf[len] = 0;
  struct request r;
  if (parse_request(buf, len, &r) != 0) refuse(sock, fds[2], 1, "sudo: malformed request%s\n", "");

  struct user caller, target;
  if (find_user(NULL, cred.uid, &caller) != 0) {
    snprintf(caller.name, sizeof caller.name, "#%u", (unsigned)cred.uid);
    caller.uid = cred.uid; caller.gid = cred.gid; caller.home[0] = 0;
  }
  if (!may_sudo(&caller)) refuse(sock, fds[2], 1, "%s is not in the sudoers file.\n", caller.name);
  if (find_user(r.user[0] ? r.user : "root", 0, &target) != 0) refuse(sock, fds[2], 1, "sudo: unknown user %s\n", r.user);

  int first = 0;
  char **env = command_env(&r, &caller, &target, &first);
  int login = strchr(r.flags, 'i') != NULL, shell = strchr(r.flags, 's') != NULL;
  char **argv = r.argv + first;
  int argc = r.argc - first;
  char *shell_argv[5] = { 0 };
  if (login || shell) {
    /* The rest of the words as one shell command line, as sudo does. */
    size_t total = 1;
    for (int i = 0; i < argc; i++) total += strlen(argv[i]) * 2 + 1;
    char *cmd = calloc(total, 1), *q = cmd;
    for (int i = 0; i < argc; i++) {
      if (i) *q++ = ' ';
      for (const char *s = argv[i]; *s; s++) { if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr("_-/.=:,+@%", *s))) *q++ = '\\'; *q++ = *s; }
    }
    int k = 0;
    shell_argv[k++] = target.shell;
    if (login) shell_argv[k++] = "-l";
    if (argc > 0) { shell_argv[k++] = "-c"; shell_argv[k++] = cmd; }
    argv = shell_argv;
  } else if (argc == 0) {
    refuse(sock, fds[2], 1, "usage: sudo command%s\n", "");
  }

  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC);

  pid_t pid = fork();
  if (pid < 0) refuse(sock, fds[2], 1, "sudo: fork failed%s\n", "");
  if (pid == 0) {
    sigprocmask(SIG_UNBLOCK, &chld, NULL);
    setpgid(0, 0);
    for (int i = 0; i < 3; i++) if (dup2(fds[i], i) < 0) _exit(126);
    const char *dir = login ? target.home : r.cwd;
    if (chdir(dir) != 0 && chdir(target.home) != 0 && chdir("/") != 0) _exit(126);
    gid_t gids[MAX_GROUPS];
    static char names[MAX_GROUPS][256];
    int ng = groups_of(&target, gids, names, MAX_GROUPS);
    if (setgroups((size_t)ng, gids) != 0 || setgid(target.gid) != 0 || setuid(target.uid) != 0) {
      dprintf(2, "sudo: cannot become %s: %s\n", target.name, strerror(errno));
      _exit(1);
    }
    environ = env;
    execvp(argv[0], argv);
    dprintf(2, "sudo: %s: %s\n", argv[0], errno == ENOENT ? "command not found" : strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  for (int i = 0; i < 3; i++) close(fds[i]);

  struct pollfd p[2] = { { sock, POLLIN, 0 }, { sfd, POLLIN, 0 } };
  for (;;) {
    int status;
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      int32_t s = status;
      write_all(sock, &s, sizeof s);
      return 0;
    }
    if (poll(p, 2, -1) < 0 && errno != EINTR) break;
    if (p[1].revents & POLLIN) { struct signalfd_siginfo si; if (read(sfd, &si, sizeof si) < 0 && errno != EAGAIN) break; }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      unsigned char sig[64];
      ssize_t n = read(sock, sig, sizeof sig);
      if (n <= 0) {
        /* The client is gone (killed): so is its command, as a killed terminal takes its jobs. */
        kill(-pid, SIGHUP);
        kill(-pid, SIGCONT);
        usleep(200 * 1000);
        kill(-pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 0;
      }
      for (ssize_t i = 0; i < n; i++) kill(-pid, sig[i]);
    }
  }
  kill(-pid, SIGKILL);
  return 1;
}

/* ---------------------------------------------------------------- client */

static int sock_fd = -1;

static void forward_signal(int sig) {
  unsigned char b = (unsigned char)sig;
  int saved = errno;
  (void)!write(sock_fd, &b, 1);
  errno = saved;
}

static void usage(FILE *to) {
  fputs("usage: sudo [-EHinsSkKlvV] [-u user] [VAR=value] [command [arg ...]]\n"
        "       (svc: runs through envd; passwords are not asked, gVisor is the isolation boundary)\n", to);
}

struct buffer { char *data; size_t len, cap; };

static void put(struct buffer *b, const char *s) {
  size_t n = strlen(s) + 1;
  if (b->len + n > b->cap) { b->cap = (b->len + n) * 2; b->data = realloc(b->data, b->cap); if (!b->data) { perror("sudo"); exit(1); } }
  memcpy(b->data + b->len, s, n);
  b->len += n;
}

static int client(int argc, char **argv) {
  char flags[16] = "";
  const char *user = "";
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) { i++; break; }
    if (strncmp(a, "--", 2) == 0) {
      if (strcmp(a, "--user") == 0 && i + 1 < argc) user = argv[++i];
      else if (strncmp(a, "--user=", 7) == 0) user = a + 7;
      else if (strncmp(a, "--preserve-env", 14) == 0) strcat(flags, "E");
      else if (strcmp(a, "--login") == 0) strcat(flags, "i");
      else if (strcmp(a, "--shell") == 0) strcat(flags, "s");
      else if (strcmp(a, "--non-interactive") == 0 || strcmp(a, "--set-home") == 0 || strcmp(a, "--stdin") == 0) continue;
      else if (strcmp(a, "--help") == 0) { usage(stdout); return 0; }
      else if (strcmp(a, "--version") == 0) { puts("Sudo version 1.9.13 (svc: envd broker for gVisor)"); return 0; }
      else if (strcmp(a, "--validate") == 0 || strcmp(a, "--reset-timestamp") == 0 || strcmp(a, "--remove-timestamp") == 0) return 0;
      else if (strcmp(a, "--list") == 0) { puts("User may run the following commands on this host:\n    (ALL : ALL) NOPASSWD: ALL"); return 0; }
      else { fprintf(stderr, "sudo: unrecognized option '%s'\n", a); usage(stderr); return 1; }
      continue;
    }
    for (const char *f = a + 1; *f; f++) {
      switch (*f) {
        case 'u':
          if (f[1]) user = f + 1; else if (i + 1 < argc) user = argv[++i]; else { fputs("sudo: option requires an argument -- 'u'\n", stderr); return 1; }
          goto next; /* the rest of the word was the user */
        case 'E': case 'i': case 's': if (!strchr(flags, *f)) strncat(flags, f, 1); break;
        case 'H': case 'n': case 'S': case 'b': case 'P': break;
        case 'k': case 'K': if (i + 1 >= argc) return 0; break;
        case 'v': return 0;
        case 'l': puts("User may run the following commands on this host:\n    (ALL : ALL) NOPASSWD: ALL"); return 0;
        case 'V': puts("Sudo version 1.9.13 (svc: envd broker for gVisor)"); return 0;
        case 'h': usage(stdout); return 0;
        default: fprintf(stderr, "sudo: invalid option -- '%c'\n", *f); usage(stderr); return 1;
      }
    }
  next:;
  }
  if (i >= argc && !strchr(flags, 'i') && !strchr(flags, 's')) { usage(stderr); return 1; }

  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) strcpy(cwd, "/");
  struct buffer b = { 0 };
  char num[32];
  put(&b, "v1"); put(&b, flags); put(&b, user); put(&b, cwd);
  snprintf(num, sizeof num, "%d", argc - i); put(&b, num);
  for (int k = i; k < argc; k++) put(&b, argv[k]);
  int envc = 0;
  for (char **e = environ; *e; e++) envc++;
  snprintf(num, sizeof num, "%d", envc); put(&b, num);
  for (char **e = environ; *e; e++) put(&b, *e);

  sock_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  /* Tests point the client elsewhere; the service behind any socket decides what it may do. */
  const char *path = getenv("SVC_SUDO_SOCKET") ? getenv("SVC_SUDO_SOCKET") : SOCKET_PATH;
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
  if (sock_fd < 0 || connect(sock_fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    fprintf(stderr, "sudo: cannot reach envd's sudo service at %s: %s\n", path, strerror(errno));
    return 1;
  }
  uint32_t len = (uint32_t)b.len;
  int fds[3] = { 0, 1, 2 };
  struct ucred me = { getpid(), getuid(), getgid() };
  union { char buf[CMSG_SPACE(sizeof fds) + CMSG_SPACE(sizeof me)]; struct cmsghdr align; } ctrl;
  memset(ctrl.buf, 0, sizeof ctrl.buf);
  struct iovec iov = { &len, sizeof len };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl.buf, .msg_controllen = sizeof ctrl.buf };
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET; c->cmsg_type = SCM_RIGHTS; c->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(c), fds, sizeof fds);
  c = CMSG_NXTHDR(&msg, c);
  c->cmsg_level = SOL_SOCKET; c->cmsg_type = SCM_CREDENTIALS; c->cmsg_len = CMSG_LEN(sizeof me);
  memcpy(CMSG_DATA(c), &me, sizeof me);
  if (sendmsg(sock_fd, &msg, MSG_NOSIGNAL) != (ssize_t)sizeof len || write_all(sock_fd, b.data, b.len) != 0) {
    fprintf(stderr, "sudo: envd's sudo service did not take the request: %s\n", strerror(errno));
    return 1;
  }

  struct sigaction sa = { .sa_handler = forward_signal };
  sigemptyset(&sa.sa_mask);
  int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM };
  for (size_t k = 0; k < sizeof forwarded / sizeof *forwarded; k++) sigaction(forwarded[k], &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  int32_t status;
  if (read_all(sock_fd, &status, sizeof status) != 0) {
    fprintf(stderr, "sudo: envd's sudo service went away\n");
    return 1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    signal(sig, SIG_DFL);
    raise(sig);
    return 128 + sig;
  }
  return 1;
}

/*
 * A microvm guest restored from a saved state wakes with the clock and the random pool it had when
 * saved. Sets the clock to MS (milliseconds since the epoch) and adds HEX's bytes to the kernel's
 * pool and reseeds it. 0 when done; else a message in `err` and 2 (bad arguments) or 1.
 */
static int renew_after_restore(const char *ms_text, const char *hex, char *err, size_t errlen) {
  char *end;
  long long ms = strtoll(ms_text, &end, 10);
  size_t n = strlen(hex) / 2;
  if (*end || ms <= 0 || strlen(hex) % 2 || n == 0 || n > 512) {
    snprintf(err, errlen, "--after-restore takes milliseconds since the epoch and up to 512 random bytes in hex");
    return 2;
  }
  struct { int entropy_count; int buf_size; unsigned char buf[512]; } seed = { .entropy_count = (int)n * 8, .buf_size = (int)n };
  for (size_t i = 0; i < n; i++) {
    unsigned int byte;
    if (sscanf(hex + 2 * i, "%2x", &byte) != 1) { snprintf(err, errlen, "--after-restore: not hex"); return 2; }
    seed.buf[i] = (unsigned char)byte;
  }
  struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
  if (clock_settime(CLOCK_REALTIME, &ts) != 0) { snprintf(err, errlen, "clock_settime: %s", strerror(errno)); return 1; }
  int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
  if (fd < 0) { snprintf(err, errlen, "/dev/urandom: %s", strerror(errno)); return 1; }
  int ok = ioctl(fd, RNDADDENTROPY, &seed) == 0 && ioctl(fd, RNDRESEEDCRNG) == 0;
  if (!ok) snprintf(err, errlen, "reseeding the kernel's random pool: %s", strerror(errno));
  close(fd);
  return ok ? 0 : 1;
}

static int after_restore(const char *ms_text, const char *hex) {
  char err[256];
  int rc = renew_after_restore(ms_text, hex, err, sizeof err);
  if (rc != 0) fprintf(stderr, "svc-sudo: %s\n", err);
  return rc;
}

/*
 * The same, as a service that envd starts once when its guest boots (packages/envd/src/system/
 * after-restore.ts): one request a line on standard input, "MS HEX", one answer a line on standard
 * output, "ok" or "error: why". It is already running when a guest is restored, so the renewal
 * starts no process: under TCG the first process a restored guest starts costs about 140 ms of
 * translation, and the Process API's first command about 450 ms (docs/runtimes.md, "Measured").
 */
static int after_restore_service(void) {
  char line[1200];
  setvbuf(stdout, NULL, _IOLBF, 0);
  while (fgets(line, sizeof line, stdin)) {
    char err[256];
    size_t len = strlen(line);
    if (len == 0 || line[len - 1] != '\n') {
      /* longer than any request: skip the rest of it and refuse it */
      int c;
      while (len && (c = getchar()) != EOF && c != '\n') { /* drain */ }
      printf("error: request too long\n");
      continue;
    }
    line[len - 1] = 0;
    char *space = strchr(line, ' ');
    if (!space) { printf("error: expected \"MS HEX\"\n"); continue; }
    *space = 0;
    if (renew_after_restore(line, space + 1, err, sizeof err) == 0) printf("ok\n");
    else printf("error: %s\n", err);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--serve") == 0) return serve(0);
  /* The node agent flushes a sandbox's files before it captures them (a snapshot), in any image. */
  if (argc == 2 && strcmp(argv[1], "--sync") == 0) { sync(); return 0; }
  if (argc == 4 && strcmp(argv[1], "--after-restore") == 0) return after_restore(argv[2], argv[3]);
  if (argc == 2 && strcmp(argv[1], "--after-restore-service") == 0) return after_restore_service();
  return client(argc, argv);
}
