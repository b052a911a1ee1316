/* fleet_report.c: `luaretry simulate POLICY --clients N --fleet`: N clients
 * with guards of their own (a process each) next to N clients sharing the
 * fleet's (luaretry_simulate_herd), and the load each puts on the failing
 * service: attempts per first attempt.  Public API only. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

#define N_STOPS (LUARETRY_REASON_RATE_LIMIT + 1)

static void print_stops(const luaretry_herd_result *r) {
  const char *sep = "";
  for (int k = 0; k < N_STOPS; k++) {
    if (!r->stops[k]) continue;
    printf("%s%s %llu", sep, k ? luaretry_reason_name((luaretry_reason)k) : "capped",
           (unsigned long long)r->stops[k]);
    sep = ", ";
  }
}

static void print_text(const char *what, const luaretry_herd_result *r) {
  printf("  %-34s %6llu attempts for %llu first attempts: %.2f per first attempt (", what,
         (unsigned long long)r->attempts, (unsigned long long)r->first_attempts, r->amplification);
  print_stops(r);
  printf(")\n");
}

static void print_json(const char *what, const luaretry_herd_result *r, const char *sep) {
  printf(
    "\"%s\":{\"attempts\":%llu,\"first_attempts\":%llu,\"amplification\":%.6f,"
    "\"last_attempt\":%.6f,\"round_trips\":%llu,\"client_seconds\":%.6f,\"stops\":{",
    what, (unsigned long long)r->attempts, (unsigned long long)r->first_attempts, r->amplification,
    r->last_attempt, (unsigned long long)r->round_trips, r->client_seconds);
  const char *comma = "";
  for (int k = 0; k < N_STOPS; k++) {
    if (!r->stops[k]) continue;
    printf("%s\"%s\":%llu", comma, k ? luaretry_reason_name((luaretry_reason)k) : "capped",
           (unsigned long long)r->stops[k]);
    comma = ",";
  }
  printf("}}%s", sep);
}

/* The guards a policy has, in a few words. */
static void print_guards(luaretry_policy *p) {
  static const char *const names[] = { "budget.max_tokens", "budget.reserve",
                                       "breaker.failures",  "breaker.failure_rate",
                                       "admission.k",       "rate.limit",
                                       "rate.adaptive",     NULL };
  printf("  guards:");
  int any = 0;
  for (int k = 0; names[k]; k++) {
    char v[64] = "none";
    luaretry_policy_get(p, names[k], v, sizeof v);
    if (strcmp(v, "none") == 0 || strcmp(v, "false") == 0) continue;
    printf(" %s=%s", names[k], v);
    any = 1;
  }
  printf("%s\n", any ? "" : " none");
}

/* The first client's policy error of all the runs, said on standard error
 * as plain --clients says it (file and line): the table only counts them. */
static int first_error(void *ud, long client, double t, int status, const luaretry_decision *d) {
  int *said = ud;
  (void)t;
  (void)status;
  if (!d->retry && d->reason == LUARETRY_REASON_POLICY_ERROR && !(*said)++)
    fprintf(stderr, "luaretry: simulate: client %ld: %s\n", client,
            d->message ? d->message : "policy error");
  return 0;
}

/* --process: the N clients as calls of one process, its guards shared. */
static int simulate_process(luaretry_policy *p, const char *path, luaretry_herd_options *o,
                            int json) {
  luaretry_herd_result r;
  o->shared = 1;
  luaretry_code rc = luaretry_simulate_herd(p, o, &r);
  if (rc != LUARETRY_OK) {
    fprintf(stderr, "luaretry: simulate: %s\n",
            rc == LUARETRY_E_ARG ? "--process: an option out of range" : luaretry_strerror(rc));
    return rc == LUARETRY_E_ARG ? EXIT_USAGE : EXIT_POLICY;
  }
  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  if (json) {
    printf("{\"clients\":%ld,\"outage\":%g,\"status\":%d,\"seed\":%llu,", o->clients, o->outage,
           o->outage_status, (unsigned long long)o->seed);
    print_json("process", &r, "}\n");
  } else {
    printf(
      "simulate: %s (%s): %ld clients of one process fail together at t=0; outage %g s "
      "(%d before, 200 after); seed %llu (client i: seed + i)\n",
      t.name, path, o->clients, o->outage, o->outage_status, (unsigned long long)o->seed);
    print_guards(p);
    print_text("one process (its guards shared):", &r);
    printf("  requests that reached the service: %llu, %.2f per client; the last at %.3f s\n",
           (unsigned long long)r.attempts, (double)r.attempts / (double)o->clients, r.last_attempt);
  }
  return r.stops[LUARETRY_REASON_POLICY_ERROR] ? EXIT_POLICY : EXIT_OK;
}

