/* check.c: `luaretry check POLICY...`: load each script, report every
 * problem (load errors, warnings, classifier failures), print the effective
 * tuning and what the classifier says of a fixed set of probe outcomes.
 * Only the public API (luaretry.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The probes: HTTP statuses, then status 0 with each transport failure;
 * for a command's policy exit statuses instead (success, a plain failure,
 * a usage error, EX_TEMPFAIL, cannot execute, not found, SIGINT, SIGKILL,
 * SIGTERM, the attempt's timeout); then those of --probe, written the
 * same way (probe.c). */
static const char *const PROBES[] = { "200",     "400",   "401",   "403",         "404",
                                      "408",     "409",   "429",   "500",         "501",
                                      "502",     "503",   "504",   "0 connect",   "0 timeout",
                                      "0 reset", "0 dns", "0 tls", "0 tls_verify" };
#define N_PROBES (sizeof PROBES / sizeof PROBES[0])
static const char *const COMMAND_PROBES[] = { "exit 0",   "exit 1",      "exit 2",   "exit 75",
                                              "exit 126", "exit 127",    "exit 130", "exit 137",
                                              "exit 143", "exit timeout" };
#define N_COMMAND_PROBES (sizeof COMMAND_PROBES / sizeof COMMAND_PROBES[0])
#define N_BUILTIN        (N_PROBES + N_COMMAND_PROBES)
#define PROBE_SEED       1

typedef struct {
  char label[256];     /* "503", "0 reset", "429 [Retry-After: 5]" */
  const char *verdict; /* success, retry, final, policy_error, exhausted... */
  char wait[48];       /* wait source, "after N s", or "-" */
  char rule[256];
  char *problem; /* policy error or hook error, owned */
} probe_row;

/* Text from the policy (its file name, its name, a message quoting what
 * its script said): control bytes and bytes that are not UTF-8 as \xHH,
 * so that a script cannot drive the terminal nor forge a line. */
static void show(const char *s) { cli_text(stdout, s); }

/* "PATH" then the rest of a heading line, printf-style. */
__attribute__((format(printf, 2, 3))) static void heading(const char *path, const char *fmt, ...) {
  show(path);
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
}

/* Prints each line of a multi-line message, indented (escaped as show()). */
static void print_lines(const char *prefix, const char *msg) {
  const char *s = msg && *msg ? msg : "(no detail)";
  while (*s) {
    const char *nl = strchr(s, '\n');
    size_t n = nl ? (size_t)(nl - s) : strlen(s);
    if (n) {
      printf("  %s", prefix);
      cli_text_block(stdout, s, n);
      putchar('\n');
    }
    s += n + (nl != NULL);
  }
}

/* Counts the non-empty lines of a message (at least 1). */
static int count_lines(const char *msg) {
  int n = 0;
  const char *s = msg ? msg : "";
  while (*s) {
    const char *nl = strchr(s, '\n');
    size_t len = nl ? (size_t)(nl - s) : strlen(s);
    if (len) n++;
    s += len + (nl != NULL);
  }
  return n ? n : 1;
}

/* "probe LABEL: why", malloc'ed (NULL when out of memory). */
static char *probe_problem(const probe_row *row, const char *why) {
  size_t need = strlen(row->label) + strlen(why) + 16;
  char *msg = malloc(need);
  if (msg) snprintf(msg, need, "probe %s: %s", row->label, why);
  return msg;
}

/* A probe the policy could not judge: a policy error and why. */
static int probe_failed(probe_row *row, const char *why) {
  row->verdict = "policy_error";
  snprintf(row->wait, sizeof row->wait, "-");
  snprintf(row->rule, sizeof row->rule, "-");
  row->problem = probe_problem(row, why);
  return -1;
}

/* The decision's row; -1 when it shows a problem (a policy error or a
 * hook's error). */
