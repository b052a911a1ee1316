/* cli_run.c: `luaretry run`, a URL through the libcurl helper or a command
 * through the blocking call.  Only public API: luaretry.h and
 * luaretry_curl.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "luaretry_curl.h"

/* A signal cancels the call in progress; the flag covers a signal that
 * arrives before the call exists. */
static luaretry_call *volatile running_call;
static volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
  (void)sig;
  interrupted = 1;
  luaretry_call *c = running_call;
  if (c) luaretry_call_cancel(c);
}

void cli_on_stop_signals(void (*handler)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);  /* a closed pipe is a write error, not a death */
}

int cli_exit_status(luaretry_reason r) {
  switch (r) {
  case LUARETRY_REASON_SUCCESS: return EXIT_OK;
  case LUARETRY_REASON_FINAL: return EXIT_FINAL;
  case LUARETRY_REASON_EXHAUSTED: return EXIT_EXHAUSTED;
  case LUARETRY_REASON_DEADLINE: return EXIT_DEADLINE;
  case LUARETRY_REASON_POLICY_ERROR: return EXIT_POLICY;
  case LUARETRY_REASON_CANCELLED: return EXIT_INTERRUPTED;
  case LUARETRY_REASON_BUDGET:
  case LUARETRY_REASON_CIRCUIT_OPEN: return EXIT_REFUSED;
  case LUARETRY_REASON_NONE: break;
  }
  return EXIT_POLICY;
}

/* ---- per-attempt log lines */

typedef struct {
  int verbosity;           /* 0 quiet, 1 normal, 2 verbose */
  FILE *json;              /* --log-json, or NULL */
  long max_attempts;
  const char *target;      /* URL without credentials, or the command */
} attempt_log;

