/*
 * svc-spawner: starts envd's piped processes (docs/decisions.md, "envd's spawner").
 *
 * Under gVisor's ptrace platform a fork costs in proportion to the forking process's address
 * space: Node's child_process.spawn from envd takes 35-50 ms for /bin/true, a fork from this
 * small static program under 10 ms. envd starts one spawner at boot and talks to it over its
 * standard input and output; the spawner forks and execs each process, relays its standard
 * streams and reports how it ended.
 *
 * Frames in both directions: u32 payload length, u8 type, u32 process id (envd's own number,
 * not the pid), then the payload; integers little-endian.
 *   envd -> spawner
 *     SPAWN        i32 uid, i32 gid (-1: keep), u32 flags (1: stdin is a pipe; 2: output paused
 *                  until RESUME, so none is read before envd has someone to give it to), u32 group count,
 *                  u32 argc, u32 envc, u32 groups[], then NUL-terminated file, cwd, argv[], env[]
 *     STDIN        bytes for the process's standard input
 *     STDIN_CLOSE  close its standard input
 *     PAUSE/RESUME stop and restart reading its output (envd's subscriber is slow)
 *     DETACH       stop waiting for its output: its end is reported once it has exited
 *     TTY_MODES    NUL-terminated path of a terminal (/dev/pts/N): its modes, for envd's key relay
 *     TTY_PROBE    whether the kernel turns ^C typed into a terminal into SIGINT (see probe_tty_signals)
 *   spawner -> envd
 *     STARTED      i32 pid          FAILED  i32 errno, then a message
 *     STDOUT/STDERR  bytes          STDIN_ERROR  i32 errno (the STDIN frames not yet written are dropped)
 *     STDIN_WRITTEN  u32 bytes: one STDIN frame is in the process's pipe (envd's writes wait for it)
 *     EXITED       i32 wait status, once the process is reaped and its output has closed
 *     TTY_MODES_REPLY  i32 errno (0: read), u32 c_lflag, u8 c_cc[VINTR], c_cc[VQUIT], c_cc[VSUSP]
 *     TTY_PROBE_REPLY  i32 1: the kernel does, 0: it passes ^C on as input, negative errno: unknown
 * The id of TTY_MODES and TTY_PROBE is envd's number for the request; the reply carries it back.
 * The spawner ends when envd closes its standard input; the processes it started keep running.
 *
 * `svc-spawner pty-session FILE ARG...` is another use of the same program: envd's terminals start
 * through it where the kernel does not turn ^C, ^\ and ^Z into signals (see pty_session).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

enum {
  SPAWN = 1, STDIN_DATA = 2, STDIN_CLOSE = 3, PAUSE = 4, RESUME = 5, DETACH = 6, TTY_MODES = 7, TTY_PROBE = 8,
  STARTED = 10, FAILED = 11, STDOUT_DATA = 12, STDERR_DATA = 13, EXITED = 14, STDIN_ERROR = 15, STDIN_WRITTEN = 16,
  TTY_MODES_REPLY = 17, TTY_PROBE_REPLY = 18,
};

#define HEADER 9
#define MAX_FRAME (64u * 1024 * 1024)
#define READ_CHUNK 65536

struct chunk { struct chunk *next; size_t len, off; char data[]; };

struct proc {
  uint32_t id;
  pid_t pid;
  int out[2];          /* stdout, stderr read ends; -1 once closed */
  int in;              /* stdin write end; -1 when closed or never opened */
  struct chunk *queue, *tail; /* stdin bytes not yet written */
  int close_in;        /* close stdin once the queue is written */
  int paused, exited, status;
  struct proc *next;
};

static struct proc *procs;
static int sigchld_pipe[2];
static char *inbuf;
static size_t inlen, incap;

static void write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) { struct pollfd w = { fd, POLLOUT, 0 }; poll(&w, 1, -1); continue; }
      _exit(0); /* envd is gone: nothing is left to report to */
    }
    p += n; len -= (size_t)n;
  }
}

