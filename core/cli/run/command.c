/* command.c: run POLICY -- COMMAND, each attempt run as GNU timeout runs
 * a command.
 *
 * Each attempt is a child in a process group of its own.  At the attempt's
 * timeout, the deadline or a cancel the whole group gets SIGTERM, then
 * SIGKILL after KILL_GRACE (at once on a second stop signal); the attempt
 * ends when the group is gone, not when its pipes close, so a background
 * grandchild holding them can neither stretch the run nor outlive it.
 * luaretry is the children's subreaper: an orphaned grandchild stays ours
 * to wait for and reap.  (One that leaves the group, with setsid, is out
 * of reach, as it is of timeout(1).)
 *
 * The outcome: the exit status (128+N for signal N), the tail of the
 * error output as the body the policy judges; an attempt its timeout ended
 * is status 0 with error "timeout", as an HTTP attempt without response.
 * Every attempt's error output passes through to ours as it comes, whole
 * lines at a time (a partial last line is ended at the attempt's end), so
 * luaretry's own lines, written between attempts, never split one.
 * Standard output streams into `out`, emptied for each attempt, so only
 * the final attempt's reaches ours (a retried command's output is never
 * doubled in a pipe); with --stdout=live every attempt's passes through as
 * it comes.  Standard input, when luaretry's was spooled, is given whole to
 * every attempt; no descriptor of luaretry's leaks.  A --before-retry hook
 * runs inside the attempt it comes before, on the attempt's time. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "run.h"

#define STDERR_TAIL (64 * 1024)
#define KILL_GRACE  1.0  /* seconds from SIGTERM to SIGKILL */
#define TICK_MS     10   /* how soon a timeout, a cancel or the group's end is seen */
#define PENDING     4096 /* a partial error line held back; a longer one passes in pieces */

typedef struct {
  char **argv;
  int stdin_fd;          /* the spooled standard input, or -1 */
  int live_stdout;       /* --stdout=live: every attempt's, as it comes */
  outfile *out;          /* the attempt's standard output */
  char err[STDERR_TAIL]; /* the tail of its error output */
  size_t err_len;
  char pending[PENDING]; /* its error output after the last line end */
  size_t pending_len;
  const char *before_retry; /* --before-retry: sh -c it before each retry */
  int last_status;          /* the last attempt's own exit status; -1: none (timed out) */
} command;

/* One attempt's child: its group and what the parent watches. */
typedef struct {
  pid_t pid;            /* also the group's id */
  struct pollfd fds[2]; /* read ends of its standard output and error */
  int status;           /* its wait status, once reaped */
  int reaped;
  double start, term_at; /* term_at: when SIGTERM went (0: not yet) */
  int timed_out, killed;
} child;

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

/* All of it to fd, or as much as fd takes: a closed or full terminal
 * must not stop the command. */
static void write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR && !cli_stop_signals()) continue; /* a stop ends the wait */
    if (w <= 0) {
      if (w < 0 && errno == EAGAIN) {
        struct pollfd p = { fd, POLLOUT, 0 };
        if (poll(&p, 1, 1000) > 0) continue;
      }
      return;
    }
    s += w, n -= (size_t)w;
  }
}

/* The command's error output to ours up to its last line end (\n, or \r
 * for a progress line); the rest is held until its line ends. */
static void pass_errors(command *cmd, const char *s, size_t n) {
  while (n > 0) {
    size_t take = n < PENDING - cmd->pending_len ? n : PENDING - cmd->pending_len;
    memcpy(cmd->pending + cmd->pending_len, s, take);
    cmd->pending_len += take;
    s += take, n -= take;
    size_t end = cmd->pending_len;
    while (end > 0 && cmd->pending[end - 1] != '\n' && cmd->pending[end - 1] != '\r') end--;
    if (end == 0 && cmd->pending_len == PENDING) end = PENDING; /* a very long line */
    write_all(STDERR_FILENO, cmd->pending, end);
    memmove(cmd->pending, cmd->pending + end, cmd->pending_len - end);
    cmd->pending_len -= end;
  }
}

/* The attempt is over: a partial last line is ended, so what luaretry
 * writes next starts a line of its own. */
