/* log.c: what `run` tells as it goes: a line per attempt on standard error,
 * one JSON object per attempt with --log-json, the breaker's changes, the
 * script's print() with -v, and the counters with --stats. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "run.h"

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

/* A line of a batch has also the URL's number and the URL. */
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

/* Stopped between attempts: a cancel, or the circuit opened. */
static void log_stop(const attempt_log *log, const luaretry_decision *d, const char *who) {
  if (log->json) json_line(log, d, -1, NULL);
  if (log->verbosity > 0 && (d->reason == LUARETRY_REASON_CIRCUIT_OPEN ||
                             d->reason == LUARETRY_REASON_BUDGET))
    fprintf(stderr, "luaretry: %sbefore attempt %d: %s (%s): %s\n", who, d->attempt + 1,
            luaretry_reason_name(d->reason), d->rule, d->message ? d->message : "");
}

void log_attempt(void *ud, const luaretry_outcome *o, const luaretry_decision *d) {
  attempt_log *log = ud;
  char who[32] = "";  /* "[3] " in a batch */
  if (log->index) snprintf(who, sizeof who, "[%d] ", log->index);
  if (!o) {
    log_stop(log, d, who);
    return;
  }
  if (log->json) json_line(log, d, o->status, o->error);
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

static void script_print(void *ud, const char *line) {
  (void)ud;
  fprintf(stderr, "luaretry: script: %s\n", line);
}

/* The fleet's health: lost, and back (never a password in it). */
static void fleet_log(void *ud, const char *line) {
  (void)ud;
  fprintf(stderr, "luaretry: %s\n", line);
}

void log_policy_events(luaretry_policy *p, int verbosity) {
  if (verbosity > 1) luaretry_policy_set_log(p, script_print, NULL);
  if (verbosity > 0) luaretry_policy_on_breaker(p, breaker_log, NULL);
  luaretry_policy_on_fleet(p, verbosity > 0 ? fleet_log : NULL, NULL);
}

int log_json_open(const char *path, FILE **json) {
  *json = NULL;
  if (!path) return 0;
  *json = strcmp(path, "-") == 0 ? stderr : fopen(path, "w");
  if (*json) return 0;
  fprintf(stderr, "luaretry: --log-json %s: %s\n", path, strerror(errno));
  return -1;
}

void log_json_close(FILE *json) {
  if (json && json != stderr) fclose(json);
}

void log_stats(const luaretry_policy *p) {
  luaretry_metrics m;
  luaretry_policy_metrics(p, &m);
  fprintf(stderr, "luaretry: stats: calls %llu, attempts %llu, retries %llu, successes %llu, "
          "finals %llu, exhausted %llu, deadline stops %llu, policy errors %llu, "
          "cancelled %llu, budget refusals %llu, circuit refusals %llu, breaker openings %llu, "
          "waited %.3f s, breaker %s, guards %s\n",
          (unsigned long long)m.calls, (unsigned long long)m.attempts,
          (unsigned long long)m.retries, (unsigned long long)m.successes,
          (unsigned long long)m.finals, (unsigned long long)m.exhausted,
          (unsigned long long)m.deadline_stops, (unsigned long long)m.policy_errors,
          (unsigned long long)m.cancelled, (unsigned long long)m.budget_refusals,
          (unsigned long long)m.circuit_refusals, (unsigned long long)m.breaker_openings,
          m.time_waited, luaretry_breaker_state_name(m.breaker),
          luaretry_guards_scope_name(m.guards));
}