static int probe_verdict(probe_row *row, const luaretry_decision *d) {
  row->verdict = d->retry ? "retry" : luaretry_reason_name(d->reason);
  if (!d->retry)
    snprintf(row->wait, sizeof row->wait, "-");
  else if (d->wait_source == LUARETRY_WAIT_SCRIPT)
    snprintf(row->wait, sizeof row->wait, "after %g s", d->wait);
  else if (d->wait_source == LUARETRY_WAIT_SERVER || d->wait_source == LUARETRY_WAIT_RATE)
    snprintf(row->wait, sizeof row->wait, "%s %.4g s", luaretry_wait_source_name(d->wait_source),
             d->wait);
  else
    snprintf(row->wait, sizeof row->wait, "%s", luaretry_wait_source_name(d->wait_source));
  snprintf(row->rule, sizeof row->rule, "%s", d->rule ? d->rule : "-");
  const char *why = NULL;
  if (!d->retry && d->reason == LUARETRY_REASON_POLICY_ERROR)
    why = d->message ? d->message : "policy error";
  else if (d->hook_error)
    why = d->hook_error;
  if (!why) return 0;
  row->problem = probe_problem(row, why);
  return -1;
}

/* One probe: a fresh call on the virtual clock with a fixed seed; the
 * decision on its first attempt, its wait the whole wait before the
 * second (what the rate limiter or header pacing adds included). */
static int run_probe(luaretry_policy *p, const cli_probe *pr, probe_row *row) {
  memset(row, 0, sizeof *row);
  snprintf(row->label, sizeof row->label, "%s", pr->label);
  luaretry_call *c;
  luaretry_code rc = cli_probe_begin(p, PROBE_SEED, &c);
  if (rc != LUARETRY_OK) {
    char why[256];
    snprintf(why, sizeof why, "cannot begin a call: %s", luaretry_strerror(rc));
    return probe_failed(row, why);
  }
  luaretry_outcome o;
  cli_probe_outcome(p, pr, &o);
  char why[1024];
  luaretry_decision d, ask;
  /* run's steps: next (the first attempt's token), the attempt, its
   * report, the wait, next again (the retry's token, header pacing) */
  rc = cli_probe_go(c, &ask);
  if (rc == LUARETRY_OK && !ask.retry) { /* refused before it went */
    luaretry_call_free(c);
    return probe_verdict(row, &ask);
  }
  if (rc == LUARETRY_OK && cli_probe_prepare(c, pr, 1, &o.not_repeatable, why, sizeof why) != 0) {
    luaretry_call_free(c);
    return probe_failed(row, why);
  }
  if (rc == LUARETRY_OK) rc = luaretry_call_report(c, &o, &d);
  if (rc == LUARETRY_OK && d.retry) rc = cli_probe_retry(c, &d, &ask);
  int result;
  if (rc != LUARETRY_OK) {
    const char *m = luaretry_call_errmsg(c);
    result = probe_failed(row, m && *m ? m : luaretry_strerror(rc));
  } else {
    /* a retry refused as it would go is what the outcome comes to */
    result = probe_verdict(row, d.retry && !ask.retry ? &ask : &d);
  }
  luaretry_call_free(c);
  return result;
}

static void secs(char *buf, size_t n, double v) {
  if (v > 0)
    snprintf(buf, n, "%g s", v);
  else
    snprintf(buf, n, "none");
}

static void print_tuning(const luaretry_tuning *t) {
  char att[32], dl[32], to[32], ct[120] = "";
  if (t->max_attempts > 0)
    snprintf(att, sizeof att, "%ld", t->max_attempts);
  else
    snprintf(att, sizeof att, "no limit");
  secs(dl, sizeof dl, t->deadline);
  secs(to, sizeof to, t->attempt_timeout);
  if (t->connect_timeout > 0) snprintf(ct, sizeof ct, ", connect_timeout %g s", t->connect_timeout);
  if (t->stall_timeout > 0)
    snprintf(ct + strlen(ct), sizeof ct - strlen(ct), ", stall_timeout %g s below %ld B/s",
             t->stall_timeout, t->stall_speed);
  printf("  tuning: name ");
  show(t->name ? t->name : "?");
  printf(
    "; max_attempts %s, deadline %s, attempt_timeout %s%s, "
    "retry_after %s (max %g s), body_limit %zu B\n",
    att, dl, to, ct, t->retry_after ? "on" : "off", t->max_retry_after, t->body_limit);
  printf("  backoff: ");
  switch (t->kind) {
  case LUARETRY_BACKOFF_SCRIPT: printf("the script's backoff(n, previous)"); break;
  case LUARETRY_BACKOFF_EXPONENTIAL:
    printf("exponential %g s x%g, max %g s", t->initial, t->multiplier, t->max);
    break;
  case LUARETRY_BACKOFF_CONSTANT: printf("constant %g s", t->initial); break;
  case LUARETRY_BACKOFF_LINEAR:
    printf("linear %g s +%g s, max %g s", t->initial, t->step, t->max);
    break;
  default: printf("%s", luaretry_backoff_kind_name(t->kind)); break;
  }
  printf(", jitter %s", luaretry_jitter_name(t->jitter));
  if (t->jitter == LUARETRY_JITTER_ADDITIVE) printf(" (up to %g s)", t->jitter_max);
  printf(", cap_jitter %s; limits %g s", t->cap_jitter ? "true" : "false", t->time_limit);
  if (t->instruction_limit > 0) printf(" and %ld instructions", t->instruction_limit);
  printf(" per call into the script, %zu B per Lua state\n", t->memory_limit);
}