static void put32(char *p, uint32_t v) { p[0] = (char)v; p[1] = (char)(v >> 8); p[2] = (char)(v >> 16); p[3] = (char)(v >> 24); }
static uint32_t get32(const char *p) { const unsigned char *u = (const unsigned char *)p; return u[0] | (u[1] << 8) | (u[2] << 16) | ((uint32_t)u[3] << 24); }

static void send_frame(int type, uint32_t id, const void *payload, size_t len) {
  char head[HEADER];
  put32(head, (uint32_t)len); head[4] = (char)type; put32(head + 5, id);
  write_all(1, head, HEADER);
  if (len) write_all(1, payload, len);
}

static void send_int(int type, uint32_t id, int32_t v) { char b[4]; put32(b, (uint32_t)v); send_frame(type, id, b, 4); }

static void send_failure(uint32_t id, int err, const char *what) {
  char msg[512];
  put32(msg, (uint32_t)err);
  int n = snprintf(msg + 4, sizeof msg - 4, "%s: %s", what, strerror(err));
  send_frame(FAILED, id, msg, 4 + (size_t)(n < 0 ? 0 : n >= (int)sizeof msg - 4 ? (int)sizeof msg - 5 : n));
}

static struct proc *find(uint32_t id) {
  for (struct proc *p = procs; p; p = p->next) if (p->id == id) return p;
  return NULL;
}

static void close_fd(int *fd) { if (*fd >= 0) { close(*fd); *fd = -1; } }

static void drop_queue(struct proc *p) {
  while (p->queue) { struct chunk *c = p->queue; p->queue = c->next; free(c); }
  p->tail = NULL;
}

static void maybe_finish(struct proc *p) {
  if (!p->exited || p->out[0] >= 0 || p->out[1] >= 0) return;
  send_int(EXITED, p->id, p->status);
  close_fd(&p->in);
  drop_queue(p);
  for (struct proc **pp = &procs; *pp; pp = &(*pp)->next) if (*pp == p) { *pp = p->next; break; }
  free(p);
}

/* Reads a NUL-terminated string at *off of the payload; NULL when it runs past the end. */
static const char *take_string(const char *payload, size_t len, size_t *off) {
  if (*off >= len) return NULL;
  const char *s = payload + *off;
  const char *nul = memchr(s, 0, len - *off);
  if (!nul) return NULL;
  *off += (size_t)(nul - s) + 1;
  return s;
}

