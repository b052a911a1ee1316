/* log.c: what `run` tells as it goes: a line per attempt on standard error,
 * one JSON object per attempt with --log-json, the breaker's changes, the
 * script's print() with -v, and the counters with --stats. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "run.h"

/* A decision's verdict: "in_flight" for an attempt that failed while
 * others of its call (a hedge, or the attempt it hedged) go on. */
static const char *verdict(const luaretry_decision *d) {
  if (!d->retry && d->reason == LUARETRY_REASON_NONE && d->in_flight) return "in_flight";
  return luaretry_reason_name(d->reason);
}

/* The fields of a JSON log line, without the closing brace. */
static void json_fields(FILE *f, const luaretry_decision *d, int status, const char *error,
                        const char *detail, const char *target) {
  fprintf(f, "{\"attempt\":%d,\"status\":", d->attempt);
  if (status >= 0)
    fprintf(f, "%d", status);
  else
    fputs("null", f);
  fputs(",\"error\":", f);
  cli_json_string(f, error);
  fputs(",\"error_detail\":", f);
  cli_json_string(f, detail);
  fputs(",\"verdict\":", f);
  cli_json_string(f, verdict(d));
  fprintf(f, ",\"wait\":%.6f,\"elapsed\":%.6f,\"next_timeout\":%.6f,\"rule\":", d->wait, d->elapsed,
          d->next_timeout);
  cli_json_string(f, d->rule);
  fputs(",\"wait_source\":", f);
  cli_json_string(f, d->retry ? luaretry_wait_source_name(d->wait_source) : NULL);
  fputs(",\"message\":", f);
  cli_json_string(f, d->message);
  fprintf(f, ",\"hedge\":%s,\"in_flight\":%d", d->hedge ? "true" : "false", d->in_flight);
  if (d->throttled) fputs(",\"throttled\":true", f);
  if (target) {
    fputs(",\"target\":", f);
    cli_json_string(f, target);
  }
}

/* Not flushed: the caller's stream, the caller's flush (simulate's keeps
 * the error of a full disk for its end, output.c). */
void cli_json_decision(FILE *f, const luaretry_decision *d, int status, const char *error,
                       const char *target) {
  json_fields(f, d, status, error, NULL, target);
  fputs("}\n", f);
}

/* The first error of a --log-json write, said once at its close (the
 * errno of a failed flush is gone by then). */
static int json_errno;

void log_json_flush(FILE *json) {
  if (fflush(json) != 0 && !json_errno) json_errno = errno ? errno : EIO;
}

/* A line of a batch has also the URL's number and the URL. */
static void json_line(const attempt_log *log, const luaretry_decision *d, int status,
                      const char *error, const char *detail) {
  json_fields(log->json, d, status, error, detail, log->target);
  if (log->request) fprintf(log->json, ",\"request\":%d", log->request);
  if (!log->index) {
    fputs("}\n", log->json);
    log_json_flush(log->json);
    return;
  }
  fprintf(log->json, ",\"index\":%d,\"url\":", log->index);
  cli_json_string(log->json, log->target);
  fputs("}\n", log->json);
  log_json_flush(log->json);
}

/* Stopped between attempts: a cancel, or the circuit opened. */
static void log_stop(const attempt_log *log, const luaretry_decision *d, const char *who) {
  if (log->json) json_line(log, d, -1, NULL, NULL);
  if (d->retry) { /* not a stop: the rate limiter's wait, added as the attempt goes */
    if (log->verbosity > 0)
      fprintf(stderr, "luaretry: %sbefore attempt %d: waiting %.3f s more (%s)\n", who,
              d->attempt + 1, d->wait, luaretry_wait_source_name(d->wait_source));
    return;
  }
  /* a refusal after a wait ends the call: -q's one line of a failure.
   * One before a single call's first attempt is that call's end, which
   * run_call tells from its final decision (as it tells one at the call's
   * begin, before any observer): told here too, it came twice. */
  int call_end = d->attempt == 0 && !log->index && !log->request;
  if ((log->verbosity > 0 || log->show_error) && !call_end &&
      (d->reason == LUARETRY_REASON_CIRCUIT_OPEN || d->reason == LUARETRY_REASON_BUDGET ||
       d->reason == LUARETRY_REASON_ADMISSION || d->reason == LUARETRY_REASON_RATE_LIMIT)) {
    fprintf(stderr, "luaretry: %sbefore attempt %d: %s (", who, d->attempt + 1,
            luaretry_reason_name(d->reason));
    cli_text(stderr, d->rule);
    fputs("): ", stderr);
    cli_text(stderr, d->message);
    fputc('\n', stderr);
  }
}