/* Every setting in force, as --set would spell it: from the library's
 * field table, so a new field shows up here by itself. */
static void print_settings(const luaretry_policy *p) {
  printf("  settings:");
  for (size_t i = 0; i < luaretry_field_count(); i++) {
    const luaretry_field *f = luaretry_field_at(i);
    char value[64];
    if (!f->settable || luaretry_policy_get(p, f->name, value, sizeof value) != LUARETRY_OK)
      continue;
    printf(" %s=", f->name);
    show(value);
  }
  printf("\n");
}

/* The top-level fields a required policy gave (require "http"), one line
 * per policy they came from; nothing when the script inherits nothing. */
static void print_origins(const luaretry_policy *p) {
  const char *done[16];
  size_t ndone = 0;
  for (size_t i = 0; i < luaretry_field_count() && ndone < 16; i++) {
    const char *from = luaretry_policy_origin(p, luaretry_field_at(i)->name);
    int seen = !from;
    for (size_t k = 0; k < ndone && !seen; k++) seen = strcmp(done[k], from) == 0;
    if (seen) continue;
    done[ndone++] = from;
    printf("  inherited from ");
    show(from);
    putchar(':');
    for (size_t j = i; j < luaretry_field_count(); j++) {
      const char *name = luaretry_field_at(j)->name;
      const char *o = strchr(name, '.') ? NULL : luaretry_policy_origin(p, name);
      if (o && strcmp(o, from) == 0) printf(" %s", name);
    }
    printf("\n");
  }
}

/* Applies the --set overrides; on failure writes why into msg. */
static int apply_sets(luaretry_policy *p, char **sets, int nsets, char *msg, size_t n) {
  for (int i = 0; i < nsets; i++) {
    char name[CLI_SET_NAME];
    const char *value;
    cli_split_set(sets[i], name, &value); /* checked by parse_check() */
    if (luaretry_policy_set(p, name, value) != LUARETRY_OK) {
      snprintf(msg, n, "--set %s", luaretry_policy_errmsg(p));
      return -1;
    }
  }
  return 0;
}

typedef struct {
  char **sets, **files;
  int nsets, nfiles;
  cli_probe *probes; /* the built-in ones (PROBES, COMMAND_PROBES), then --probe's */
  size_t nprobes;
} check_args;

/* A policy for commands: the shipped `command`, or one built on it
 * (require "command" gave it a field).  Its built-in probes are exit
 * statuses: an HTTP status would reach only its workflow branch, and a bad
 * option of its command branch would wait for the first command. */
static int command_policy(const luaretry_policy *p) {
  luaretry_tuning t;
  if (luaretry_policy_tuning(p, &t) == LUARETRY_OK && t.name && strcmp(t.name, "command") == 0)
    return 1;
  for (size_t i = 0; i < luaretry_field_count(); i++) {
    const char *from = luaretry_policy_origin(p, luaretry_field_at(i)->name);
    if (from && strcmp(from, "command") == 0) return 1;
  }
  return 0;
}

/* on_breaker, which no probe reaches, run once: NULL, or its problem. */
static char *probe_on_breaker(luaretry_policy *p) {
  char err[1024];
  if (luaretry_policy_probe_on_breaker(p, "open", err, sizeof err) == LUARETRY_OK) return NULL;
  size_t need = strlen(err) + 32;
  char *msg = malloc(need);
  if (msg) snprintf(msg, need, "on_breaker(\"open\"): %s", err);
  return msg;
}