static void spawn_process(uint32_t id, const char *payload, size_t len) {
  if (len < 24) { send_failure(id, EINVAL, "malformed spawn request"); return; }
  int32_t uid = (int32_t)get32(payload), gid = (int32_t)get32(payload + 4);
  uint32_t flags = get32(payload + 8), ngroups = get32(payload + 12), argc = get32(payload + 16), envc = get32(payload + 20);
  size_t off = 24;
  if (ngroups > 65536 || argc == 0 || argc > len || envc > len || off + (size_t)ngroups * 4 > len) { send_failure(id, EINVAL, "malformed spawn request"); return; }
  gid_t *groups = calloc(ngroups + 1, sizeof *groups);
  char **argv = calloc(argc + 1, sizeof *argv), **envp = calloc(envc + 1, sizeof *envp);
  const char *file = NULL, *cwd = NULL;
  int ok = groups && argv && envp;
  for (uint32_t i = 0; ok && i < ngroups; i++, off += 4) groups[i] = get32(payload + off);
  if (ok) ok = (file = take_string(payload, len, &off)) && (cwd = take_string(payload, len, &off));
  for (uint32_t i = 0; ok && i < argc; i++) ok = (argv[i] = (char *)take_string(payload, len, &off)) != NULL;
  for (uint32_t i = 0; ok && i < envc; i++) ok = (envp[i] = (char *)take_string(payload, len, &off)) != NULL;
  if (!ok) { send_failure(id, EINVAL, "malformed spawn request"); goto out; }

  int out[2] = { -1, -1 }, err[2] = { -1, -1 }, in[2] = { -1, -1 }, status[2] = { -1, -1 };
  if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || ((flags & 1) && pipe2(in, O_CLOEXEC)) || pipe2(status, O_CLOEXEC)) {
    send_failure(id, errno, "pipe");
    goto close_pipes;
  }
  pid_t pid = fork();
  if (pid < 0) { send_failure(id, errno, "fork"); goto close_pipes; }
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    int stdin_fd = (flags & 1) ? in[0] : open("/dev/null", O_RDONLY | O_CLOEXEC);
    const char *step = "setsid";
    /* Own session, as Node's `detached`: a `kill 0` in user code must not reach envd. */
    if (setsid() < 0) goto child_failed;
    step = "dup2";
    if (stdin_fd < 0 || dup2(stdin_fd, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0) goto child_failed;
    step = "setgroups";
    if (uid >= 0 && setgroups(ngroups, groups) < 0) goto child_failed;
    step = "setgid";
    if (gid >= 0 && setgid((gid_t)gid) < 0) goto child_failed;
    step = "setuid";
    if (uid >= 0 && setuid((uid_t)uid) < 0) goto child_failed;
    step = "chdir";
    if (chdir(cwd) < 0) goto child_failed;
    step = "exec";
    execve(file, argv, envp);
  child_failed:;
    int e = errno;
    char report[128];
    put32(report, (uint32_t)e);
    size_t n = strlen(step);
    memcpy(report + 4, step, n);
    write_all(status[1], report, 4 + n);
    _exit(127);
  }
  close_fd(&status[1]); close_fd(&out[1]); close_fd(&err[1]); close_fd(&in[0]);
  /* The status pipe closes on a successful exec; a failure writes errno and the step first. */
  char report[128];
  ssize_t got, total = 0;
  while ((got = read(status[0], report + total, sizeof report - 1 - (size_t)total)) != 0) {
    if (got < 0) { if (errno == EINTR) continue; break; }
    total += got;
    if ((size_t)total >= sizeof report - 1) break;
  }
  if (total >= 4) {
    report[total] = 0;
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    send_failure(id, (int)get32(report), report + 4);
    goto close_pipes;
  }
  struct proc *p = calloc(1, sizeof *p);
  if (!p) { kill(pid, SIGKILL); send_failure(id, ENOMEM, "spawner"); goto close_pipes; }
  p->id = id; p->pid = pid; p->paused = (flags & 2) != 0;
  p->out[0] = out[0]; p->out[1] = err[0]; p->in = in[1];
  out[0] = err[0] = in[1] = -1;
  if (p->in >= 0) fcntl(p->in, F_SETFL, fcntl(p->in, F_GETFL) | O_NONBLOCK);
  p->next = procs; procs = p;
  send_int(STARTED, id, pid);
close_pipes:
  close_fd(&out[0]); close_fd(&out[1]); close_fd(&err[0]); close_fd(&err[1]);
  close_fd(&in[0]); close_fd(&in[1]); close_fd(&status[0]); close_fd(&status[1]);
out:
  free(groups); free(argv); free(envp);
}

static void flush_stdin(struct proc *p) {
  while (p->in >= 0 && p->queue) {
    struct chunk *c = p->queue;
    ssize_t n = write(p->in, c->data + c->off, c->len - c->off);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      send_int(STDIN_ERROR, p->id, errno);
      drop_queue(p);
      close_fd(&p->in);
      return;
    }
    c->off += (size_t)n;
    if (c->off == c->len) {
      send_int(STDIN_WRITTEN, p->id, (int32_t)c->len);
      p->queue = c->next;
      if (!p->queue) p->tail = NULL;
      free(c);
    }
  }
  if (p->in >= 0 && !p->queue && p->close_in) close_fd(&p->in);
}