void cli_json_string(FILE *f, const char *s) {
  if (!s) { fputs("null", f); return; }
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

void cli_json_decision(FILE *f, const luaretry_decision *d, int status, const char *error,
                       const char *target) {
  fprintf(f, "{\"attempt\":%d,\"status\":", d->attempt);
  if (status >= 0) fprintf(f, "%d", status);
  else fputs("null", f);
  fputs(",\"error\":", f);
  cli_json_string(f, error);
  fputs(",\"verdict\":", f);
  cli_json_string(f, luaretry_reason_name(d->reason));
  fprintf(f, ",\"wait\":%.6f,\"elapsed\":%.6f,\"next_timeout\":%.6f,\"rule\":", d->wait,
          d->elapsed, d->next_timeout);
  cli_json_string(f, d->rule);
  fputs(",\"wait_source\":", f);
  cli_json_string(f, d->retry ? luaretry_wait_source_name(d->wait_source) : NULL);
  fputs(",\"message\":", f);
  cli_json_string(f, d->message);
  if (target) {
    fputs(",\"target\":", f);
    cli_json_string(f, target);
  }
  fputs("}\n", f);
  fflush(f);
}

static void log_attempt(void *ud, const luaretry_outcome *o, const luaretry_decision *d) {
  attempt_log *log = ud;
  if (!o) {  /* cancelled during a wait */
    if (log->json) cli_json_decision(log->json, d, -1, NULL, log->target);
    return;
  }
  if (log->json) cli_json_decision(log->json, d, o->status, o->error, log->target);
  if (d->hook_error && log->verbosity > 0)
    fprintf(stderr, "luaretry: %s\n", d->hook_error);
  if (log->verbosity == 0) return;
  char outcome[64];
  if (o->error) snprintf(outcome, sizeof outcome, "%s error", o->error);
  else if (o->kind == LUARETRY_OUTCOME_COMMAND) snprintf(outcome, sizeof outcome, "exit %d", o->status);
  else snprintf(outcome, sizeof outcome, "%d", o->status);
  char of[32] = "";
  if (log->max_attempts > 0) snprintf(of, sizeof of, "/%ld", log->max_attempts);
  if (d->retry)
    fprintf(stderr, "luaretry: attempt %d%s: %s -> retry in %.3f s (%s; %s)\n", d->attempt,
            of, outcome, d->wait, luaretry_wait_source_name(d->wait_source), d->rule);
  else
    fprintf(stderr, "luaretry: attempt %d%s: %s -> %s (%s)%s%s\n", d->attempt, of, outcome,
            luaretry_reason_name(d->reason), d->rule, d->message ? ": " : "",
            d->message ? d->message : "");
}

static void breaker_log(void *ud, luaretry_breaker_state state) {
  (void)ud;
  fprintf(stderr, "luaretry: breaker: %s\n", luaretry_breaker_state_name(state));
}

/* --stats: the policy's counters, one line on standard error. */
static void print_stats(const luaretry_policy *p) {
  luaretry_metrics m;
  luaretry_policy_metrics(p, &m);
  fprintf(stderr, "luaretry: stats: calls %llu, attempts %llu, retries %llu, successes %llu, "
          "finals %llu, exhausted %llu, deadline stops %llu, policy errors %llu, "
          "cancelled %llu, budget refusals %llu, circuit refusals %llu, breaker openings %llu, "
          "waited %.3f s, breaker %s\n",
          (unsigned long long)m.calls, (unsigned long long)m.attempts,
          (unsigned long long)m.retries, (unsigned long long)m.successes,
          (unsigned long long)m.finals, (unsigned long long)m.exhausted,
          (unsigned long long)m.deadline_stops, (unsigned long long)m.policy_errors,
          (unsigned long long)m.cancelled, (unsigned long long)m.budget_refusals,
          (unsigned long long)m.circuit_refusals, (unsigned long long)m.breaker_openings,
          m.time_waited, luaretry_breaker_state_name(m.breaker));
}

static void script_print(void *ud, const char *line) {
  (void)ud;
  fprintf(stderr, "luaretry: script: %s\n", line);
}

/* ---- output: standard output, or -o FILE through a temporary beside it */

typedef struct {
  const char *path;        /* NULL: standard output */
  char tmp[4096];
  int fd;
  int failed;
} output;

static int output_open(output *out, const char *path) {
  memset(out, 0, sizeof *out);
  out->fd = STDOUT_FILENO;
  out->path = path;
  if (!path) return 0;
  if (snprintf(out->tmp, sizeof out->tmp, "%s.luaretry-XXXXXX", path) >= (int)sizeof out->tmp) {
    fprintf(stderr, "luaretry: -o %s: path too long\n", path);
    return -1;
  }
  out->fd = mkstemp(out->tmp);
  if (out->fd < 0) {
    fprintf(stderr, "luaretry: -o %s: cannot create a temporary file beside it: %s\n", path,
            strerror(errno));
    return -1;
  }
  return 0;
}

static size_t output_write(void *ud, const char *data, size_t len) {
  output *out = ud;
  size_t done = 0;
  while (done < len && !out->failed) {
    ssize_t n = write(out->fd, data + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fprintf(stderr, "luaretry: writing %s: %s\n", out->path ? out->path : "standard output",
              strerror(errno));
      out->failed = 1;
    } else done += (size_t)n;
  }
  return len;
}

/* Renames the temporary into place on success; removes it otherwise. */
static int output_close(output *out, int success) {
  if (!out->path) return out->failed ? -1 : 0;
  int ok = success && !out->failed && fsync(out->fd) == 0;
  if (close(out->fd) != 0) ok = 0;
  if (ok && rename(out->tmp, out->path) != 0) {
    fprintf(stderr, "luaretry: -o %s: %s\n", out->path, strerror(errno));
    ok = 0;
  }
  if (!ok) unlink(out->tmp);
  return ok || !success ? 0 : -1;
}

/* ---- upload data: -d DATA, -d @FILE (mapped, not copied), -d @- */

typedef struct {
  const char *data;
  size_t len;
  void *map;
  char *owned;
} upload;

static int upload_open(upload *u, const char *arg) {
  memset(u, 0, sizeof *u);
  if (arg[0] != '@') {
    u->data = arg;
    u->len = strlen(arg);
    return 0;
  }
  const char *path = arg + 1;
  if (strcmp(path, "-") == 0) {
    size_t cap = 0;
    for (;;) {
      if (u->len == cap) {
        cap = cap ? cap * 2 : 65536;
        char *d = realloc(u->owned, cap);
        if (!d) { fprintf(stderr, "luaretry: -d @-: out of memory\n"); return -1; }
        u->owned = d;
      }
      ssize_t n = read(STDIN_FILENO, u->owned + u->len, cap - u->len);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) { fprintf(stderr, "luaretry: -d @-: %s\n", strerror(errno)); return -1; }
      if (n == 0) break;
      u->len += (size_t)n;
    }
    u->data = u->owned ? u->owned : "";
    return 0;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    fprintf(stderr, "luaretry: -d @%s: %s\n", path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  u->len = (size_t)st.st_size;
  u->data = "";
  if (u->len) {
    u->map = mmap(NULL, u->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (u->map == MAP_FAILED) {
      fprintf(stderr, "luaretry: -d @%s: %s\n", path, strerror(errno));
      u->map = NULL;
      close(fd);
      return -1;
    }
    u->data = u->map;
  }
  close(fd);
  return 0;
}

static void upload_close(upload *u) {
  if (u->map) munmap(u->map, u->len);
  free(u->owned);
}

/* The URL as logs may show it: no user name or password. */
static char *redacted_url(const char *url) {
  CURLU *u = curl_url();
  char *out = NULL;
  if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK) {
    curl_url_set(u, CURLUPART_USER, NULL, 0);
    curl_url_set(u, CURLUPART_PASSWORD, NULL, 0);
    char *s = NULL;
    if (curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK) {
      out = strdup(s);
      curl_free(s);
    }
  }
  curl_url_cleanup(u);
  return out;
}

static int valid_url(const char *url, char *why, size_t size) {
  CURLU *u = curl_url();
  if (!u) { snprintf(why, size, "out of memory"); return 0; }
  CURLUcode rc = curl_url_set(u, CURLUPART_URL, url, 0);
  char *scheme = NULL;
  int ok = rc == CURLUE_OK && curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
           (strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0);
  if (rc != CURLUE_OK) snprintf(why, size, "%s", curl_url_strerror(rc));
  else if (!ok) snprintf(why, size, "only http and https URLs are supported");
  curl_free(scheme);
  curl_url_cleanup(u);
  return ok;
}

/* ---- run POLICY -- COMMAND: each attempt a child process */

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

static luaretry_code run_command(void *ud, luaretry_call *c, int attempt, double timeout,
                                 luaretry_outcome *o) {
  (void)attempt;
  command *cmd = ud;
  cmd->out_len = cmd->err_len = 0;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return LUARETRY_E_SYSTEM;
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]), close(out_pipe[1]);
    return LUARETRY_E_SYSTEM;
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(out_pipe[0]), close(out_pipe[1]), close(err_pipe[0]), close(err_pipe[1]);
    return LUARETRY_E_SYSTEM;
  }
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    execvp(cmd->argv[0], cmd->argv);
    dprintf(STDERR_FILENO, "luaretry: cannot run %s: %s\n", cmd->argv[0], strerror(errno));
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  struct pollfd fds[2] = { { out_pipe[0], POLLIN, 0 }, { err_pipe[0], POLLIN, 0 } };
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

