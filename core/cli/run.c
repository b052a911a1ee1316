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
#include "outfile.h"

/* A signal cancels the call in progress; the flag covers a signal that
 * arrives before the call exists. */
static luaretry_call *volatile running_call;
static luaretry_curl_many *volatile running_many;  /* a batch of URLs */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
  (void)sig;
  interrupted = 1;
  luaretry_call *c = running_call;
  if (c) luaretry_call_cancel(c);
  luaretry_curl_many *m = running_many;
  if (m) luaretry_curl_many_cancel(m);
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
  int index;               /* in a batch: the URL's number, from 1; else 0 */
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

/* The fields of a JSON log line, without the closing brace. */
static void json_fields(FILE *f, const luaretry_decision *d, int status, const char *error,
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
}

void cli_json_decision(FILE *f, const luaretry_decision *d, int status, const char *error,
                       const char *target) {
  json_fields(f, d, status, error, target);
  fputs("}\n", f);
  fflush(f);
}

/* A line of a batch: also the URL's number and the URL. */
static void json_line(const attempt_log *log, const luaretry_decision *d, int status,
                      const char *error) {
  if (!log->index) {
    cli_json_decision(log->json, d, status, error, log->target);
    return;
  }
  json_fields(log->json, d, status, error, log->target);
  fprintf(log->json, ",\"index\":%d,\"url\":", log->index);
  cli_json_string(log->json, log->target);
  fputs("}\n", log->json);
  fflush(log->json);
}