/* Reads a terminal's modes by its path; O_NOCTTY, so the spawner never takes it as its own. */
static void tty_modes(uint32_t id, const char *payload, size_t len) {
  char reply[11] = { 0 };
  size_t off = 0;
  const char *path = take_string(payload, len, &off);
  struct termios t;
  int fd = path ? open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC) : -1;
  if (!path) errno = EINVAL;
  if (fd < 0 || tcgetattr(fd, &t) < 0) {
    put32(reply, (uint32_t)errno);
  } else {
    put32(reply + 4, (uint32_t)t.c_lflag);
    reply[8] = (char)t.c_cc[VINTR]; reply[9] = (char)t.c_cc[VQUIT]; reply[10] = (char)t.c_cc[VSUSP];
  }
  if (fd >= 0) close(fd);
  send_frame(TTY_MODES_REPLY, id, reply, sizeof reply);
}

/*
 * Whether the kernel's line discipline turns ^C into SIGINT for the terminal's foreground group.
 * Linux does, and drops the byte; gVisor before its 2023-02 releases (Debian's runsc 0.0~20221219
 * among them) hands the byte to the reader and signals no one. A child takes a new terminal as its
 * controlling one, the spawner types "^C x" into it, and the child tells which of the two it saw.
 * No grantpt: on devpts it only checks what posix_openpt already did, and it would pull NSS into
 * this static program.
 */
static int32_t probe_tty_signals(void) {
  char name[64];
  int sync[2] = { -1, -1 }, status;
  int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0) return -errno;
  if (unlockpt(m) || ptsname_r(m, name, sizeof name) || pipe2(sync, O_CLOEXEC)) { int e = errno; close(m); return -e; }
  pid_t pid = fork();
  if (pid < 0) { int e = errno; close(m); close(sync[0]); close(sync[1]); return -e; }
  if (pid == 0) {
    sigset_t intr;
    sigemptyset(&intr);
    sigaddset(&intr, SIGINT);
    sigprocmask(SIG_BLOCK, &intr, NULL); /* kept pending, to be seen below */
    alarm(2); /* a kernel that neither signals nor delivers must not hold the spawner */
    close(m); close(sync[0]);
    struct termios t;
    int s = -1;
    if (setsid() < 0 || (s = open(name, O_RDWR | O_NOCTTY)) < 0 || ioctl(s, TIOCSCTTY, 0) < 0 || tcgetattr(s, &t) < 0) _exit(3);
    t.c_lflag = ISIG; /* not canonical, no echo: each byte is readable as it comes */
    t.c_cc[VINTR] = 3; t.c_cc[VMIN] = 1; t.c_cc[VTIME] = 0;
    if (tcsetattr(s, TCSANOW, &t) < 0 || write(sync[1], "", 1) != 1) _exit(3);
    char c = 0;
    int saw_intr = 0;
    while (c != 'x') {
      if (read(s, &c, 1) != 1) _exit(3);
      if (c == 3) saw_intr = 1;
    }
    sigset_t pending;
    sigpending(&pending);
    _exit(saw_intr ? 1 : sigismember(&pending, SIGINT) ? 0 : 3);
  }
  close(sync[1]);
  char ready;
  ssize_t n;
  while ((n = read(sync[0], &ready, 1)) < 0 && errno == EINTR) {}
  if (n != 1 || write(m, "\003x", 2) != 2) kill(pid, SIGKILL); /* then the answer is "unknown" */
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  close(m); close(sync[0]);
  if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) return -EIO;
  return WEXITSTATUS(status) == 0 ? 1 : 0;
}