/* ---- run POLICY [ARGS...]: the script's run(http, args), retried whole */

typedef struct {
  luaretry_policy *p;
  const char *const *args;
  int nargs;
  luaretry_curl_transport *transport;
  const char *body;        /* the last run's, valid until the next */
  size_t body_len;
} run_workflow;

static luaretry_code workflow_attempt(void *ud, luaretry_call *c, int attempt, double timeout,
                                      luaretry_outcome *o) {
  (void)c, (void)attempt;
  run_workflow *wf = ud;
  luaretry_code rc = luaretry_policy_run_workflow(wf->p, wf->args, wf->nargs,
                                                  luaretry_curl_transport_perform,
                                                  wf->transport, timeout, o);
  if (rc == LUARETRY_OK) wf->body = o->body, wf->body_len = o->body_len;
  return rc;
}

/* ---- the command */

typedef struct {
  const char *policy;
  const char *url;
  char *words[64];         /* after POLICY: the URL, or run()'s arguments */
  int nwords;
  char **command;
  const char *method;
  const char *data;
  const char *output;
  const char *log_json;
  uint64_t seed;
  int has_seed;
  int verbosity;
  int stats;
  char *headers[128];
  int nheaders;
  char *sets[64];
  int nsets;
} run_args;

static int parse_run(int argc, char **argv, run_args *a) {
  memset(a, 0, sizeof *a);
  a->verbosity = 1;
  for (int i = 0; i < argc; i++) {
    char *s = argv[i];
    if (strcmp(s, "--") == 0) {
      if (i + 1 >= argc) return cli_usage("run: -- needs a COMMAND", NULL);
      a->command = argv + i + 1;
      break;
    }
    if (strcmp(s, "-v") == 0) { a->verbosity = 2; continue; }
    if (strcmp(s, "-q") == 0) { a->verbosity = 0; continue; }
    if (strcmp(s, "--stats") == 0) { a->stats = 1; continue; }
    static const char *const with_value[] = { "-X", "-H", "-d", "-o", "--seed", "--set",
                                              "--log-json", NULL };
    int takes = 0;
    for (int k = 0; with_value[k]; k++) takes |= strcmp(s, with_value[k]) == 0;
    if (takes) {
      if (i + 1 >= argc) return cli_usage("run: %s needs a value", s);
      char *v = argv[++i];
      if (strcmp(s, "-X") == 0) a->method = v;
      else if (strcmp(s, "-d") == 0) a->data = v;
      else if (strcmp(s, "-o") == 0) a->output = v;
      else if (strcmp(s, "--log-json") == 0) a->log_json = v;
      else if (strcmp(s, "-H") == 0) {
        if (a->nheaders == 128) return cli_usage("run: too many -H", NULL);
        if (!strchr(v, ':') && (!v[0] || v[strlen(v) - 1] != ';'))
          return cli_usage("run: -H '%s': expected 'Name: value'", v);
        a->headers[a->nheaders++] = v;
      } else if (strcmp(s, "--set") == 0) {
        if (a->nsets == 64) return cli_usage("run: too many --set", NULL);
        a->sets[a->nsets++] = v;
      } else {
        char *end;
        errno = 0;
        unsigned long long seed = strtoull(v, &end, 10);
        if (end == v || *end || errno || v[0] == '-')
          return cli_usage("run: --seed %s: expected a whole number, 0 or more", v);
        a->seed = seed;
        a->has_seed = 1;
      }
      continue;
    }
    if (s[0] == '-' && s[1]) return cli_usage("run: unknown option %s", s);
    if (!a->policy) a->policy = s;
    else if (a->nwords < 64) a->words[a->nwords++] = s;
    else return cli_usage("run: too many arguments", NULL);
  }
  if (!a->policy) return cli_usage("run: which POLICY?", NULL);
  if (a->nwords && a->command) return cli_usage("run: a URL or a COMMAND, not both", NULL);
  if (a->command && (a->method || a->data || a->nheaders || a->output))
    return cli_usage("run: -X, -H, -d and -o are for URLs, not commands", NULL);
  return 0;
}

