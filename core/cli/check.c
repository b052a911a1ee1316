/* check.c: `luaretry check POLICY...`: load each script, report every
 * problem (load errors, warnings, classifier failures), print the effective
 * tuning and what the classifier says of a fixed set of probe outcomes.
 * Only the public API (luaretry.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The probes: HTTP statuses, then status 0 with each transport failure. */
static const int PROBE_STATUS[] = { 200, 400, 401, 403, 404, 408, 409, 429,
                                    500, 501, 502, 503, 504 };
static const char *const PROBE_ERROR[] = { "connect", "timeout", "reset", "dns", "tls",
                                           "tls_verify" };
#define N_STATUS (sizeof PROBE_STATUS / sizeof PROBE_STATUS[0])
#define N_ERROR (sizeof PROBE_ERROR / sizeof PROBE_ERROR[0])
#define N_PROBES (N_STATUS + N_ERROR)
#define PROBE_SEED 1

typedef struct {
  char label[32];          /* "503", "0 reset" */
  const char *verdict;     /* success, retry, final, policy_error, exhausted... */
  char wait[48];           /* wait source, "after N s", or "-" */
  char rule[256];
  char *problem;           /* policy error or hook error, owned */
} probe_row;

/* Prints each line of a multi-line message, indented. */
static void print_lines(const char *prefix, const char *msg) {
  const char *s = msg && *msg ? msg : "(no detail)";
  while (*s) {
    const char *nl = strchr(s, '\n');
    size_t n = nl ? (size_t)(nl - s) : strlen(s);
    if (n) printf("  %s%.*s\n", prefix, (int)n, s);
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
  if (!d->retry) snprintf(row->wait, sizeof row->wait, "-");
  else if (d->wait_source == LUARETRY_WAIT_SCRIPT)
    snprintf(row->wait, sizeof row->wait, "after %g s", d->wait);
  else snprintf(row->wait, sizeof row->wait, "%s", luaretry_wait_source_name(d->wait_source));
  snprintf(row->rule, sizeof row->rule, "%s", d->rule ? d->rule : "-");
  const char *why = NULL;
  if (!d->retry && d->reason == LUARETRY_REASON_POLICY_ERROR)
    why = d->message ? d->message : "policy error";
  else if (d->hook_error) why = d->hook_error;
  if (!why) return 0;
  row->problem = probe_problem(row, why);
  return -1;
}

/* One probe: a fresh call on the virtual clock with a fixed seed; the
 * decision on its first attempt. */
static int run_probe(luaretry_policy *p, int status, const char *error, probe_row *row) {
  memset(row, 0, sizeof *row);
  if (error) snprintf(row->label, sizeof row->label, "0 %s", error);
  else snprintf(row->label, sizeof row->label, "%d", status);
  luaretry_call_options opts;
  luaretry_call_options_init(&opts);
  opts.flags = LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_SEED | LUARETRY_CALL_ISOLATED;
  opts.seed = PROBE_SEED;
  luaretry_call *c;
  luaretry_code rc = luaretry_call_begin(p, &opts, &c);
  if (rc != LUARETRY_OK) {
    char why[256];
    snprintf(why, sizeof why, "cannot begin a call: %s", luaretry_strerror(rc));
    return probe_failed(row, why);
  }
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.kind = LUARETRY_OUTCOME_HTTP;
  o.status = status;
  o.error = error;
  o.body = "";
  o.body_len = 0;
  o.method = "GET";
  luaretry_decision d;
  rc = luaretry_call_report(c, &o, &d);
  int result;
  if (rc != LUARETRY_OK) {
    const char *m = luaretry_call_errmsg(c);
    result = probe_failed(row, m && *m ? m : luaretry_strerror(rc));
  } else {
    result = probe_verdict(row, &d);
  }
  luaretry_call_free(c);
  return result;
}

static void secs(char *buf, size_t n, double v) {
  if (v > 0) snprintf(buf, n, "%g s", v);
  else snprintf(buf, n, "none");
}

static void print_tuning(const luaretry_tuning *t) {
  char att[32], dl[32], to[32], ct[120] = "";
  if (t->max_attempts > 0) snprintf(att, sizeof att, "%ld", t->max_attempts);
  else snprintf(att, sizeof att, "no limit");
  secs(dl, sizeof dl, t->deadline);
  secs(to, sizeof to, t->attempt_timeout);
  if (t->connect_timeout > 0) snprintf(ct, sizeof ct, ", connect_timeout %g s", t->connect_timeout);
  if (t->stall_timeout > 0)
    snprintf(ct + strlen(ct), sizeof ct - strlen(ct), ", stall_timeout %g s below %ld B/s",
             t->stall_timeout, t->stall_speed);
  printf("  tuning: name %s; max_attempts %s, deadline %s, attempt_timeout %s%s, "
         "retry_after %s (max %g s), body_limit %zu B\n",
         t->name ? t->name : "?", att, dl, to, ct, t->retry_after ? "on" : "off",
         t->max_retry_after, t->body_limit);
  printf("  backoff: ");
  switch (t->kind) {
  case LUARETRY_BACKOFF_SCRIPT: printf("the script's backoff(n, previous)"); break;
  case LUARETRY_BACKOFF_EXPONENTIAL:
    printf("exponential %g s x%g, max %g s", t->initial, t->multiplier, t->max); break;
  case LUARETRY_BACKOFF_CONSTANT: printf("constant %g s", t->initial); break;
  case LUARETRY_BACKOFF_LINEAR:
    printf("linear %g s +%g s, max %g s", t->initial, t->step, t->max); break;
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
    printf(" %s=%s", f->name, value);
  }
  printf("\n");
}

/* Applies the --set overrides; on failure writes why into msg. */
static int apply_sets(luaretry_policy *p, char **sets, int nsets, char *msg, size_t n) {
  for (int i = 0; i < nsets; i++) {
    char name[CLI_SET_NAME];
    const char *value;
    cli_split_set(sets[i], name, &value);  /* checked by parse_check() */
    if (luaretry_policy_set(p, name, value) != LUARETRY_OK) {
      snprintf(msg, n, "--set %s", luaretry_policy_errmsg(p));
      return -1;
    }
  }
  return 0;
}

/* Checks one file; prints its block; returns 1 when it is clean. */
static int check_file(const char *path, char **sets, int nsets) {
  luaretry_policy *p;
  if (luaretry_policy_new(&p) != LUARETRY_OK) {
    printf("%s: out of memory\n", path);
    return 0;
  }
  char msg[1024];
  if (apply_sets(p, sets, nsets, msg, sizeof msg) != 0) {
    printf("%s: not checked (1 problem)\n", path);
    print_lines("", msg);
    luaretry_policy_free(p);
    return 0;
  }
  char found[CLI_PATH_MAX];
  if (luaretry_policy_find(path, found, sizeof found) == LUARETRY_OK) path = found;
  if (luaretry_policy_load_file(p, path) != LUARETRY_OK) {
    char *err = cli_policy_message(luaretry_policy_errmsg(p), sets, nsets);
    const char *text = err ? err : luaretry_policy_errmsg(p);
    int n = count_lines(text);
    printf("%s: does not load (%d problem%s)\n", path, n, n == 1 ? "" : "s");
    print_lines("", text);
    free(err);
    luaretry_policy_free(p);
    return 0;
  }

  probe_row rows[N_PROBES];
  int failed = 0;
  for (size_t i = 0; i < N_PROBES; i++) {
    int status = i < N_STATUS ? PROBE_STATUS[i] : 0;
    const char *error = i < N_STATUS ? NULL : PROBE_ERROR[i - N_STATUS];
    if (run_probe(p, status, error, &rows[i]) != 0) failed++;
  }
  size_t nwarn = luaretry_policy_warning_count(p);
  size_t problems = nwarn + (size_t)failed;
  if (problems == 0) printf("%s: ok\n", path);
  else printf("%s: loads, %zu problem%s\n", path, problems, problems == 1 ? "" : "s");
  for (size_t i = 0; i < nwarn; i++) print_lines("warning: ", luaretry_policy_warning(p, i));
  for (size_t i = 0; i < N_PROBES; i++)
    if (rows[i].problem) print_lines("error: ", rows[i].problem);

  luaretry_tuning t;
  if (luaretry_policy_tuning(p, &t) == LUARETRY_OK) print_tuning(&t);
  print_settings(p);
  printf("  %-13s %-13s %-16s %s\n", "probe", "verdict", "wait", "rule");
  for (size_t i = 0; i < N_PROBES; i++) {
    printf("  %-13s %-13s %-16s %s\n", rows[i].label, rows[i].verdict, rows[i].wait,
           rows[i].rule);
    free(rows[i].problem);
  }
  luaretry_policy_free(p);
  return problems == 0;
}

typedef struct {
  char **sets, **files;
  int nsets, nfiles;
} check_args;

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
    clean += check_file(a->files[i], a->sets, a->nsets);
  }
  if (a->nfiles > 1)
    printf("\n%d file%s: %d clean, %d with problems\n", a->nfiles, a->nfiles == 1 ? "" : "s",
           clean, a->nfiles - clean);
  int status = clean == a->nfiles ? EXIT_OK : EXIT_POLICY;
  if (fflush(stdout) != 0) status = EXIT_POLICY;
  return status;
}

int cli_check(int argc, char **argv) {
  check_args a = { malloc(sizeof(char *) * (size_t)(argc + 1)),
                   malloc(sizeof(char *) * (size_t)(argc + 1)), 0, 0 };
  int status;
  if (!a.sets || !a.files) {
    fprintf(stderr, "luaretry: out of memory\n");
    status = EXIT_POLICY;
  } else if ((status = parse_check(argc, argv, &a)) == 0) {
    status = check_files(&a);
  }
  free(a.sets);
  free(a.files);
  return status;
}