/* run(http, args), which no probe reaches, run once without the network:
 * every request of it is answered 200 with the body "{}" (a success, and
 * JSON that decodes, so run() goes past its checks of the answer to what
 * it does with it), its arguments are ARGS (a URL each, so that one used
 * as the base of a request is one).  A run() that keeps asking (a poll
 * that waits for another body) is stopped after CHECK_RUN_REQUESTS
 * requests: not a problem. */
#define CHECK_RUN_REQUESTS 64
static const char *const CHECK_RUN_ARGS[] = { "http://check.invalid/ARG1",
                                              "http://check.invalid/ARG2",
                                              "http://check.invalid/ARG3" };

static luaretry_code answer_offline(void *ud, const luaretry_request *req, double timeout,
                                    luaretry_response *resp) {
  int *requests = ud;
  (void)req;
  (void)timeout;
  if (++*requests > CHECK_RUN_REQUESTS) return LUARETRY_E_CANCELLED;
  resp->status = 200;
  resp->body = "{}";
  resp->body_len = 2;
  return LUARETRY_OK;
}

/* NULL, or run()'s problem ("run: FILE:LINE: ..."). */
static char *probe_run(luaretry_policy *p) {
  if (!luaretry_policy_has_workflow(p)) return NULL;
  int requests = 0;
  luaretry_outcome out;
  luaretry_code rc =
    luaretry_policy_run_workflow(p, CHECK_RUN_ARGS, 3, answer_offline, &requests, 0, &out);
  if (rc == LUARETRY_OK || (rc == LUARETRY_E_CANCELLED && requests > CHECK_RUN_REQUESTS))
    return NULL;
  const char *m = luaretry_policy_errmsg(p);
  return strdup(m && *m ? m : luaretry_strerror(rc));
}

/* The first decision's problem, for a forced retry (below). */
static int first_problem(void *ud, const luaretry_decision *d) {
  char **problem = ud;
  const char *why = d->hook_error                               ? d->hook_error
                    : d->reason == LUARETRY_REASON_POLICY_ERROR ? d->message
                                                                : NULL;
  if (why && !*problem) {
    size_t need = strlen(why) + 40;
    if ((*problem = malloc(need))) snprintf(*problem, need, "a forced retry: %s", why);
  }
  return 1; /* one decision is enough */
}

/* When no probe retried, on_retry and a backoff function have not run
 * yet: one retry the engine forces (luaretry_simulate) runs them.  NULL,
 * or the problem. */
static char *probe_retry_hooks(luaretry_policy *p, const probe_row *rows, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(rows[i].verdict, "retry") == 0) return NULL;
  char *problem = NULL;
  luaretry_simulate(p, PROBE_SEED, 2, first_problem, &problem);
  return problem;
}

/* Loads path into a new policy with the --set overrides; NULL after
 * printing the file's block (not checked, does not load). */
static luaretry_policy *load_checked(const char *path, const check_args *a) {
  luaretry_policy *p;
  if (luaretry_policy_new(&p) != LUARETRY_OK) {
    heading(path, ": out of memory\n");
    return NULL;
  }
  luaretry_policy_warn_undefined_globals(p, 1);
  char msg[1024];
  if (apply_sets(p, a->sets, a->nsets, msg, sizeof msg) != 0) {
    heading(path, ": not checked (1 problem)\n");
    print_lines("", msg);
    luaretry_policy_free(p);
    return NULL;
  }
  if (luaretry_policy_load_file(p, path) != LUARETRY_OK) {
    char *err = cli_policy_message(luaretry_policy_errmsg(p), a->sets, a->nsets);
    const char *text = err ? err : luaretry_policy_errmsg(p);
    int n = count_lines(text);
    heading(path, ": does not load (%d problem%s)\n", n, n == 1 ? "" : "s");
    print_lines("", text);
    free(err);
    luaretry_policy_free(p);
    return NULL;
  }
  return p;
}