/* Splits "Name: value" into a header (pointing into the argument). */
static void split_header(char *line, luaretry_header *h) {
  char *colon = strchr(line, ':');
  if (!colon) {  /* "Name;" sends an empty header */
    line[strlen(line) - 1] = '\0';
    h->name = line;
    h->value = "";
    return;
  }
  *colon = '\0';
  char *v = colon + 1;
  while (*v == ' ' || *v == '\t') v++;
  h->name = line;
  h->value = v;
}

int cli_run(int argc, char **argv) {
  run_args a;
  int status = parse_run(argc, argv, &a);
  if (status) return status;
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    fprintf(stderr, "luaretry: cannot initialise libcurl\n");
    return EXIT_POLICY;
  }
  luaretry_policy *p = cli_load_policy(a.policy, a.sets, a.nsets, a.verbosity > 0);
  if (!p) { curl_global_cleanup(); return EXIT_POLICY; }
  /* A policy with run() takes the words after it as its arguments;
   * otherwise the one word is the URL. */
  int workflow = !a.command && luaretry_policy_has_workflow(p);
  const char *bad = NULL, *bad_arg = NULL;
  char why[256];
  if (workflow) {
    if (a.method || a.data || a.nheaders) bad = "run: -X, -H and -d are for URLs; %s runs its own requests", bad_arg = a.policy;
  } else if (!a.command) {
    if (a.nwords == 0) bad = "run: a URL, -- COMMAND, or a policy with run() is needed%s", bad_arg = "";
    else if (a.nwords > 1) bad = "run: unexpected argument %s (the policy has no run() to take it)", bad_arg = a.words[1];
    else if (a.url = a.words[0], !valid_url(a.url, why, sizeof why)) bad = "run: bad URL: %s", bad_arg = why;
  }
  if (bad) {
    luaretry_policy_free(p);
    curl_global_cleanup();
    return cli_usage(bad, bad_arg);
  }

  if (a.verbosity > 1) luaretry_policy_set_log(p, script_print, NULL);
  if (a.verbosity > 0) luaretry_policy_on_breaker(p, breaker_log, NULL);
  attempt_log log = { a.verbosity, NULL, 0, NULL };
  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  log.max_attempts = t.max_attempts;
  char *target = a.url ? redacted_url(a.url) : strdup(workflow ? t.name : a.command[0]);
  log.target = target;
  if (a.log_json) {
    log.json = strcmp(a.log_json, "-") == 0 ? stderr : fopen(a.log_json, "w");
    if (!log.json) {
      fprintf(stderr, "luaretry: --log-json %s: %s\n", a.log_json, strerror(errno));
      free(target);
      luaretry_policy_free(p);
      curl_global_cleanup();
      return EXIT_USAGE;
    }
  }

  upload up = { 0 };
  output out = { .path = NULL };  /* output_close() runs even when upload_open() failed */
  int ready = (!a.data || upload_open(&up, a.data) == 0) && output_open(&out, a.output) == 0;
  luaretry_call *c = NULL;
  luaretry_decision final;
  memset(&final, 0, sizeof final);
  luaretry_call_options opt;
  luaretry_call_options_init(&opt);
  if (a.has_seed) opt.flags |= LUARETRY_CALL_SEED, opt.seed = a.seed;
  luaretry_code rc = LUARETRY_OK;
  if (!ready) status = EXIT_USAGE;
  else if ((rc = luaretry_call_begin(p, &opt, &c)) != LUARETRY_OK) {
    fprintf(stderr, "luaretry: %s\n", luaretry_strerror(rc));
    status = EXIT_POLICY;
  } else {
    cli_on_stop_signals(on_signal);
    luaretry_call_observe(c, log_attempt, &log);
    running_call = c;
    if (interrupted) luaretry_call_cancel(c);
    if (a.url) {
      luaretry_header headers[128];
      for (int i = 0; i < a.nheaders; i++) split_header(a.headers[i], &headers[i]);
      luaretry_request req = { a.method ? a.method : (a.data ? "POST" : "GET"), a.url,
                               headers, (size_t)a.nheaders, a.data ? up.data : NULL, up.len };
      luaretry_curl_options co = { output_write, &out };
      CURL *h = curl_easy_init();
      rc = h ? luaretry_curl_perform(p, c, h, &req, &co, &final) : LUARETRY_E_NOMEM;
      curl_easy_cleanup(h);
    } else if (workflow) {
      CURL *h = curl_easy_init();
      run_workflow wf = { p, (const char *const *)a.words, a.nwords, NULL, NULL, 0 };
      rc = h ? luaretry_curl_transport_new(h, c, &wf.transport) : LUARETRY_E_NOMEM;
      if (rc == LUARETRY_OK) rc = luaretry_call_run(c, workflow_attempt, &wf, &final);
      if (rc == LUARETRY_OK && final.reason != LUARETRY_REASON_CANCELLED)
        output_write(&out, wf.body, wf.body_len);
      luaretry_curl_transport_free(wf.transport);
      curl_easy_cleanup(h);
    } else {
      command cmd;
      memset(&cmd, 0, sizeof cmd);
      cmd.argv = a.command;
      rc = luaretry_call_run(c, run_command, &cmd, &final);
      if (rc == LUARETRY_OK && final.reason != LUARETRY_REASON_CANCELLED)
        output_write(&out, cmd.out, cmd.out_len);
      free(cmd.out);
    }
    running_call = NULL;
    if (rc != LUARETRY_OK) {
      const char *pm = luaretry_policy_errmsg(p);
      fprintf(stderr, "luaretry: %s\n", pm[0] ? pm : luaretry_call_errmsg(c));
      status = rc == LUARETRY_E_POLICY || rc == LUARETRY_E_LIMIT ? EXIT_POLICY
               : interrupted ? EXIT_INTERRUPTED : EXIT_POLICY;
    } else {
      status = cli_exit_status(final.reason);
      if (final.reason == LUARETRY_REASON_CANCELLED) fprintf(stderr, "luaretry: interrupted\n");
    }
  }
  if (output_close(&out, status == EXIT_OK) != 0 && status == EXIT_OK) status = EXIT_FINAL;
  if (a.stats) print_stats(p);
  luaretry_call_free(c);
  upload_close(&up);
  if (log.json && log.json != stderr) fclose(log.json);
  free(target);
  luaretry_policy_free(p);
  curl_global_cleanup();
  return status;
}