static void log_attempt(void *ud, const luaretry_outcome *o, const luaretry_decision *d) {
  attempt_log *log = ud;
  if (!o) {  /* stopped between attempts: a cancel, or the circuit opened */
    if (log->json) json_line(log, d, -1, NULL);
    if (log->verbosity > 0 && d->reason == LUARETRY_REASON_CIRCUIT_OPEN) {
      char who[32] = "";
      if (log->index) snprintf(who, sizeof who, "[%d] ", log->index);
      fprintf(stderr, "luaretry: %sbefore attempt %d: circuit_open (%s): %s\n", who,
              d->attempt + 1, d->rule, d->message ? d->message : "");
    }
    return;
  }
  if (log->json) json_line(log, d, o->status, o->error);
  char who[32] = "";  /* "[3] " in a batch */
  if (log->index) snprintf(who, sizeof who, "[%d] ", log->index);
  if (d->hook_error && log->verbosity > 0)
    fprintf(stderr, "luaretry: %s%s\n", who, d->hook_error);
  if (log->verbosity == 0) return;
  char outcome[64];
  if (o->error) snprintf(outcome, sizeof outcome, "%s error", o->error);
  else if (o->kind == LUARETRY_OUTCOME_COMMAND) snprintf(outcome, sizeof outcome, "exit %d", o->status);
  else snprintf(outcome, sizeof outcome, "%d", o->status);
  char of[32] = "";
  if (log->max_attempts > 0) snprintf(of, sizeof of, "/%ld", log->max_attempts);
  if (d->retry)
    fprintf(stderr, "luaretry: %sattempt %d%s: %s -> retry in %.3f s (%s; %s)\n", who,
            d->attempt, of, outcome, d->wait, luaretry_wait_source_name(d->wait_source),
            d->rule);
  else
    fprintf(stderr, "luaretry: %sattempt %d%s: %s -> %s (%s)%s%s\n", who, d->attempt, of,
            outcome, luaretry_reason_name(d->reason), d->rule, d->message ? ": " : "",
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

#define MAX_PARALLEL 1000

typedef struct {
  const char *policy;
  const char *url;
  char **words;            /* after POLICY: the URLs, or run()'s arguments */
  int nwords;
  const char *urls_file;   /* --urls FILE */
  const char *output_dir;  /* --output-dir DIR */
  long parallel;           /* --parallel N; 0: not given */
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

/* `words` has room for argc entries. */
static int parse_run(int argc, char **argv, run_args *a, char **words) {
  memset(a, 0, sizeof *a);
  a->words = words;
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
                                              "--log-json", "--urls", "--output-dir",
                                              "--parallel", NULL };
    int takes = 0;
    for (int k = 0; with_value[k]; k++) takes |= strcmp(s, with_value[k]) == 0;
    if (takes) {
      if (i + 1 >= argc) return cli_usage("run: %s needs a value", s);
      char *v = argv[++i];
      if (strcmp(s, "-X") == 0) a->method = v;
      else if (strcmp(s, "-d") == 0) a->data = v;
      else if (strcmp(s, "-o") == 0) a->output = v;
      else if (strcmp(s, "--log-json") == 0) a->log_json = v;
      else if (strcmp(s, "--urls") == 0) a->urls_file = v;
      else if (strcmp(s, "--output-dir") == 0) a->output_dir = v;
      else if (strcmp(s, "--parallel") == 0) {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (end == v || *end || errno || n < 1 || n > MAX_PARALLEL)
          return cli_usage("run: --parallel %s: expected a whole number from 1 to 1000", v);
        a->parallel = n;
      }
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
    else a->words[a->nwords++] = s;
  }
  if (!a->policy) return cli_usage("run: which POLICY?", NULL);
  if ((a->nwords || a->urls_file) && a->command)
    return cli_usage("run: a URL or a COMMAND, not both", NULL);
  if (a->command && (a->method || a->data || a->nheaders || a->output))
    return cli_usage("run: -X, -H, -d and -o are for URLs, not commands", NULL);
  if (a->command && (a->output_dir || a->parallel))
    return cli_usage("run: --parallel and --output-dir are for URLs, not commands", NULL);
  if (a->output && a->output_dir) return cli_usage("run: -o or --output-dir, not both", NULL);
  if (a->urls_file && a->data && strcmp(a->urls_file, "-") == 0 && strcmp(a->data, "@-") == 0)
    return cli_usage("run: --urls - and -d @- cannot both read standard input", NULL);
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

/* ---- run POLICY URL URL... | --urls FILE: a batch, each URL its own call */

/* Exit statuses from best to worst: the batch exits with the worst of its
 * calls.  An interruption beats everything, then a policy error, then a
 * refusal (budget, circuit), the deadline, exhausted attempts, a final
 * response, success. */
static int severity(int status) {
  switch (status) {
  case EXIT_OK: return 0;
  case EXIT_FINAL: return 1;
  case EXIT_EXHAUSTED: return 2;
  case EXIT_DEADLINE: return 3;
  case EXIT_REFUSED: return 4;
  case EXIT_POLICY: return 5;
  case EXIT_INTERRUPTED: return 6;
  }
  return 5;
}

typedef struct {
  attempt_log log;         /* log.index: the URL's number; log.target: redacted */
  luaretry_request req;
  char *name;              /* --output-dir: the file's name in DIR */
  char *path;              /* DIR/NAME */
  char number[16];         /* "[3]": how messages about the file start */
  outfile file;            /* --output-dir: the body, kept on success */
} batch_url;

typedef struct {
  batch_url *urls;
  const char *dir;         /* --output-dir, or NULL: standard output */
  outfile *out;            /* standard output */
  int worst;
  int interrupted;         /* some call ended cancelled */
} batch_run;

/* A line of --urls FILE: blank lines and # comments are skipped. */
static int read_url_list(const char *path, char ***urls, int *n, int *cap) {
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
  if (!f) {
    fprintf(stderr, "luaretry: --urls %s: %s\n", path, strerror(errno));
    return -1;
  }
  char *line = NULL;
  size_t size = 0;
  ssize_t len;
  int rc = 0;
  while ((len = getline(&line, &size, f)) >= 0) {
    char *s = line, *e = line + len;
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) e--;
    *e = '\0';
    if (!*s || *s == '#') continue;
    if (*n == *cap) {
      int grown = *cap ? *cap * 2 : 64;
      char **d = realloc(*urls, (size_t)grown * sizeof *d);
      if (!d) { rc = -1; break; }
      *urls = d;
      *cap = grown;
    }
    if (!((*urls)[*n] = strdup(s))) { rc = -1; break; }
    (*n)++;
  }
  if (rc == 0 && ferror(f)) {
    fprintf(stderr, "luaretry: --urls %s: %s\n", path, strerror(errno));
    rc = -1;
  } else if (rc != 0) {
    fprintf(stderr, "luaretry: --urls %s: out of memory\n", path);
  }
  free(line);
  if (f != stdin) fclose(f);
  return rc;
}

/* The file name for a URL: its last path segment, %-decoded, every byte
 * but [A-Za-z0-9._+~-] turned into '_', no leading dot, at most 200
 * bytes; "index" when empty. */
static int hex_digit(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static char *url_file_name(const char *url) {
  char name[201] = "";
  CURLU *u = curl_url();
  char *path = NULL;
  if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK && path) {
    const char *seg = strrchr(path, '/');
    seg = seg ? seg + 1 : path;
    size_t n = 0;
    for (; *seg && n < sizeof name - 1; seg++) {
      unsigned char c = (unsigned char)*seg;
      int hi, lo;
      if (c == '%' && (hi = hex_digit(seg[1])) >= 0 && (lo = hex_digit(seg[2])) >= 0) {
        c = (unsigned char)(hi * 16 + lo);
        seg += 2;
      }
      int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == '-' || c == '+' || c == '~';
      name[n++] = ok ? (char)c : '_';
    }
    name[n] = '\0';
    if (name[0] == '.') name[0] = '_';  /* no hidden files, no "." or ".." */
  }
  curl_free(path);
  curl_url_cleanup(u);
  return strdup(name[0] ? name : "index");
}

/* A set of names (open addressing), to make each file name unique. */
typedef struct {
  char **slot;
  size_t mask;
} name_set;

static size_t name_hash(const char *s) {
  size_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* 1 if added, 0 if already there. */
static int name_add(name_set *set, char *name) {
  size_t i = name_hash(name) & set->mask;
  while (set->slot[i]) {
    if (strcmp(set->slot[i], name) == 0) return 0;
    i = (i + 1) & set->mask;
  }
  set->slot[i] = name;
  return 1;
}

static char *join_path(const char *dir, const char *name) {
  size_t len = strlen(dir) + strlen(name) + 2;
  char *s = malloc(len);
  if (s) snprintf(s, len, "%s/%s", dir, name);
  return s;
}

/* Names for every URL, unique in the batch: NAME, then NAME.1, NAME.2 ...
 * for the URLs after the first with the same NAME; each its file DIR/NAME. */
static int assign_names(batch_url *urls, int n, const char *dir) {
  name_set set;
  size_t cap = 16;
  while (cap < (size_t)n * 2) cap *= 2;
  set.slot = calloc(cap, sizeof *set.slot);
  set.mask = cap - 1;
  if (!set.slot) return -1;
  for (int i = 0; i < n; i++) {
    char *base = url_file_name(urls[i].req.url);
    if (!base) { free(set.slot); return -1; }
    char *name = base;
    for (long k = 1; !name_add(&set, name); k++) {
      if (name != base) free(name);
      size_t len = strlen(base) + 24;
      name = malloc(len);
      if (!name) { free(base); free(set.slot); return -1; }
      snprintf(name, len, "%s.%ld", base, k);
    }
    if (name != base) free(base);
    urls[i].name = name;
    if (!(urls[i].path = join_path(dir, name))) { free(set.slot); return -1; }
    snprintf(urls[i].number, sizeof urls[i].number, "[%d]", urls[i].log.index);
    outfile_init(&urls[i].file, urls[i].path, urls[i].number, OUTFILE_PRIVATE);
  }
  free(set.slot);
  return 0;
}

/* A call ended: its file, its summary line, the batch's exit status. */
static void url_done(void *ud, size_t i, const luaretry_curl_job *job) {
  batch_run *br = ud;
  batch_url *u = &br->urls[i];
  const luaretry_curl_result *r = &job->result;
  int status;
  if (r->code != LUARETRY_OK)
    status = r->code == LUARETRY_E_POLICY || r->code == LUARETRY_E_LIMIT ? EXIT_POLICY
             : interrupted ? EXIT_INTERRUPTED : EXIT_POLICY;
  else status = cli_exit_status(r->final.reason);
  if (status == EXIT_INTERRUPTED) br->interrupted = 1;
  if (outfile_finish(br->dir ? &u->file : br->out, status == EXIT_OK) != 0) status = EXIT_FINAL;
  if (severity(status) > severity(br->worst)) br->worst = status;
  char last[64] = "none";
  if (r->final.attempt > 0) {
    if (r->error) snprintf(last, sizeof last, "%s error", r->error);
    else snprintf(last, sizeof last, "%d", r->status);
  }
  const char *verdict = r->code == LUARETRY_OK ? luaretry_reason_name(r->final.reason) : "error";
  const char *detail = r->code != LUARETRY_OK ? r->errmsg : NULL;
  fprintf(stderr, "luaretry: [%d] %s: %s, %d attempt%s, status %s, %.3f s, exit %d%s%s\n",
          u->log.index, u->log.target, verdict, r->final.attempt,
          r->final.attempt == 1 ? "" : "s", last, r->elapsed, status, detail ? ": " : "",
          detail ? detail : "");
}

static int run_batch(const run_args *a, luaretry_policy *p) {
  int status = EXIT_OK;
  char **list = NULL;
  int n = 0, cap = 0;
  for (int i = 0; i < a->nwords; i++) {
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      char **d = realloc(list, (size_t)cap * sizeof *d);
      if (!d) { status = EXIT_POLICY; break; }
      list = d;
    }
    if (!(list[n] = strdup(a->words[i]))) { status = EXIT_POLICY; break; }
    n++;
  }
  if (status == EXIT_OK && a->urls_file && read_url_list(a->urls_file, &list, &n, &cap) != 0)
    status = EXIT_USAGE;
  char why[256];
  for (int i = 0; status == EXIT_OK && i < n; i++) {
    if (!valid_url(list[i], why, sizeof why)) {
      char what[512];
      snprintf(what, sizeof what, "run: bad URL %s: %s", list[i], why);
      status = cli_usage("%s", what);
    }
  }
  if (status == EXIT_OK && n == 0) status = cli_usage("run: --urls %s holds no URL", a->urls_file);
  if (status == EXIT_OK && a->output) status = cli_usage("run: -o takes one URL; with several use --output-dir DIR%s", "");
  struct stat st;
  if (status == EXIT_OK && a->output_dir) {
    const char *why_not = stat(a->output_dir, &st) != 0 ? strerror(errno)
                          : !S_ISDIR(st.st_mode) ? "not a directory" : NULL;
    if (why_not) {
      fprintf(stderr, "luaretry: --output-dir %s: %s\n", a->output_dir, why_not);
      status = EXIT_USAGE;
    }
  }

  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  batch_url *urls = status == EXIT_OK ? calloc((size_t)n, sizeof *urls) : NULL;
  luaretry_curl_job *jobs = urls ? calloc((size_t)n, sizeof *jobs) : NULL;
  if (status == EXIT_OK && !jobs) {
    fprintf(stderr, "luaretry: out of memory\n");
    status = EXIT_POLICY;
  }
  FILE *json = NULL;
  if (status == EXIT_OK && a->log_json) {
    json = strcmp(a->log_json, "-") == 0 ? stderr : fopen(a->log_json, "w");
    if (!json) {
      fprintf(stderr, "luaretry: --log-json %s: %s\n", a->log_json, strerror(errno));
      status = EXIT_USAGE;
    }
  }
  luaretry_header headers[128];
  for (int i = 0; i < a->nheaders; i++) split_header(a->headers[i], &headers[i]);
  upload up = { 0 };
  if (status == EXIT_OK && a->data && upload_open(&up, a->data) != 0) status = EXIT_USAGE;
  outfile out;
  outfile_init(&out, NULL, NULL, OUTFILE_PRIVATE);  /* standard output */
  batch_run br = { urls, a->output_dir, &out, EXIT_OK, 0 };
  for (int i = 0; status == EXIT_OK && i < n; i++) {
    batch_url *u = &urls[i];
    u->log.verbosity = a->verbosity;
    u->log.json = json;
    u->log.max_attempts = t.max_attempts;
    u->log.index = i + 1;
    u->log.target = redacted_url(list[i]);
    if (!u->log.target) u->log.target = strdup("(URL)");
    u->req.method = a->method ? a->method : (a->data ? "POST" : "GET");
    u->req.url = list[i];
    u->req.headers = headers;
    u->req.header_count = (size_t)a->nheaders;
    u->req.body = a->data ? up.data : NULL;
    u->req.body_len = up.len;
    jobs[i].request = &u->req;
    jobs[i].sink = outfile_write;
    jobs[i].sink_ud = a->output_dir ? &u->file : &out;
    jobs[i].observer = log_attempt;
    jobs[i].observer_ud = &u->log;
  }
  if (status == EXIT_OK && a->output_dir && assign_names(urls, n, a->output_dir) != 0) {
    fprintf(stderr, "luaretry: out of memory\n");
    status = EXIT_POLICY;
  }

  luaretry_curl_many *m = NULL;
  if (status == EXIT_OK) {
    luaretry_code rc = luaretry_curl_many_new(&m);
    luaretry_call_options copt;
    luaretry_call_options_init(&copt);
    if (a->has_seed) copt.flags |= LUARETRY_CALL_SEED, copt.seed = a->seed;
    luaretry_curl_many_options mo;
    luaretry_curl_many_options_init(&mo);
    mo.max_transfers = a->parallel ? (size_t)a->parallel : 1;
    mo.call = &copt;
    mo.done = url_done;
    mo.done_ud = &br;
    if (rc == LUARETRY_OK) {
      cli_on_stop_signals(on_signal);
      running_many = m;
      if (interrupted) luaretry_curl_many_cancel(m);
      rc = luaretry_curl_perform_many(m, p, jobs, (size_t)n, &mo);
      running_many = NULL;
    }
    if (rc != LUARETRY_OK) {
      fprintf(stderr, "luaretry: %s\n", luaretry_strerror(rc));
      status = EXIT_POLICY;
    } else {
      status = br.worst;
      if (br.interrupted) fprintf(stderr, "luaretry: interrupted\n");
    }
  }
  if (a->stats) print_stats(p);
  luaretry_curl_many_free(m);
  if (urls) {
    for (int i = 0; i < n; i++) {
      outfile_finish(&urls[i].file, 0);  /* a temporary is never left behind */
      free((char *)urls[i].log.target);
      free(urls[i].name);
      free(urls[i].path);
    }
  }
  upload_close(&up);
  if (json && json != stderr) fclose(json);
  for (int i = 0; i < n; i++) free(list[i]);
  free(list);
  free(urls);
  free(jobs);
  return status;
}

static int run_cmd(int argc, char **argv, char **words) {
  run_args a;
  int status = parse_run(argc, argv, &a, words);
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
  /* One URL alone is one call, as ever; several (or --urls, or
   * --output-dir) make a batch. */
  int batch = !workflow && !a.command && (a.nwords > 1 || a.urls_file || a.output_dir);
  if (workflow) {
    if (a.method || a.data || a.nheaders) bad = "run: -X, -H and -d are for URLs; %s runs its own requests", bad_arg = a.policy;
    else if (a.urls_file || a.output_dir || a.parallel) bad = "run: --urls, --parallel and --output-dir are for URLs; %s runs its own requests", bad_arg = a.policy;
  } else if (!a.command && !batch) {
    if (a.nwords == 0) bad = "run: a URL, -- COMMAND, or a policy with run() is needed%s", bad_arg = "";
    else if (a.url = a.words[0], !valid_url(a.url, why, sizeof why)) bad = "run: bad URL: %s", bad_arg = why;
  }
  if (bad) {
    luaretry_policy_free(p);
    curl_global_cleanup();
    return cli_usage(bad, bad_arg);
  }
  if (batch) {
    if (a.verbosity > 1) luaretry_policy_set_log(p, script_print, NULL);
    if (a.verbosity > 0) luaretry_policy_on_breaker(p, breaker_log, NULL);
    status = run_batch(&a, p);
    luaretry_policy_free(p);
    curl_global_cleanup();
    return status;
  }

  if (a.verbosity > 1) luaretry_policy_set_log(p, script_print, NULL);
  if (a.verbosity > 0) luaretry_policy_on_breaker(p, breaker_log, NULL);
  attempt_log log = { a.verbosity, NULL, 0, NULL, 0 };
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
  outfile out;  /* finished even when upload_open() failed */
  outfile_init(&out, a.output, "-o", OUTFILE_PRIVATE);
  int ready = (!a.data || upload_open(&up, a.data) == 0) && outfile_create(&out) == 0;
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
      luaretry_request req = { .method = a.method ? a.method : (a.data ? "POST" : "GET"),
                               .url = a.url, .headers = headers,
                               .header_count = (size_t)a.nheaders,
                               .body = a.data ? up.data : NULL, .body_len = up.len };
      luaretry_curl_options co = { .sink = outfile_write, .sink_ud = &out };
      CURL *h = curl_easy_init();
      rc = h ? luaretry_curl_perform(p, c, h, &req, &co, &final) : LUARETRY_E_NOMEM;
      curl_easy_cleanup(h);
    } else if (workflow) {
      CURL *h = curl_easy_init();
      run_workflow wf = { p, (const char *const *)a.words, a.nwords, NULL, NULL, 0 };
      rc = h ? luaretry_curl_transport_new(h, c, &wf.transport) : LUARETRY_E_NOMEM;
      if (rc == LUARETRY_OK) rc = luaretry_call_run(c, workflow_attempt, &wf, &final);
      if (rc == LUARETRY_OK && final.reason != LUARETRY_REASON_CANCELLED)
        outfile_write(&out, wf.body, wf.body_len);
      luaretry_curl_transport_free(wf.transport);
      curl_easy_cleanup(h);
    } else {
      command cmd;
      memset(&cmd, 0, sizeof cmd);
      cmd.argv = a.command;
      rc = luaretry_call_run(c, run_command, &cmd, &final);
      if (rc == LUARETRY_OK && final.reason != LUARETRY_REASON_CANCELLED)
        outfile_write(&out, cmd.out, cmd.out_len);
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
  if (outfile_finish(&out, status == EXIT_OK) != 0 && status == EXIT_OK) status = EXIT_FINAL;
  if (a.stats) print_stats(p);
  luaretry_call_free(c);
  upload_close(&up);
  if (log.json && log.json != stderr) fclose(log.json);
  free(target);
  luaretry_policy_free(p);
  curl_global_cleanup();
  return status;
}

int cli_run(int argc, char **argv) {
  char **words = calloc((size_t)argc + 1, sizeof *words);
  if (!words) {
    fprintf(stderr, "luaretry: out of memory\n");
    return EXIT_POLICY;
  }
  int status = run_cmd(argc, argv, words);
  free(words);
  return status;
}