/* The verdict table, its probe column as wide as its longest label. */
static void print_rows(const probe_row *rows, size_t n) {
  int width = 13;
  for (size_t i = 0; i < n; i++)
    if ((int)strlen(rows[i].label) > width) width = (int)strlen(rows[i].label);
  printf("  %-*s %-13s %-16s %s\n", width, "probe", "verdict", "wait", "rule");
  for (size_t i = 0; i < n; i++) {
    printf("  %-*s %-13s %-16s ", width, rows[i].label, rows[i].verdict, rows[i].wait);
    show(rows[i].rule);
    putchar('\n');
  }
}

/* A hedge on a policy under which no request is idempotent never goes:
 * the warning for it (malloc'ed), or NULL.  Each method is asked bare
 * (no headers, no body), as is_idempotent would see it. */
static char *hedge_never(luaretry_policy *p) {
  static const char *const METHODS[] = {
    "GET", "HEAD", "OPTIONS", "PUT", "DELETE", "POST", "PATCH"
  };
  char delay[64];
  if (luaretry_policy_get(p, "hedge.delay", delay, sizeof delay) != LUARETRY_OK ||
      strcmp(delay, "none") == 0)
    return NULL;
  for (size_t i = 0; i < sizeof METHODS / sizeof METHODS[0]; i++) {
    luaretry_request r = { .method = METHODS[i], .url = "http://example.invalid/" };
    int yes = 0;
    if (luaretry_policy_is_idempotent(p, &r, &yes) != LUARETRY_OK || yes) return NULL;
  }
  return strdup(
    "hedge: no request (GET, HEAD, OPTIONS, PUT, DELETE, POST, PATCH) is "
    "idempotent under the policy's is_idempotent: no hedge would ever go");
}

/* A warning, "--set " before it when it is about an override (the
 * library names the field only, as in its errors). */
static void print_warning(const char *w, const check_args *a) {
  char *msg = cli_policy_message(w, a->sets, a->nsets);
  print_lines("warning: ", msg ? msg : w);
  free(msg);
}

/* The block's head and its problems: warnings (in line order), then the
 * probes' errors and the hooks' that no probe reached; the count. */
static size_t print_problems(const char *path, luaretry_policy *p, const check_args *a,
                             const probe_row *rows, size_t n, char *const *extra, size_t nextra) {
  size_t failed = 0;
  for (size_t i = 0; i < n; i++) failed += rows[i].problem != NULL;
  for (size_t i = 0; i < nextra; i++) failed += extra[i] != NULL;
  size_t nwarn = luaretry_policy_warning_count(p);
  char *hedge = hedge_never(p);
  size_t problems = nwarn + failed + (hedge != NULL);
  if (problems == 0)
    heading(path, ": ok\n");
  else
    heading(path, ": loads, %zu problem%s\n", problems, problems == 1 ? "" : "s");
  for (size_t i = 0; i < nwarn; i++) print_warning(luaretry_policy_warning(p, i), a);
  if (hedge) print_lines("warning: ", hedge);
  free(hedge);
  for (size_t i = 0; i < n; i++)
    if (rows[i].problem) print_lines("error: ", rows[i].problem);
  for (size_t i = 0; i < nextra; i++)
    if (extra[i]) print_lines("error: ", extra[i]);
  return problems;
}

/* Checks one file; prints its block; returns 1 when it is clean. */
static int check_file(const char *path, const check_args *a) {
  char found[CLI_PATH_MAX];
  if (luaretry_policy_find(path, found, sizeof found) == LUARETRY_OK) {
    path = found;
  } else if (!cli_policy_is_file(path)) {
    /* a bare name: the search path only, never a file of this folder */
    heading(path, ": does not load (1 problem)\n  no policy ");
    heading(path, "(.lua) on the search path (luaretry list shows it)\n");
    return 0;
  }
  luaretry_policy *p = load_checked(path, a);
  if (!p) return 0;
  /* the built-in probes of the policy's kind, then --probe's */
  const cli_probe *mine[2] = { a->probes, a->probes + N_BUILTIN };
  size_t count[2] = { N_PROBES, a->nprobes - N_BUILTIN };
  if (command_policy(p)) mine[0] = a->probes + N_PROBES, count[0] = N_COMMAND_PROBES;
  size_t n = count[0] + count[1];
  probe_row *rows = calloc(n, sizeof *rows);
  if (!rows) {
    heading(path, ": out of memory\n");
    luaretry_policy_free(p);
    return 0;
  }
  for (size_t i = 0; i < n; i++)
    run_probe(p, i < count[0] ? &mine[0][i] : &mine[1][i - count[0]], &rows[i]);
  char *extra[3] = { probe_on_breaker(p), probe_retry_hooks(p, rows, n), probe_run(p) };
  size_t problems = print_problems(path, p, a, rows, n, extra, 3);
  luaretry_tuning t;
  if (luaretry_policy_tuning(p, &t) == LUARETRY_OK) print_tuning(&t);
  print_settings(p);
  print_origins(p);
  print_rows(rows, n);
  for (size_t i = 0; i < n; i++) free(rows[i].problem);
  for (size_t i = 0; i < 3; i++) free(extra[i]);
  free(rows);
  luaretry_policy_free(p);
  return problems == 0;
}

