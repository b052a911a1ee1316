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
 * of reach, as it is of timeout(1).)  A group that reads the terminal (a
 * password prompt) gets it while luaretry is its foreground (foreground.h),
 * so the command can prompt as it would run alone.
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
 * it comes.  What passes through never waits for its reader (cmdout.h):
 * the timeout is watched while ours is full, and the attempt is over when
 * what it wrote is written, or dropped when its time runs out first (the
 * attempt is then a timeout, if it was its standard output).  A reader
 * that goes away (or another write error on standard output) ends the
 * command's pipe there, so its next write gets SIGPIPE as if it wrote
 * there itself, and the run, without another attempt (exit 1).  Standard
 * input, when luaretry's was spooled, is given whole to every attempt; no
 * descriptor of luaretry's leaks.  A --before-retry hook runs inside the
 * attempt it comes before, on the attempt's time. */
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
#include "cmdout.h"
#include "foreground.h"
#include "run.h"

#define STDERR_TAIL (64 * 1024)
#define KILL_GRACE  1.0 /* seconds from SIGTERM to SIGKILL */
#define TICK_MS     10  /* how soon a timeout, a cancel or the group's end is seen */

typedef struct {
  char **argv;
  int stdin_fd;          /* the spooled standard input, or -1 */
  int live_stdout;       /* --stdout=live: every attempt's, as it comes */
  outfile *out;          /* the attempt's standard output */
  char err[STDERR_TAIL]; /* the tail of its error output */
  size_t err_len;
  const char *before_retry;        /* --before-retry: sh -c it before each retry */
  int last_status;                 /* the last attempt's own exit status; -1: none (timed out) */
  fg_term term;                    /* the terminal, lent to a group that asks for it */
  cmdout to_out;                   /* --stdout=live: its standard output on to ours */
  cmdout to_err;                   /* its error output on to ours */
  size_t dropped_out, dropped_err; /* what its time's end left unwritten */
  char detail[160];                /* the outcome's error_detail */
} command;

