/* report.c: the end of a run, for machines: --stats=json (one object on
 * standard error; --stats alone is log.c's line for people), the summary
 * object that ends --log-json, and --metrics-file in Prometheus's text
 * exposition format, replaced whole (a temporary beside it, renamed) so
 * node_exporter's textfile collector never reads half a file. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "run.h"

/* The counters of luaretry_metrics, one table for JSON and Prometheus. */
typedef struct {
  const char *name; /* --stats=json's key; luaretry_NAME_total */
  const char *help;
  size_t offset; /* of a uint64_t in luaretry_metrics */
} counter;

#define C(field, help) \
  { #field, help, offsetof(luaretry_metrics, field) }
static const counter COUNTERS[] = {
  C(calls, "Calls begun."),
  C(attempts, "Attempts made."),
  C(retries, "Retries decided."),
  C(successes, "Calls that ended in success."),
  C(finals, "Calls stopped on an outcome judged final."),
  C(exhausted, "Calls that ran out of attempts."),
  C(deadline_stops, "Calls stopped by their deadline."),
  C(policy_errors, "Calls stopped by a policy error."),
  C(cancelled, "Calls cancelled."),
  C(budget_refusals, "Retries the retry budget refused."),
  C(circuit_refusals, "Calls or retries refused by an open circuit."),
  C(breaker_openings, "Times the circuit breaker opened."),
  C(gave_up, "Calls whose operation gave up."),
  C(server_waits_too_long, "Calls stopped by a Retry-After above max_retry_after."),
  C(hedges, "Hedges sent (attempts beside a slow one)."),
  C(hedges_won, "Hedges whose answer ended their call."),
  C(hedges_cancelled, "Attempts cancelled because another of their call answered first."),
  C(throttled, "Outcomes judged throttling (is_throttling, or a 429)."),
  C(admission_refusals, "Attempts admission control (the client-side throttle) refused."),
  C(rate_limited, "Calls whose rate-limiter wait would pass the deadline."),
  C(fleet_round_trips, "Commands sent to the fleet's Redis, each a request and its reply."),
};
#undef C
#define N_COUNTERS (sizeof COUNTERS / sizeof COUNTERS[0])

static uint64_t value_of(const luaretry_metrics *m, const counter *c) {
  uint64_t v;
  memcpy(&v, (const char *)m + c->offset, sizeof v);
  return v;
}

static void stats_json(const luaretry_metrics *m, const char *policy) {
  fputs("{\"policy\":", stderr);
  cli_json_string(stderr, policy);
  for (size_t i = 0; i < N_COUNTERS; i++)
    fprintf(stderr, ",\"%s\":%llu", COUNTERS[i].name,
            (unsigned long long)value_of(m, &COUNTERS[i]));
  fprintf(stderr, ",\"time_waited\":%.6f,\"budget_tokens\":%.6f,\"breaker\":\"%s\"}\n",
          m->time_waited, m->budget_tokens, luaretry_breaker_state_name(m->breaker));
}

/* A label value: backslash, double quote and newline escaped, as the
 * text format wants; a byte that is not UTF-8 (a policy's name may hold
 * any) becomes U+FFFD, so that the file stays valid UTF-8 and parses. */
static void label(FILE *f, const char *s) {
  size_t left = strlen(s);
  const unsigned char *p = (const unsigned char *)s;
  while (left) {
    size_t n = *p >= 0x80 ? cli_utf8_len(p, left) : 1;
    if (n == 0)
      fputs("\xEF\xBF\xBD", f), n = 1;
    else if (*p == '\\' || *p == '"')
      fprintf(f, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", f);
    else
      fwrite(p, 1, n, f);
    p += n;
    left -= n;
  }
}

static void metric(FILE *f, const char *name, const char *type, const char *help,
                   const char *policy) {
  fprintf(f, "# HELP luaretry_%s %s\n# TYPE luaretry_%s %s\nluaretry_%s{policy=\"", name, help,
          name, type, name);
  label(f, policy);
  fputs("\"} ", f);
}

/* What is known of a run that ended before its policy loaded: when, and
 * its exit status; no counter (none was kept, and a 0 would read as a
 * reset). */
static void prometheus_early(FILE *f, const char *policy, int exit_status) {
  metric(f, "exit_status", "gauge", "Exit status of the run that wrote this file.", policy);
  fprintf(f, "%d\n", exit_status);
  metric(f, "last_run_timestamp_seconds", "gauge", "When that run ended (Unix time).", policy);
  fprintf(f, "%lld\n", (long long)time(NULL));
}

static void prometheus(FILE *f, const luaretry_metrics *m, const char *policy, int exit_status) {
  char name[64];
  for (size_t i = 0; i < N_COUNTERS; i++) {
    snprintf(name, sizeof name, "%s_total", COUNTERS[i].name);
    metric(f, name, "counter", COUNTERS[i].help, policy);
    fprintf(f, "%llu\n", (unsigned long long)value_of(m, &COUNTERS[i]));
  }
  metric(f, "wait_seconds_total", "counter", "Seconds of waits decided.", policy);
  fprintf(f, "%.6f\n", m->time_waited);
  metric(f, "budget_tokens", "gauge", "Retry budget tokens left (0 without a budget).", policy);
  fprintf(f, "%.6f\n", m->budget_tokens);
  metric(f, "breaker_state", "gauge", "Circuit breaker: 0 closed, 1 open, 2 half-open.", policy);
  fprintf(f, "%d\n", (int)m->breaker);
  prometheus_early(f, policy, exit_status);
}

/* The whole text into memory first, then one outfile: replaced whole.
 * m NULL: no policy loaded. */
static void metrics_file(const char *path, const luaretry_metrics *m, const char *policy,
                         int exit_status) {
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (!mem) {
    fprintf(stderr, "luaretry: --metrics-file %s: out of memory\n", path);
    return;
  }
  if (m)
    prometheus(mem, m, policy, exit_status);
  else
    prometheus_early(mem, policy, exit_status);
  fclose(mem);
  outfile out;
  outfile_init(&out, path, "--metrics-file");
  if (outfile_create(&out) == 0) outfile_write(&out, text, len);
  outfile_finish(&out, 1);
  free(text);
}

void report_end(const run_args *a, const luaretry_policy *p, FILE *json, luaretry_reason reason,
                long attempts, int exit_status) {
  luaretry_metrics m;
  luaretry_tuning t;
  memset(&m, 0, sizeof m);
  /* no policy (it did not load): named as given */
  const char *name = a->policy ? a->policy : "";
  if (p && (luaretry_policy_metrics(p, &m) != LUARETRY_OK ||
            luaretry_policy_tuning(p, &t) != LUARETRY_OK))
    return;
  if (p) name = t.name;
  if (json) {
    /* no verdict without a decision: a usage error, a run that ended
     * before its call (a policy that did not load, an interrupted read) */
    int decided = exit_status != EXIT_USAGE && reason != LUARETRY_REASON_NONE;
    fputs("{\"summary\":true,\"verdict\":", json);
    cli_json_string(json, decided ? luaretry_reason_name(reason) : NULL);
    fprintf(json, ",\"attempts\":%ld,\"total_wait\":%.6f,\"exit\":%d,\"policy\":",
            /* hedges: attempts made, not the number of the one that decided */
            attempts < 0 || m.hedges ? (long)m.attempts : attempts, m.time_waited, exit_status);
    cli_json_string(json, name);
    fprintf(json, ",\"hedges\":%llu,\"hedges_won\":%llu,\"hedges_cancelled\":%llu}\n",
            (unsigned long long)m.hedges, (unsigned long long)m.hedges_won,
            (unsigned long long)m.hedges_cancelled);
    log_json_flush(json);
  }
  /* --stats tells a policy's counters: none without one */
  if (p && a->stats == 1) log_stats(p);
  if (p && a->stats == 2) stats_json(&m, name);
  if (a->metrics_file) metrics_file(a->metrics_file, p ? &m : NULL, name, exit_status);
}

void report_early(const run_args *a, const luaretry_policy *p, int exit_status, int log) {
  FILE *json = NULL;
  /* a log that cannot be opened is said (the run's status stays its own) */
  if (log) log_json_open(a->log_json, &json, 0);
  report_end(a, p, json, LUARETRY_REASON_NONE, 0, exit_status);
  log_json_close(json, a->log_json);
}
