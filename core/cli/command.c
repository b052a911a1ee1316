/* command.c: run POLICY -- COMMAND.  Each attempt runs COMMAND as a child:
 * its exit status is the outcome's status, the tail of its standard error
 * the body the policy judges, and the final attempt's standard output is
 * what the command prints. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

#define STDERR_TAIL (64 * 1024)

typedef struct {
  char **argv;
  char *out;               /* this attempt's standard output */
  size_t out_len, out_cap;
  char err[STDERR_TAIL];   /* the tail of its standard error */
  size_t err_len;
  int failed;
} command;

static void keep_tail(command *cmd, const char *s, size_t n) {
  if (n >= STDERR_TAIL) {
    memcpy(cmd->err, s + n - STDERR_TAIL, STDERR_TAIL);
    cmd->err_len = STDERR_TAIL;
  } else if (cmd->err_len + n > STDERR_TAIL) {
    size_t drop = cmd->err_len + n - STDERR_TAIL;
    memmove(cmd->err, cmd->err + drop, cmd->err_len - drop);
    memcpy(cmd->err + cmd->err_len - drop, s, n);
    cmd->err_len = STDERR_TAIL;
  } else {
    memcpy(cmd->err + cmd->err_len, s, n);
    cmd->err_len += n;
  }
}

static void keep_out(command *cmd, const char *s, size_t n) {
  if (cmd->out_len + n > cmd->out_cap) {
    size_t cap = cmd->out_cap ? cmd->out_cap : 65536;
    while (cap < cmd->out_len + n) cap *= 2;
    char *d = realloc(cmd->out, cap);
    if (!d) { cmd->failed = 1; return; }
    cmd->out = d;
    cmd->out_cap = cap;
  }
  memcpy(cmd->out + cmd->out_len, s, n);
  cmd->out_len += n;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Starts the child with its standard output and error on pipes; -1 when
 * that failed.  fds[0] and fds[1] are the read ends. */
static pid_t spawn(char **argv, struct pollfd fds[2]) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return -1;
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]), close(out_pipe[1]);
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(out_pipe[0]), close(out_pipe[1]), close(err_pipe[0]), close(err_pipe[1]);
    return -1;
  }
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    execvp(argv[0], argv);
    dprintf(STDERR_FILENO, "luaretry: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  fds[0] = (struct pollfd){ out_pipe[0], POLLIN, 0 };
  fds[1] = (struct pollfd){ err_pipe[0], POLLIN, 0 };
  return pid;
}

/* Reads both pipes until the child closes them; a cancel sends SIGTERM, the
 * attempt's timeout SIGKILL.  1 when the timeout killed it. */
static int collect(command *cmd, luaretry_call *c, pid_t pid, struct pollfd fds[2],
                   double timeout) {
  int open_fds = 2, timed_out = 0, killed = 0;
  double start = now_seconds();
  char buf[65536];
  while (open_fds > 0) {
    /* Short ticks: a cancel or the attempt timeout is seen within 20 ms. */
    int n = poll(fds, 2, 20);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2 && n > 0; i++) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        if (i == 0) keep_out(cmd, buf, (size_t)got);
        else keep_tail(cmd, buf, (size_t)got);
      } else if (got == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        open_fds--;
      }
    }
    if (!killed && (luaretry_call_cancelled(c) || (timeout > 0 && now_seconds() - start >= timeout))) {
      timed_out = !luaretry_call_cancelled(c);
      kill(pid, timed_out ? SIGKILL : SIGTERM);
      killed = 1;
    }
  }
  for (int i = 0; i < 2; i++) if (fds[i].fd >= 0) close(fds[i].fd);
  return timed_out;
}

/* A luaretry_operation_fn: one run of the command. */
static luaretry_code attempt(void *ud, luaretry_call *c, int n, double timeout,
                             luaretry_outcome *o) {
  (void)n;
  command *cmd = ud;
  cmd->out_len = cmd->err_len = 0;
  struct pollfd fds[2];
  pid_t pid = spawn(cmd->argv, fds);
  if (pid < 0) return LUARETRY_E_SYSTEM;
  int timed_out = collect(cmd, c, pid, fds, timeout);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {}
  luaretry_outcome_init(o);
  o->kind = LUARETRY_OUTCOME_COMMAND;
  o->status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  o->error = timed_out ? "timeout" : NULL;
  o->body = cmd->err;
  o->body_len = cmd->err_len;
  o->method = "EXEC";
  o->url = cmd->argv[0];
  return cmd->failed ? LUARETRY_E_NOMEM : LUARETRY_OK;
}

luaretry_code command_run(luaretry_call *c, char **argv, outfile *out, luaretry_decision *final) {
  command cmd;
  memset(&cmd, 0, sizeof cmd);
  cmd.argv = argv;
  luaretry_code rc = luaretry_call_run(c, attempt, &cmd, final);
  if (rc == LUARETRY_OK && final->reason != LUARETRY_REASON_CANCELLED)
    outfile_write(out, cmd.out, cmd.out_len);
  free(cmd.out);
  return rc;
}