/* 0, or the exit status after a usage message. */
static int parse_check(int argc, char **argv, check_args *a) {
  int dashdash = 0;
  for (int i = 0; i < argc; i++) {
    const char *s = argv[i];
    if (!dashdash && strcmp(s, "--") == 0) {
      dashdash = 1;
    } else if (!dashdash && strcmp(s, "--set") == 0) {
      char name[CLI_SET_NAME];
      const char *value;
      if (i + 1 >= argc || cli_split_set(argv[i + 1], name, &value) != 0)
        return cli_usage("check: --set %s: expected NAME=VALUE", i + 1 < argc ? argv[i + 1] : "");
      a->sets[a->nsets++] = argv[++i];
    } else if (!dashdash && strcmp(s, "--probe") == 0) {
      if (i + 1 >= argc)
        return cli_usage("check: --probe needs an outcome, e.g. '%s'", "429 [Retry-After: 5]");
      char err[1024];
      if (cli_probe_parse(argv[++i], &a->probes[a->nprobes], err, sizeof err) != 0) {
        cli_probe_free(&a->probes[a->nprobes]);
        return cli_usage("check: %s", err);
      }
      a->nprobes++;
    } else if (!dashdash && s[0] == '-' && s[1]) {
      return cli_usage("check: unknown option %s", s);
    } else {
      a->files[a->nfiles++] = argv[i];
    }
  }
  if (a->nfiles == 0) return cli_usage("check: %s", "which POLICY?");
  return 0;
}

/* Every file's block, and a total when there are several. */
static int check_files(const check_args *a) {
  int clean = 0;
  for (int i = 0; i < a->nfiles; i++) {
    if (i) putchar('\n');
    clean += check_file(a->files[i], a);
  }
  if (a->nfiles > 1)
    printf("\n%d file%s: %d clean, %d with problems\n", a->nfiles, a->nfiles == 1 ? "" : "s", clean,
           a->nfiles - clean);
  return clean == a->nfiles ? EXIT_OK : EXIT_POLICY;
}

/* The built-in probes, parsed as --probe's are. */
static int builtin_probes(check_args *a) {
  char err[512];
  for (size_t i = 0; i < N_BUILTIN; i++) {
    const char *spec = i < N_PROBES ? PROBES[i] : COMMAND_PROBES[i - N_PROBES];
    if (cli_probe_parse(spec, &a->probes[a->nprobes], err, sizeof err) != 0) {
      cli_probe_free(&a->probes[a->nprobes]); /* only out of memory */
      return -1;
    }
    a->nprobes++;
  }
  return 0;
}

int cli_check(int argc, char **argv) {
  check_args a = { malloc(sizeof(char *) * (size_t)(argc + 1)),
                   malloc(sizeof(char *) * (size_t)(argc + 1)),
                   0,
                   0,
                   calloc(N_BUILTIN + (size_t)argc, sizeof(cli_probe)),
                   0 };
  int status;
  if (!a.sets || !a.files || !a.probes || builtin_probes(&a) != 0) {
    fprintf(stderr, "luaretry: out of memory\n");
    status = EXIT_POLICY;
  } else if ((status = parse_check(argc, argv, &a)) == 0) {
    status = check_files(&a);
  }
  for (size_t i = 0; a.probes && i < a.nprobes; i++) cli_probe_free(&a.probes[i]);
  free(a.probes);
  free(a.sets);
  free(a.files);
  return status;
}