#define BODY_SHOWN 160 /* bytes of a final answer's body a log line quotes */

void log_body_line(FILE *f, const luaretry_outcome *o) {
  if (o->kind != LUARETRY_OUTCOME_HTTP || o->error || o->status <= 0 || !o->body_len) return;
  size_t n = 0;
  while (n < o->body_len && n < BODY_SHOWN && o->body[n] != '\n' && o->body[n] != '\r') n++;
  while (n > 0 && (o->body[n - 1] == ' ' || o->body[n - 1] == '\t')) n--;
  if (n == 0) return;
  fputs("; body: ", f);
  cli_text_len(f, o->body, n); /* by length: a NUL in it is shown, not the end */
  if (n < o->body_len && o->body[n] != '\n' && o->body[n] != '\r') fputs("...", f);
}

/* One attempt on standard error: "attempt N/M: OUTCOME -> VERDICT (...)",
 * then the policy's message and the transport's own, each escaped: a
 * server's bytes can reach them.  Made whole first, written at once. */
static void text_line(const attempt_log *log, const char *who, const luaretry_outcome *o,
                      const luaretry_decision *d) {
  char *line = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&line, &len);
  if (!f) return;
  char outcome[64];
  if (o->error)
    snprintf(outcome, sizeof outcome, "%s error", o->error);
  else if (o->kind == LUARETRY_OUTCOME_COMMAND)
    snprintf(outcome, sizeof outcome, "exit %d", o->status);
  else
    snprintf(outcome, sizeof outcome, "%d", o->status);
  char of[32] = "";
  if (log->max_attempts > 0) snprintf(of, sizeof of, "/%ld", log->max_attempts);
  fprintf(f, "luaretry: %sattempt %d%s%s: ", who, d->attempt, of, d->hedge ? " (hedge)" : "");
  cli_text(f, outcome);
  if (d->retry)
    fprintf(f, " -> retry in %.3f s (%s; ", d->wait, luaretry_wait_source_name(d->wait_source));
  else
    fprintf(f, " -> %s (", verdict(d));
  cli_text(f, d->rule);
  fputc(')', f);
  if (d->in_flight)
    fprintf(f,
            d->reason == LUARETRY_REASON_NONE ? "; %d more in flight" : "; %d in flight cancelled",
            d->in_flight);
  if (d->message) fputs(": ", f), cli_text(f, d->message);
  if (o->error_detail) fputs(": ", f), cli_text(f, o->error_detail);
  if (!d->retry && d->reason != LUARETRY_REASON_SUCCESS) log_body_line(f, o);
  fputc('\n', f);
  if (fclose(f) == 0) fwrite(line, 1, len, stderr);
  free(line);
}

double log_quota_max_wait(const luaretry_policy *p) {
  char on[16];
  if (luaretry_policy_get(p, "rate.headers", on, sizeof on) != LUARETRY_OK ||
      strcmp(on, "true") != 0)
    return 0;
  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  return t.max_retry_after;
}

/* -v: RateLimit fields that pacing ignores, and why. */
static void quota_note(const attempt_log *log, const char *who, const luaretry_outcome *o,
                       const luaretry_decision *d) {
  double r, t;
  luaretry_code v = luaretry_rate_quota(o->headers, o->header_count, 0, &r, &t); /* wall clock */
  if (v != LUARETRY_OK)
    fprintf(stderr, "luaretry: %sattempt %d: RateLimit fields ignored: they do not read\n", who,
            d->attempt);
  else if (r >= 0 && t > log->quota_max_wait)
    fprintf(stderr,
            "luaretry: %sattempt %d: RateLimit fields ignored: a reset in %.0f s is past "
            "max_retry_after (%g s)\n",
            who, d->attempt, t, log->quota_max_wait);
}

void log_attempt(void *ud, const luaretry_outcome *o, const luaretry_decision *d) {
  attempt_log *log = ud;
  if (log->verbosity > 0 || log->show_error) progress_yield(); /* a line may follow */
  char who[32] = ""; /* "[3] " in a batch, "request 2: " in a workflow */
  if (log->index) snprintf(who, sizeof who, "[%d] ", log->index);
  if (log->request) snprintf(who, sizeof who, "request %d: ", log->request);
  if (!o) {
    log_stop(log, d, who);
    return;
  }
  if (log->json) json_line(log, d, o->status, o->error, o->error_detail);
  if (log->verbosity > 1 && log->quota_max_wait > 0 && o->header_count) quota_note(log, who, o, d);
  if (d->hook_error && log->verbosity > 0) {
    fprintf(stderr, "luaretry: %s", who);
    cli_text(stderr, d->hook_error);
    fputc('\n', stderr);
  }
  /* quiet as curl's -sS: nothing but the line of a failure's end (a
   * cancel has its own line, "interrupted") */
  if (log->verbosity > 0 || (log->show_error && !d->retry && d->reason != LUARETRY_REASON_SUCCESS &&
                             d->reason != LUARETRY_REASON_CANCELLED))
    text_line(log, who, o, d);
}