static void end_errors(command *cmd) {
  if (!cmd->pending_len) return;
  write_all(STDERR_FILENO, cmd->pending, cmd->pending_len);
  write_all(STDERR_FILENO, "\n", 1);
  cmd->pending_len = 0;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* In the child, before exec: its own group, the signals as luaretry found
 * them (default, or ignored when they were at start: nohup), the spool as
 * standard input, the pipes as output, no other descriptor. */
static void child_setup(int in_fd, int out_fd, int err_fd) {
  static const int RESET[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE };
  setpgid(0, 0);
  for (size_t i = 0; i < sizeof RESET / sizeof RESET[0]; i++)
    signal(RESET[i], cli_signal_ignored_at_start(RESET[i]) ? SIG_IGN : SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (in_fd >= 0) dup2(in_fd, STDIN_FILENO);
  dup2(out_fd, STDOUT_FILENO);
  dup2(err_fd, STDERR_FILENO);
  /* O_CLOEXEC is everywhere already; this also covers libraries' */
  close_range(3, ~0U, 0);
}

/* A fresh reading of the spool for this attempt: its own offset, from 0. */
static int reopen_stdin(int spool) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", spool);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 && (fd = dup(spool)) >= 0) lseek(fd, 0, SEEK_SET);
  return fd;
}

/* Starts the child in its own group with its output on pipes; 0 or -1. */
static int spawn(const command *cmd, child *ch) {
  int out_pipe[2], err_pipe[2], in_fd = -1;
  if (pipe2(out_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  if (pipe2(err_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    close(out_pipe[0]), close(out_pipe[1]);
    return -1;
  }
  if (cmd->stdin_fd >= 0) in_fd = reopen_stdin(cmd->stdin_fd);
  pid_t pid = cmd->stdin_fd >= 0 && in_fd < 0 ? -1 : fork();
  if (pid == 0) {
    fcntl(out_pipe[1], F_SETFL, 0); /* the child's ends block, as usual */
    fcntl(err_pipe[1], F_SETFL, 0);
    child_setup(in_fd, out_pipe[1], err_pipe[1]);
    execvp(cmd->argv[0], cmd->argv);
    int err = errno;
    /* as a shell says it: "not found" for a name looked up on PATH */
    dprintf(STDERR_FILENO, "luaretry: cannot run %s: %s\n", cmd->argv[0],
            err == ENOENT && !strchr(cmd->argv[0], '/') ? "command not found" : strerror(err));
    _exit(err == ENOENT ? 127 : 126); /* as a shell says it */
  }
  if (pid > 0) setpgid(pid, pid); /* whoever runs first, the group exists */
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (in_fd >= 0) close(in_fd);
  if (pid < 0) {
    close(out_pipe[0]), close(err_pipe[0]);
    return -1;
  }
  memset(ch, 0, sizeof *ch);
  ch->pid = pid;
  ch->fds[0] = (struct pollfd){ out_pipe[0], POLLIN, 0 };
  ch->fds[1] = (struct pollfd){ err_pipe[0], POLLIN, 0 };
  ch->start = now_seconds();
  return 0;
}

/* Reads what the pipes hold now (standard output streamed on). */
static void drain(command *cmd, child *ch) {
  char buf[65536];
  for (int i = 0; i < 2; i++) {
    for (int rounds = 0; ch->fds[i].fd >= 0 && rounds < 64; rounds++) {
      ssize_t got = read(ch->fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        if (i == 0 && cmd->live_stdout)
          write_all(STDOUT_FILENO, buf, (size_t)got);
        else if (i == 0)
          outfile_write(cmd->out, buf, (size_t)got);
        else
          keep_tail(cmd, buf, (size_t)got), pass_errors(cmd, buf, (size_t)got);
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got == 0 || errno != EAGAIN) {
        close(ch->fds[i].fd);
        ch->fds[i].fd = -1;
      }
      break;
    }
  }
}

/* Reaps the group's members that ended; 1 once none is left. */
static int group_gone(child *ch) {
  int ws;
  pid_t r;
  while ((r = waitpid(-ch->pid, &ws, WNOHANG)) > 0) {
    if (r == ch->pid) ch->status = ws, ch->reaped = 1;
  }
  return r < 0 && errno == ECHILD && kill(-ch->pid, 0) != 0;
}

/* SIGTERM at the timeout or a cancel, SIGKILL after the grace or at a
 * second stop signal. */
static void enforce(luaretry_call *c, child *ch, double timeout) {
  double now = now_seconds();
  int cancelled = luaretry_call_cancelled(c);
  if (!ch->term_at && (cancelled || (timeout > 0 && now - ch->start >= timeout))) {
    ch->timed_out = !cancelled;
    ch->term_at = now;
    kill(-ch->pid, SIGTERM);
    kill(-ch->pid, SIGCONT); /* a stopped member must see it too */
  }
  if (ch->term_at && !ch->killed && (now - ch->term_at >= KILL_GRACE || cli_stop_signals() >= 2)) {
    ch->killed = 1;
    kill(-ch->pid, SIGKILL);
  }
}

/* Watches the child until its whole group is gone. */
static void watch(command *cmd, luaretry_call *c, child *ch, double timeout) {
  cli_kill_on_second_signal(ch->pid);
  for (;;) {
    int open_fds = (ch->fds[0].fd >= 0) + (ch->fds[1].fd >= 0);
    if (open_fds)
      poll(ch->fds, 2, TICK_MS); /* -1 entries are skipped */
    else
      poll(NULL, 0, TICK_MS);
    drain(cmd, ch);
    if (group_gone(ch)) break;
    enforce(c, ch, timeout);
  }
  cli_kill_on_second_signal(0);
  drain(cmd, ch); /* what is there now; a writer outside the group is not waited for */
  for (int i = 0; i < 2; i++)
    if (ch->fds[i].fd >= 0) close(ch->fds[i].fd);
  int ws;
  while (waitpid(-1, &ws, WNOHANG) > 0) {
  } /* orphans that left the group */
}

/* --before-retry CMD: `sh -c CMD` in a group of its own, its output on
 * our standard error.  It is part of the attempt: it has the attempt's
 * `timeout` (0: none), and at that or a cancel its group gets SIGTERM, then
 * SIGKILL after KILL_GRACE (at once on a second stop signal), as a
 * command's does.  A failure is said, and the attempt goes ahead (the
 * policy judges what it gives); 1 when its time ran out, else 0. */
static int before_retry(const command *cmd, luaretry_call *c, int n, double timeout) {
  double start = now_seconds();
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    child_setup(null, STDERR_FILENO, STDERR_FILENO);
    execl("/bin/sh", "sh", "-c", cmd->before_retry, (char *)NULL);
    _exit(127);
  }
  if (pid < 0) {
    fprintf(stderr, "luaretry: --before-retry: cannot start sh: %s\n", strerror(errno));
    return 0;
  }
  setpgid(pid, pid);
  cli_kill_on_second_signal(pid);
  int ws = 0, cancelled = 0, expired = 0, killed = 0;
  double term_at = 0;
  for (;;) {
    pid_t r = waitpid(pid, &ws, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) { /* not ours to wait for any more: said, not guessed */
      fprintf(stderr, "luaretry: --before-retry: waiting for sh: %s\n", strerror(errno));
      ws = 0;
      break;
    }
    double now = now_seconds();
    if (!term_at && (luaretry_call_cancelled(c) || (timeout > 0 && now - start >= timeout))) {
      cancelled = luaretry_call_cancelled(c), expired = !cancelled;
      term_at = now;
      kill(-pid, SIGTERM);
      kill(-pid, SIGCONT); /* a stopped member must see it too */
    }
    if (term_at && !killed && (now - term_at >= KILL_GRACE || cli_stop_signals() >= 2))
      killed = 1, kill(-pid, SIGKILL);
    poll(NULL, 0, TICK_MS);
  }
  cli_kill_on_second_signal(0);
  kill(-pid, SIGKILL); /* what it left in its group */
  int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  if (expired)
    fprintf(
      stderr,
      "luaretry: --before-retry before attempt %d: stopped at the attempt's timeout (%.3g s): %s\n",
      n, timeout, cmd->before_retry);
  else if (code != 0 && !cancelled)
    fprintf(stderr, "luaretry: --before-retry before attempt %d: exit %d: %s\n", n, code,
            cmd->before_retry);
  return expired;
}

/* An attempt its time ended: no status of its own came, as an HTTP
 * attempt that timed out has no response: status 0 and error "timeout",
 * judged as that is (what our SIGTERM made of it says nothing about the
 * command). */
static void timed_out(command *cmd, luaretry_outcome *o) {
  o->status = 0;
  o->error = "timeout";
  cmd->last_status = -1;
}

/* A luaretry_operation_fn: one run of the command, after --before-retry's
 * (which takes its time from the attempt's: a hook that used all of it
 * leaves a "timeout" attempt, and the command is not run). */
static luaretry_code attempt(void *ud, luaretry_call *c, int n, double timeout,
                             luaretry_outcome *o) {
  command *cmd = ud;
  cmd->err_len = 0;
  luaretry_outcome_init(o);
  o->kind = LUARETRY_OUTCOME_COMMAND;
  o->body = cmd->err;
  o->method = "EXEC";
  o->url = cmd->argv[0];
  if (outfile_restart(cmd->out) != 0) return LUARETRY_E_OPERATION; /* this attempt's alone */
  if (n > 1 && cmd->before_retry) {
    double start = now_seconds();
    int spent = before_retry(cmd, c, n, timeout);
    if (luaretry_call_cancelled(c)) return LUARETRY_E_CANCELLED;
    if (timeout > 0) {
      double left = timeout - (now_seconds() - start);
      if (spent || left <= 0) {
        timed_out(cmd, o);
        o->error_detail = "--before-retry took the attempt's time; the command was not run";
        return LUARETRY_OK;
      }
      timeout = left;
    }
  }
  child ch;
  if (spawn(cmd, &ch) != 0) return LUARETRY_E_SYSTEM;
  watch(cmd, c, &ch, timeout);
  end_errors(cmd);
  int ws = ch.status;
  o->status = !ch.reaped ? 128 + SIGKILL : WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  cmd->last_status = !ch.reaped ? -1 : o->status;
  if (ch.timed_out) timed_out(cmd, o);
  o->body_len = cmd->err_len;
  return LUARETRY_OK;
}

luaretry_code command_run(luaretry_call *c, char **argv, int stdin_fd, int live_stdout,
                          const char *before, outfile *out, luaretry_decision *final,
                          int *last_status) {
  command *cmd = calloc(1, sizeof *cmd);
  *last_status = -1;
  if (!cmd) return LUARETRY_E_NOMEM;
  cmd->before_retry = before;
  cmd->last_status = -1;
  cmd->argv = argv;
  cmd->stdin_fd = stdin_fd;
  cmd->live_stdout = live_stdout;
  cmd->out = out;
  /* orphaned grandchildren come to us, to be waited for with their group */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  luaretry_code rc = luaretry_call_run(c, attempt, cmd, final);
  *last_status = cmd->last_status;
  free(cmd);
  return rc;
}

/* `run http -- CMD`: a policy whose classifier judges a plain failure
 * (exit 1) final never retries the command, which is seldom what was
 * meant; one warning line, from a probe on a call of its own (virtual
 * time, its own guards and counters: nothing of the run's changes). */
void command_policy_check(luaretry_policy *p, const char *policy) {
  luaretry_call *c;
  if (cli_probe_begin(p, 1, &c) != LUARETRY_OK) return;
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.kind = LUARETRY_OUTCOME_COMMAND;
  o.status = 1;
  o.body = "";
  o.method = "EXEC";
  o.url = "probe";
  luaretry_decision d;
  if (luaretry_call_report(c, &o, &d) == LUARETRY_OK && !d.retry &&
      d.reason == LUARETRY_REASON_FINAL) {
    fputs("luaretry: warning: policy ", stderr);
    cli_text(stderr, policy);
    fputs(" never retries a command (its classifier judges exit 1 final, ", stderr);
    cli_text(stderr, d.rule);
    fputs("): for commands use the policy `command` (luaretry run -- COMMAND)\n", stderr);
  }
  luaretry_call_free(c);
}