/* One attempt's child: its group and what the parent watches. */
typedef struct {
  pid_t pid;            /* also the group's id */
  struct pollfd fds[2]; /* read ends of its standard output and error */
  int status;           /* its wait status, once reaped */
  int reaped;
  int gone;              /* no member of the group is left */
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
  /* the name as a log line shows text (an ESC or a newline in it escaped),
   * made here: after the fork only the write is safe */
  char shown[512] = "";
  FILE *f = fmemopen(shown, sizeof shown - 1, "w");
  if (f) cli_text(f, cmd->argv[0]), fclose(f);
  pid_t pid = cmd->stdin_fd >= 0 && in_fd < 0 ? -1 : fork();
  if (pid == 0) {
    fcntl(out_pipe[1], F_SETFL, 0); /* the child's ends block, as usual */
    fcntl(err_pipe[1], F_SETFL, 0);
    child_setup(in_fd, out_pipe[1], err_pipe[1]);
    execvp(cmd->argv[0], cmd->argv);
    int err = errno;
    /* as a shell says it: "not found" for a name looked up on PATH */
    dprintf(STDERR_FILENO, "luaretry: cannot run %s: %s\n", shown,
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

/* Where the child's pipe i (0 standard output, 1 error) goes on to ours
 * as it comes; NULL: into `out` (it never fills). */
static cmdout *passed_to(command *cmd, int i) {
  return i == 1 ? &cmd->to_err : cmd->live_stdout ? &cmd->to_out : NULL;
}

/* Our side of pipe i is closed, so a write of the command's gets SIGPIPE
 * from now on; its error output's partial last line is ended. */
static void close_pipe(command *cmd, child *ch, int i) {
  close(ch->fds[i].fd);
  ch->fds[i].fd = -1;
  if (i == 1) cmdout_end_line(&cmd->to_err);
}

/* Whether where pipe i goes has no reader left (or, standard output, any
 * write error): the command must not go on writing there. */
static int reader_gone(const command *cmd, int i) {
  return i == 0 ? cmd->live_stdout && cmd->to_out.err : cmd->to_err.err == EPIPE;
}

static void take(command *cmd, int i, const char *s, size_t n) {
  cmdout *to = passed_to(cmd, i);
  if (i == 1) keep_tail(cmd, s, n);
  if (to)
    cmdout_put(to, s, n);
  else
    outfile_write(cmd->out, s, n);
}

/* Moves what can move now: each pipe read as far as what passes it on has
 * room (the command waits to write meanwhile, as on a full pipe), what is
 * held written as far as ours takes it without waiting.  Once the group
 * is gone, a pipe with nothing more in it is closed: a writer outside the
 * group is not waited for. */
static void transfer(command *cmd, child *ch) {
  char buf[65536];
  for (int i = 0; i < 2; i++) {
    cmdout *to = passed_to(cmd, i);
    if (to) cmdout_flush(to);
    for (int rounds = 0; ch->fds[i].fd >= 0 && rounds < 64; rounds++) {
      size_t room = to && cmdout_room(to) < sizeof buf ? cmdout_room(to) : sizeof buf;
      if (room == 0) break;
      ssize_t got = read(ch->fds[i].fd, buf, room);
      if (got > 0) {
        take(cmd, i, buf, (size_t)got);
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && errno == EAGAIN && !ch->gone) break;
      close_pipe(cmd, ch, i);
    }
    if (ch->fds[i].fd >= 0 && reader_gone(cmd, i)) close_pipe(cmd, ch, i);
  }
}

/* The pipes to read and our descriptors that must take more: p holds 4. */
static nfds_t poll_set(command *cmd, const child *ch, struct pollfd *p) {
  nfds_t n = 0;
  for (int i = 0; i < 2; i++) {
    cmdout *to = passed_to(cmd, i);
    if (ch->fds[i].fd >= 0 && (!to || cmdout_room(to) > 0)) p[n++] = ch->fds[i];
    if (to && cmdout_poll(to, &p[n])) n++;
  }
  return n;
}

/* The attempt's time ran out with output not yet written: what the pipes
 * hold is read (the error output's tail is judged), and it and what is
 * held are dropped, counted. */
static void drop(command *cmd, child *ch) {
  char buf[65536];
  for (int i = 0; i < 2; i++) {
    for (int rounds = 0; ch->fds[i].fd >= 0 && rounds < 64; rounds++) {
      ssize_t got = read(ch->fds[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      if (i == 1) keep_tail(cmd, buf, (size_t)got);
      if (!passed_to(cmd, i))
        outfile_write(cmd->out, buf, (size_t)got);
      else if (!passed_to(cmd, i)->err)
        *(i == 0 ? &cmd->dropped_out : &cmd->dropped_err) += (size_t)got;
    }
    if (ch->fds[i].fd >= 0) close(ch->fds[i].fd);
    ch->fds[i].fd = -1;
  }
  cmd->dropped_out += cmdout_drop(&cmd->to_out);
  cmd->dropped_err += cmdout_drop(&cmd->to_err);
}

/* Reaps the group's members that ended; 1 once none is left.  With a
 * terminal, a member's stop may ask for it, or be the job's
 * (foreground.h): a read of the terminal or a Ctrl-Z stops the whole
 * group, its leader with it. */
static int group_gone(command *cmd, child *ch) {
  int ws, opt = WNOHANG | (cmd->term.fd >= 0 ? WUNTRACED : 0);
  pid_t r;
  while ((r = waitpid(-ch->pid, &ws, opt)) > 0) {
    if (WIFSTOPPED(ws))
      fg_stopped(&cmd->term, ch->pid, r, WSTOPSIG(ws));
    else if (r == ch->pid)
      ch->status = ws, ch->reaped = 1;
  }
  return r < 0 && errno == ECHILD && kill(-ch->pid, 0) != 0;
}

/* SIGTERM at the timeout or a cancel, SIGKILL after the grace or at a
 * second stop signal; 1 once the attempt's time is over. */
static int enforce(luaretry_call *c, child *ch, double timeout) {
  double now = now_seconds();
  int cancelled = luaretry_call_cancelled(c);
  int over = cancelled || (timeout > 0 && now - ch->start >= timeout);
  if (ch->gone) return over;
  if (!ch->term_at && over) {
    ch->timed_out = !cancelled;
    ch->term_at = now;
    kill(-ch->pid, SIGTERM);
    kill(-ch->pid, SIGCONT); /* a stopped member must see it too */
  }
  if (ch->term_at && !ch->killed && (now - ch->term_at >= KILL_GRACE || cli_stop_signals() >= 2)) {
    ch->killed = 1;
    kill(-ch->pid, SIGKILL);
  }
  return over;
}

/* Watches the child until its whole group is gone and what it wrote has
 * gone on to ours, or its time ran out (what is left is dropped). */
static void watch(command *cmd, luaretry_call *c, child *ch, double timeout) {
  cli_kill_on_second_signal(ch->pid);
  for (;;) {
    struct pollfd p[4];
    poll(p, poll_set(cmd, ch, p), TICK_MS);
    transfer(cmd, ch);
    if (!ch->gone && group_gone(cmd, ch)) {
      ch->gone = 1;
      transfer(cmd, ch); /* what the pipes hold now */
    }
    if (ch->gone && ch->fds[0].fd < 0 && ch->fds[1].fd < 0 && !cmd->to_out.len && !cmd->to_err.len)
      break;
    if (enforce(c, ch, timeout) && ch->gone) {
      drop(cmd, ch);
      break;
    }
  }
  cli_kill_on_second_signal(0);
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

static luaretry_code outcome(command *cmd, const child *ch, luaretry_outcome *o);

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
  cmd->dropped_out = cmd->dropped_err = 0;
  if (spawn(cmd, &ch) != 0) return LUARETRY_E_SYSTEM;
  watch(cmd, c, &ch, timeout);
  return outcome(cmd, &ch, o);
}

/* The attempt's outcome once its group is gone, the terminal luaretry's
 * again; LUARETRY_E_OPERATION (the run ends, exit 1) when what it wrote
 * could not be passed on. */
static luaretry_code outcome(command *cmd, const child *ch, luaretry_outcome *o) {
  int ws = ch->status, signaled = ch->reaped && WIFSIGNALED(ws);
  /* its modes back when it did not end on its own (a prompt killed with
   * echo off) */
  int lent = fg_take_back(&cmd->term, ch->term_at || !ch->reaped || signaled);
  /* Ctrl-C (or Ctrl-\) on the terminal reached the command only: a
   * command it killed is the user's stop of the run, as if the signal
   * came to luaretry (as bash takes a foreground job's); one that caught
   * it and exited is not */
  if (lent && signaled && !ch->term_at && (WTERMSIG(ws) == SIGINT || WTERMSIG(ws) == SIGQUIT))
    raise(WTERMSIG(ws));
  o->status = !ch->reaped ? 128 + SIGKILL : WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  cmd->last_status = !ch->reaped ? -1 : o->status;
  o->body_len = cmd->err_len;
  if (reader_gone(cmd, 0) || reader_gone(cmd, 1)) {
    /* luaretry's own failure: it wins over the command's status */
    cmd->last_status = -1;
    if (reader_gone(cmd, 0))
      fprintf(stderr, "luaretry: standard output: writing: %s\n", strerror(cmd->to_out.err));
    return LUARETRY_E_OPERATION;
  }
  /* standard output that did not all go on in its time: never a whole
   * attempt's, so never its success */
  if (ch->timed_out || cmd->dropped_out) timed_out(cmd, o);
  if (cmd->dropped_out || cmd->dropped_err) {
    snprintf(cmd->detail, sizeof cmd->detail, "%zu bytes of its %s not written (%s full)",
             cmd->dropped_out ? cmd->dropped_out : cmd->dropped_err,
             cmd->dropped_out ? "output" : "error output",
             cmd->dropped_out ? "standard output" : "standard error");
    o->error_detail = cmd->detail;
  }
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
  fg_open(&cmd->term);
  cmdout_open(&cmd->to_err, STDERR_FILENO, 1);
  if (live_stdout) cmdout_open(&cmd->to_out, STDOUT_FILENO, 0);
  /* orphaned grandchildren come to us, to be waited for with their group */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  luaretry_code rc = luaretry_call_run(c, attempt, cmd, final);
  *last_status = cmd->last_status;
  cmdout_close(&cmd->to_out);
  cmdout_close(&cmd->to_err);
  fg_close(&cmd->term);
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