/* Round trips per second of a client's life (its process's), as
 * spec/bench/fleet_scale.sh measures them: all of them over all the lives. */
static double per_second(const luaretry_herd_result *r) {
  return r->client_seconds > 0 ? (double)r->round_trips / r->client_seconds : 0;
}

static void print_start(const luaretry_herd_options *o) {
  if (o->wave > 0)
    printf("%ld clients start, %ld every %g s,", o->clients, o->wave, o->wave_every);
  else
    printf("%ld clients fail together at t=0;", o->clients);
}

int cli_simulate_fleet(luaretry_policy *p, const char *path, luaretry_herd_options *o, int json,
                       int process, int local) {
  if (!o->outage_status) o->outage_status = 503;
  /* the local store has no batches: a microsecond's sync counts each
   * outcome at once, as its compare-and-swap does */
  if (local) o->sync = 1e-6, o->local = 1;
  int said = 0;
  o->each = first_error;
  o->ud = &said;
  if (process) return simulate_process(p, path, o, json);
  luaretry_herd_result own, fleet;
  luaretry_code rc = luaretry_simulate_herd(p, o, &own);
  o->fleet = 1;
  if (rc == LUARETRY_OK) rc = luaretry_simulate_herd(p, o, &fleet);
  if (rc != LUARETRY_OK) {
    fprintf(stderr, "luaretry: simulate: %s\n",
            rc == LUARETRY_E_ARG ? "--fleet: an option out of range" : luaretry_strerror(rc));
    return rc == LUARETRY_E_ARG ? EXIT_USAGE : EXIT_POLICY;
  }
  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  char sync[64] = "none";
  luaretry_policy_get(p, "fleet.sync", sync, sizeof sync);
  if (local) snprintf(sync, sizeof sync, "0");
  if (json) {
    printf("{\"clients\":%ld,\"outage\":%g,\"seed\":%llu,\"sync_ms\":%s,", o->clients, o->outage,
           (unsigned long long)o->seed, sync);
    if (o->wave > 0) printf("\"wave\":%ld,\"wave_every\":%g,", o->wave, o->wave_every);
    if (!local) printf("\"round_trips_per_second\":%.6f,", per_second(&fleet));
    print_json("own", &own, ",");
    print_json("fleet", &fleet, "}\n");
  } else {
    printf("simulate: %s (%s): ", t.name, path);
    print_start(o);
    printf(" outage %g s (%d before, 200 after); seed %llu (client i: seed + i)\n", o->outage,
           o->outage_status, (unsigned long long)o->seed);
    char k[64] = "none", limit[64] = "none", adaptive[16] = "false";
    luaretry_policy_get(p, "admission.k", k, sizeof k);
    luaretry_policy_get(p, "rate.limit", limit, sizeof limit);
    luaretry_policy_get(p, "rate.adaptive", adaptive, sizeof adaptive);
    int fixed_rate = strcmp(limit, "none") != 0 && strcmp(adaptive, "true") != 0;
    if (!t.budget && !t.breaker && strcmp(k, "none") == 0 && !fixed_rate)
      printf(
        "  (the policy has neither budget nor breaker, admission or fixed rate: there is "
        "nothing to share)\n");
    print_text("own guards (a process each):", &own);
    char what[128];
    if (local)
      snprintf(what, sizeof what, "fleet guards (the local store: each outcome at once):");
    else
      snprintf(what, sizeof what, "fleet guards (synced every %s ms):", sync);
    print_text(what, &fleet);
    /* the rate limiter shows in time, not in attempts */
    printf("  the last attempt at: own guards %.3f s, fleet guards %.3f s\n", own.last_attempt,
           fleet.last_attempt);
    if (!local)
      printf(
        "  round trips to Redis: %llu, %.2f per second of a client's life (%.3f s each on "
        "average)\n",
        (unsigned long long)fleet.round_trips, per_second(&fleet),
        fleet.client_seconds / (double)o->clients);
  }
  int errors = own.stops[LUARETRY_REASON_POLICY_ERROR] || fleet.stops[LUARETRY_REASON_POLICY_ERROR];
  return errors ? EXIT_POLICY : EXIT_OK;
}