static void breaker_log(void *ud, luaretry_breaker_state state) {
  (void)ud;
  fprintf(stderr, "luaretry: breaker: %s\n", luaretry_breaker_state_name(state));
}

static void script_print(void *ud, const char *line) {
  (void)ud;
  fputs("luaretry: script: ", stderr);
  cli_text(stderr, line);
  fputc('\n', stderr);
}

/* The fleet's health: lost, and back (never a password in it). */
static void fleet_log(void *ud, const char *line) {
  (void)ud;
  fputs("luaretry: ", stderr);
  cli_text(stderr, line);
  fputc('\n', stderr);
}

void log_policy_events(luaretry_policy *p, int verbosity) {
  if (verbosity > 1) luaretry_policy_on_log(p, script_print, NULL);
  if (verbosity > 0) luaretry_policy_on_breaker(p, breaker_log, NULL);
  luaretry_policy_on_fleet(p, verbosity > 0 ? fleet_log : NULL, NULL);
}

int log_json_open(const char *path, FILE **json, int verbose) {
  *json = NULL;
  if (!path) return 0;
  /* "e": O_CLOEXEC, so a command run per attempt never inherits it; a
   * stop signal that came before a FIFO's open is looked for first (the
   * open would wait for a reader without seeing it) */
  errno = EINTR;
  *json = strcmp(path, "-") == 0 ? stderr : cli_interrupted() ? NULL : fopen(path, "we");
  if (*json) return 0;
  if (errno == EINTR && cli_interrupted()) { /* a FIFO's open, cut by a stop signal */
    if (verbose) fprintf(stderr, "luaretry: interrupted\n");
    return EXIT_INTERRUPTED;
  }
  fprintf(stderr, "luaretry: --log-json %s: %s\n", path, strerror(errno));
  return EXIT_USAGE;
}

void log_json_close(FILE *json, const char *path) {
  if (!json || json == stderr) return;
  /* a full disk or a closed pipe lost lines: said, never in silence */
  log_json_flush(json);
  int lost = ferror(json);
  if (fclose(json) != 0 && !json_errno) json_errno = errno;
  if (json_errno || lost)
    fprintf(stderr, "luaretry: --log-json %s: lines not written: %s\n", path,
            strerror(json_errno ? json_errno : EIO));
}

void log_stats(const luaretry_policy *p) {
  luaretry_metrics m;
  luaretry_policy_metrics(p, &m);
  fprintf(stderr,
          "luaretry: stats: calls %llu, attempts %llu, retries %llu, successes %llu, "
          "finals %llu, exhausted %llu, deadline stops %llu, policy errors %llu, "
          "cancelled %llu, budget refusals %llu, circuit refusals %llu, breaker openings %llu, "
          "admission refusals %llu, waited %.3f s, breaker %s, guards %s, hedges %llu (won %llu, "
          "cancelled %llu), redis round trips %llu\n",
          (unsigned long long)m.calls, (unsigned long long)m.attempts,
          (unsigned long long)m.retries, (unsigned long long)m.successes,
          (unsigned long long)m.finals, (unsigned long long)m.exhausted,
          (unsigned long long)m.deadline_stops, (unsigned long long)m.policy_errors,
          (unsigned long long)m.cancelled, (unsigned long long)m.budget_refusals,
          (unsigned long long)m.circuit_refusals, (unsigned long long)m.breaker_openings,
          (unsigned long long)m.admission_refusals, m.time_waited,
          luaretry_breaker_state_name(m.breaker), luaretry_guards_scope_name(m.guards),
          (unsigned long long)m.hedges, (unsigned long long)m.hedges_won,
          (unsigned long long)m.hedges_cancelled, (unsigned long long)m.fleet_round_trips);
}

/* A download that starts over says so, once for each time. */
void run_resume_note(void *ud, const char *line) {
  const attempt_log *log = ud;
  /* a stop signal cut the attempt: no attempt follows to restart */
  if (log->verbosity == 0 || cli_interrupted()) return;
  progress_yield(); /* a line of its own, not one written into the meter */
  fprintf(stderr, "luaretry: ");
  if (log->index) fprintf(stderr, "[%d] ", log->index);
  fprintf(stderr, "%s: %s\n", log->target, line);
}