static void handle_frame(int type, uint32_t id, const char *payload, size_t len) {
  if (type == SPAWN) { spawn_process(id, payload, len); return; }
  if (type == TTY_MODES) { tty_modes(id, payload, len); return; }
  if (type == TTY_PROBE) { send_int(TTY_PROBE_REPLY, id, probe_tty_signals()); return; }
  struct proc *p = find(id);
  if (!p) return; /* already ended: envd learns that from EXITED */
  switch (type) {
  case STDIN_DATA:
    if (p->in < 0 || p->close_in || len == 0) { send_int(STDIN_ERROR, id, EPIPE); break; }
    struct chunk *c = malloc(sizeof *c + len);
    if (!c) { send_int(STDIN_ERROR, id, ENOMEM); break; }
    c->next = NULL; c->len = len; c->off = 0;
    memcpy(c->data, payload, len);
    if (p->tail) p->tail->next = c; else p->queue = c;
    p->tail = c;
    flush_stdin(p);
    break;
  case STDIN_CLOSE: p->close_in = 1; flush_stdin(p); break;
  case PAUSE: p->paused = 1; break;
  case RESUME: p->paused = 0; break;
  case DETACH: close_fd(&p->out[0]); close_fd(&p->out[1]); maybe_finish(p); break;
  }
}

/* Reads what envd sent and handles every whole frame; returns 0 once envd has closed it. */
static int read_commands(void) {
  if (incap - inlen < READ_CHUNK) {
    size_t cap = incap ? incap * 2 : 2 * READ_CHUNK;
    char *grown = realloc(inbuf, cap);
    if (!grown) return 0;
    inbuf = grown; incap = cap;
  }
  ssize_t n = read(0, inbuf + inlen, incap - inlen);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return 0;
  inlen += (size_t)n;
  size_t at = 0;
  while (inlen - at >= HEADER) {
    uint32_t len = get32(inbuf + at);
    if (len > MAX_FRAME) { fprintf(stderr, "svc-spawner: frame of %u bytes refused\n", len); return 0; }
    if (inlen - at < HEADER + len) {
      if (incap < HEADER + len) { /* grow for this frame on the next read */
        memmove(inbuf, inbuf + at, inlen - at); inlen -= at; at = 0;
        char *grown = realloc(inbuf, HEADER + len + READ_CHUNK);
        if (!grown) return 0;
        inbuf = grown; incap = HEADER + len + READ_CHUNK;
      }
      break;
    }
    handle_frame((unsigned char)inbuf[at + 4], get32(inbuf + at + 5), inbuf + at + HEADER, len);
    at += HEADER + len;
  }
  memmove(inbuf, inbuf + at, inlen - at);
  inlen -= at;
  return 1;
}

static void read_output(struct proc *p, int which) {
  static char buf[READ_CHUNK];
  ssize_t n = read(p->out[which], buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) { close_fd(&p->out[which]); maybe_finish(p); return; }
  send_frame(which ? STDERR_DATA : STDOUT_DATA, p->id, buf, (size_t)n);
}

static void reap(void) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (struct proc *p = procs; p; p = p->next) {
      if (p->pid != pid) continue;
      p->exited = 1; p->status = status;
      maybe_finish(p);
      break;
    }
  }
}

static void on_sigchld(int sig) {
  (void)sig;
  int saved = errno;
  ssize_t ignored = write(sigchld_pipe[1], "", 1);
  (void)ignored;
  errno = saved;
}

/*
 * The relay of a terminal's signal keys, in the terminal's session. Only a process of that session
 * may ask the terminal for its foreground group (tcgetpgrp), so this one is forked by the session
 * leader before it becomes the user's shell. envd sends it SIGINT, SIGQUIT or SIGTSTP when the key
 * for it is typed; it sends the same to the terminal's foreground group, as the kernel would.
 */
static void relay_terminal_keys(pid_t envd, pid_t leader) {
  /* It ends with the shell, and so never holds the terminal open after it. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != leader) _exit(0);
  /* A group of its own: what the user sends to the shell's group (kill 0) is not for it. */
  setpgid(0, 0);
  sigset_t keys;
  sigemptyset(&keys);
  sigaddset(&keys, SIGINT); sigaddset(&keys, SIGQUIT); sigaddset(&keys, SIGTSTP);
  sigprocmask(SIG_BLOCK, &keys, NULL);
  for (;;) {
    siginfo_t info;
    int sig = sigwaitinfo(&keys, &info);
    if (sig < 0) { if (errno == EINTR) continue; _exit(1); }
    if (info.si_code != SI_USER || info.si_pid != envd) continue; /* only envd speaks for the keyboard */
    pid_t foreground = tcgetpgrp(0);
    if (foreground > 0) kill(-foreground, sig);
  }
}

/*
 * `svc-spawner pty-session FILE ARG...`: node-pty starts it as the terminal's session leader (the
 * terminal its controlling one). It forks the key relay, then execs FILE in its place, so that
 * FILE (the shell) is the session leader, with the pid envd knows.
 */
static int pty_session(char **argv) {
  pid_t envd = getppid(), leader = getpid();
  /* The name is how envd finds the relay (pty-signals.ts); set before the fork, the relay has it
   * from its first moment, and the exec below gives the leader the command's name. */
  prctl(PR_SET_NAME, "svc-pty-signals");
  pid_t relay = fork();
  if (relay == 0) relay_terminal_keys(envd, leader);
  /* The terminal still works without the relay, only without those keys. */
  if (relay < 0) fprintf(stderr, "svc-spawner: no relay for ^C, ^\\ and ^Z: fork: %s\n", strerror(errno));
  execvp(argv[0], argv);
  fprintf(stderr, "svc-spawner: %s: %s\n", argv[0], strerror(errno));
  return 127;
}

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], "pty-session") == 0) return pty_session(argv + 2);
  signal(SIGPIPE, SIG_IGN);
  if (pipe2(sigchld_pipe, O_CLOEXEC | O_NONBLOCK)) { perror("svc-spawner: pipe"); return 1; }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigchld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  fcntl(1, F_SETFD, FD_CLOEXEC);
  fcntl(0, F_SETFD, FD_CLOEXEC);
  for (;;) {
    size_t count = 2;
    for (struct proc *p = procs; p; p = p->next) count += 3;
    struct pollfd *fds = calloc(count, sizeof *fds);
    struct proc **owner = calloc(count, sizeof *owner);
    int *which = calloc(count, sizeof *which);
    if (!fds || !owner || !which) { fprintf(stderr, "svc-spawner: out of memory\n"); return 1; }
    size_t n = 0;
    fds[n++] = (struct pollfd){ 0, POLLIN, 0 };
    fds[n++] = (struct pollfd){ sigchld_pipe[0], POLLIN, 0 };
    for (struct proc *p = procs; p; p = p->next) {
      for (int w = 0; w < 2; w++) {
        if (p->out[w] < 0 || p->paused) continue;
        owner[n] = p; which[n] = w;
        fds[n++] = (struct pollfd){ p->out[w], POLLIN, 0 };
      }
      if (p->in >= 0 && p->queue) { owner[n] = p; which[n] = 2; fds[n++] = (struct pollfd){ p->in, POLLOUT, 0 }; }
    }
    if (poll(fds, n, -1) < 0 && errno != EINTR) { perror("svc-spawner: poll"); return 1; }
    if (fds[1].revents) { char drain[64]; while (read(sigchld_pipe[0], drain, sizeof drain) > 0) {} }
    /* Output first, then exits: a process's last bytes go out before its EXITED. */
    for (size_t i = 2; i < n; i++) {
      if (!fds[i].revents) continue;
      struct proc *p = owner[i];
      int still = 0;
      for (struct proc *q = procs; q; q = q->next) if (q == p) { still = 1; break; }
      if (!still) continue;
      if (which[i] == 2) flush_stdin(p);
      else if (p->out[which[i]] == fds[i].fd) read_output(p, which[i]);
    }
    reap();
    int alive = 1;
    if (fds[0].revents) alive = read_commands();
    free(fds); free(owner); free(which);
    if (!alive) return 0;
  }
}
