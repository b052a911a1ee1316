/* fleet_cmd.c: the command's side of the fleet: where Redis is (--redis, else
 * the LUARETRY_REDIS environment variable: the command reads it, the
 * library never does), the first sync of `run`, and `luaretry fleet
 * POLICY [--redis URL] [--reset]`, which shows or clears the fleet's
 * state in Redis.  Public API only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* The local store's folder: $XDG_RUNTIME_DIR (the user's, made 0700 by
 * the login), else the library's own (/tmp/luaretry-UID). */
static const char *local_folder(void) {
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  return xdg && xdg[0] == '/' ? xdg : "on";
}

int cli_fleet_store(const char *fleet, const char *redis, cli_store *s) {
  memset(s, 0, sizeof *s);
  if (fleet && strcmp(fleet, "local") != 0)
    return cli_usage("--fleet %s: expected local (a Redis: --redis URL)", fleet);
  if (fleet && redis) return cli_usage("--fleet local and --redis: one store at a time", NULL);
  const char *env = getenv("LUARETRY_FLEET");
  if (!fleet && !redis && env && env[0] && strcmp(env, "local") != 0)
    return cli_usage("LUARETRY_FLEET=%s: expected local", env);
  if (fleet || (!redis && env && env[0])) {
    s->field = "fleet.local", s->value = local_folder();
    s->from = fleet ? "--fleet local" : "LUARETRY_FLEET";
    return 0;
  }
  s->from = "--redis";
  if (!redis) redis = getenv("LUARETRY_REDIS"), s->from = "LUARETRY_REDIS";
  if (redis && redis[0]) s->field = "fleet.redis", s->value = redis;
  return 0;
}

/* Before the first call: the fleet's counts, so that an open circuit or a
 * spent budget elsewhere is known from the start.  A failure is told once
 * through the fleet's log and changes nothing else: the local guards
 * decide, and no attempt is refused for it.  No call exists yet to
 * cancel, nor any file to remove: a stop signal during this round trip
 * (up to fleet.connect_timeout + fleet.command_timeout) exits at once. */
void cli_fleet_start(luaretry_policy *p) {
  luaretry_metrics m;
  if (luaretry_policy_metrics(p, &m) != LUARETRY_OK || m.guards == LUARETRY_GUARDS_LOCAL) return;
  cli_exit_on_stop_signal(1);
  luaretry_policy_fleet_sync(p);
  cli_exit_on_stop_signal(0);
}

/* Which of the guards a fleet shares the policy has: what a warning and a
 * fresh fleet's state are said from. */
typedef struct {
  int budget, breaker, admission, rate;
} shared_guards;

static shared_guards guards_shared(luaretry_policy *p) {
  shared_guards g = { 0, 0, 0, 0 };
  luaretry_tuning t;
  char k[64] = "none", limit[64] = "none";
  if (luaretry_policy_tuning(p, &t) == LUARETRY_OK)
    g.budget = t.budget != 0, g.breaker = t.breaker != 0;
  luaretry_policy_get(p, "admission.k", k, sizeof k);
  luaretry_policy_get(p, "rate.limit", limit, sizeof limit);
  g.admission = strcmp(k, "none") != 0;
  g.rate = strcmp(limit, "none") != 0;
  return g;
}

/* The policy has no guard a fleet shares (no budget, breaker, admission
 * or fixed rate): it has no fleet, whatever store is named. */
static int shares_nothing(luaretry_policy *p) {
  luaretry_metrics m;
  shared_guards g = guards_shared(p);
  if (g.budget || g.breaker || g.admission) return 0;
  /* a fixed rate is shared too: the policy has a fleet then */
  return !(luaretry_policy_metrics(p, &m) == LUARETRY_OK && m.guards != LUARETRY_GUARDS_LOCAL);
}

/* "names a Redis" or "asks for the local store", after where it came from */
static const char *store_named(const char *from) {
  return strstr(from, "REDIS") || strstr(from, "redis") ? "names a Redis"
                                                        : "asks for the local store";
}

/* A Redis named for a policy with nothing to share is a setting that
 * changes nothing, and a setting silently ignored is a lost one: said
 * under -q too, where the library's warnings are not printed. */
void cli_fleet_warn_unshared(luaretry_policy *p, const char *from) {
  luaretry_tuning t;
  if (luaretry_policy_tuning(p, &t) != LUARETRY_OK || !shares_nothing(p)) return;
  fprintf(stderr,
          "luaretry: warning: %s: %s %s, but the policy has neither budget "
          "nor breaker, admission or fixed rate: there is nothing to share\n",
          t.name, from, store_named(from));
}

/* "2026-11-23 21:50:01.123 UTC" */
static void utc(double t, char *buf, size_t size) {
  time_t s = (time_t)t;
  struct tm tm;
  if (!gmtime_r(&s, &tm)) {
    snprintf(buf, size, "%.3f", t);
    return;
  }
  char day[32];
  strftime(day, sizeof day, "%Y-%m-%d %H:%M:%S", &tm);
  snprintf(buf, size, "%s.%03d UTC", day, (int)((t - (double)s) * 1000));
}

/* Admission control's window and the rate limiter, as either store holds them. */
static void print_guards(const luaretry_fleet_status *st) {
  if (st->window_seconds > 0)
    printf("  admission window: %.0f requests, %.0f accepted over the last %g s\n",
           st->window_requests, st->window_accepts, st->window_seconds);
  if (st->rate_limit > 0)
    printf("  rate: %g per second for the fleet; slots leased out up to %.3f s ahead (%.0f)\n",
           st->rate_limit, st->rate_ahead, st->rate_ahead * st->rate_limit);
}

/* The local store's times are CLOCK_MONOTONIC's: shown as ages.  Only
 * the policy's own guards: the store counts failures for every policy,
 * and a policy without a breaker was shown one ("breaker: closed; 41
 * transient failures in a row"). */
static void print_local(shared_guards g, const luaretry_fleet_status *st) {
  if (g.budget)
    printf("  budget: %.3f of %g tokens (a retry needs more than %g)\n", st->tokens, st->max_tokens,
           st->max_tokens / 2);
  if (g.breaker) {
    printf("  breaker: %s", luaretry_breaker_state_name(st->breaker));
    if (st->opened_at > 0 && st->breaker != LUARETRY_BREAKER_CLOSED)
      printf(", since %.1f s", st->now - st->opened_at);
    printf("; %ld transient failures in a row", st->consecutive_failures);
    if (st->breaker == LUARETRY_BREAKER_HALF_OPEN) printf("; %ld probes left", st->probes_left);
    printf("\n");
  }
  print_guards(st);
}

/* What a fleet with no state (never synced, expired, reset) holds for
 * this policy's guards: its budget full, its breaker closed ...; a rate-only
 * policy had been told of a budget and a breaker it does not have. */
static void fresh_state(luaretry_policy *p, int local, char *buf, size_t size) {
  shared_guards g = guards_shared(p);
  const char *part[4];
  int n = 0;
  if (g.budget) part[n++] = "full budget";
  if (g.breaker) part[n++] = "breaker closed";
  if (g.admission) part[n++] = "admission window empty";
  if (g.rate) part[n++] = local ? "rate bucket full" : "no rate slots leased";
  buf[0] = '\0';
  for (int i = 0; i < n; i++) {
    size_t used = strlen(buf);
    snprintf(buf + used, size - used, "%s%s", i ? ", " : "", part[i]);
  }
  if (n == 0) snprintf(buf, size, "nothing to share");
}

/* Members are host:pid:n, n a handle of the process (one per policy, one
 * more after a reload that changes the fleet's settings): a process is
 * counted once, whatever its handles. */
static size_t process_len(const char *member) {
  const char *end = strrchr(member, ':');
  return end ? (size_t)(end - member) : strlen(member);
}

static size_t distinct_processes(const luaretry_fleet_status *st) {
  size_t n = 0;
  for (size_t i = 0; i < st->process_count; i++) {
    const char *m = st->processes[i].member;
    size_t len = process_len(m), k = 0;
    while (k < i && !(process_len(st->processes[k].member) == len &&
                      strncmp(st->processes[k].member, m, len) == 0))
      k++;
    n += k == i; /* the first of its process */
  }
  return n;
}

static void print_status(luaretry_policy *p, const char *name, const luaretry_fleet_status *st,
                         int local) {
  shared_guards g = guards_shared(p);
  printf("fleet %s: %s at %s\n", name, st->key, st->where);
  if (local) {
    print_local(g, st);
    return;
  }
  if (!st->exists) {
    char fresh[160];
    fresh_state(p, 0, fresh, sizeof fresh);
    printf("  no state in Redis (never synced, expired or reset): %s\n", fresh);
  } else {
    if (g.budget) {
      printf("  budget: %.3f of %g tokens (a retry needs more than %g)\n", st->tokens,
             st->max_tokens, st->max_tokens / 2);
      /* the blocks processes hold and spend without a round trip: among
       * the tokens above */
      printf("  leases: %.3f of them out in blocks to %llu process%s\n", st->leased_tokens,
             (unsigned long long)st->lease_holders, st->lease_holders == 1 ? "" : "es");
    }
    if (g.breaker) { /* the script counts failures without one too */
      printf("  breaker: %s", luaretry_breaker_state_name(st->breaker));
      if (st->opened_at > 0) {
        char when[64];
        utc(st->opened_at, when, sizeof when);
        printf(", opened at %s (%.1f s ago)", when, st->now - st->opened_at);
      }
      printf("; %ld transient failures in a row", st->consecutive_failures);
      if (st->breaker == LUARETRY_BREAKER_HALF_OPEN) printf("; %ld probes left", st->probes_left);
      printf("\n");
    }
  }
  print_guards(st);
  size_t processes = distinct_processes(st);
  printf("  processes that synced in the last minute: %zu", processes);
  if (processes != st->process_count) printf(" (%zu fleet handles)", st->process_count);
  printf("\n");
  for (size_t i = 0; i < st->process_count; i++)
    printf("    %-40s %.1f s ago\n", st->processes[i].member, st->processes[i].seen_ago);
}

typedef struct {
  const char *policy, *redis, *fleet;
  int reset;
  char *sets[64];
  int nsets;
} fleet_args;

/* --redis's URL copied and blanked in argv (spaces), as run and curl do,
 * so that ps does not show its password while Redis is waited on.  The
 * copy lives as long as the process (kept here: never a leak). */
static const char *hide_redis(char *v) {
  static char *copy;
  free(copy);
  copy = strdup(v);
  if (!copy) return v;
  memset(v, ' ', strlen(v));
  return copy;
}

static int parse_fleet(int argc, char **argv, fleet_args *a) {
  memset(a, 0, sizeof *a);
  for (int i = 0; i < argc; i++) {
    const char *s = argv[i];
    int valued = strcmp(s, "--redis") == 0 || strcmp(s, "--set") == 0 || strcmp(s, "--fleet") == 0;
    if (valued && i + 1 >= argc) return cli_usage("fleet: %s needs a value", s);
    if (strcmp(s, "--reset") == 0)
      a->reset = 1;
    else if (strcmp(s, "--redis") == 0)
      a->redis = hide_redis(argv[++i]);
    else if (strcmp(s, "--fleet") == 0)
      a->fleet = argv[++i];
    else if (strcmp(s, "--set") == 0 && a->nsets == 64)
      return cli_usage("fleet: too many --set", NULL);
    else if (strcmp(s, "--set") == 0)
      a->sets[a->nsets++] = argv[++i];
    else if (s[0] == '-' && s[1])
      return cli_usage("fleet: unknown option %s", s);
    else if (!a->policy)
      a->policy = s;
    else
      return cli_usage("fleet: unexpected argument %s", s);
  }
  if (!a->policy) return cli_usage("fleet: which POLICY?", NULL);
  return 0;
}

/* What the library says while the command runs (what --reset removed; a
 * lost Redis), kept until the command's outcome is known. */
typedef struct {
  char *line[16];
  int n;
} said_lines;

static void say_line(void *ud, const char *line) {
  said_lines *s = ud;
  if (s->n < 16 && (s->line[s->n] = strdup(line)) != NULL) s->n++;
}

/* On success to standard output, as before the status.  On failure the
 * error says it already: a lost Redis's notice (which speaks of calls
 * this command does not make) is dropped, anything else goes to
 * standard error, and standard output stays empty. */
static void said(said_lines *s, int ok) {
  for (int i = 0; i < s->n; i++) {
    if (ok)
      printf("%s\n", s->line[i]);
    else if (!strstr(s->line[i], "local guards decide until Redis is back"))
      fprintf(stderr, "luaretry: %s\n", s->line[i]);
    free(s->line[i]);
  }
  s->n = 0;
}

/* The store a --set names (fleet.local or fleet.redis, the last one
 * given), as run takes it: "fleet.local", "fleet.redis" or NULL. */
static const char *store_set(const fleet_args *a) {
  const char *field = NULL;
  for (int i = 0; i < a->nsets; i++)
    if (strncmp(a->sets[i], "fleet.local=", 12) == 0)
      field = "fleet.local";
    else if (strncmp(a->sets[i], "fleet.redis=", 12) == 0)
      field = "fleet.redis";
  return field;
}

/* A one-shot look is no call: it waits up to ADMIN_PATIENCE_MS for each
 * reply (a loaded Redis, a busy machine), or the policy's
 * fleet.command_timeout when longer or given with --set. */
#define ADMIN_PATIENCE_MS 2000

static void admin_patience(luaretry_policy *p, const fleet_args *a) {
  for (int i = 0; i < a->nsets; i++)
    if (strncmp(a->sets[i], "fleet.command_timeout=", 22) == 0) return;
  char ms[32];
  if (luaretry_policy_get(p, "fleet.command_timeout", ms, sizeof ms) == LUARETRY_OK &&
      atof(ms) < ADMIN_PATIENCE_MS)
    luaretry_policy_set(p, "fleet.command_timeout", "2000");
}

int cli_fleet(int argc, char **argv) {
  fleet_args a;
  int status = parse_fleet(argc, argv, &a);
  if (status) return status;
  cli_store store;
  if ((status = cli_fleet_store(a.fleet, a.redis, &store)) != 0) return status;
  const char *field = store.field ? store.field : store_set(&a);
  if (!field)
    return cli_usage(
      "fleet: where is Redis? --redis URL or LUARETRY_REDIS (this machine's "
      "local store: --fleet local or LUARETRY_FLEET=local)",
      NULL);
  luaretry_policy *p = cli_load_policy_redis(a.policy, a.sets, a.nsets, 0, &store, &status);
  if (!p) return status;
  status = EXIT_OK;
  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  /* the store is named (the library's "no fleet" would say it may not be) */
  if (shares_nothing(p)) {
    char from[32];
    snprintf(from, sizeof from, "%s%s", store.field ? store.from : "--set ",
             store.field ? "" : field);
    fprintf(stderr,
            "luaretry: fleet %s: %s %s, but the policy has neither budget, breaker, admission "
            "nor a fixed rate: there is nothing to share, nor any fleet to %s\n",
            t.name, from, store_named(from), a.reset ? "reset" : "show");
    luaretry_policy_free(p);
    return EXIT_POLICY;
  }
  /* what --reset removed (a refused store's file), said by the library */
  said_lines lines = { { NULL }, 0 };
  luaretry_policy_on_fleet(p, say_line, &lines);
  admin_patience(p, &a);
  luaretry_fleet_status st;
  luaretry_code rc =
    a.reset ? luaretry_policy_fleet_reset(p) : luaretry_policy_fleet_status(p, &st);
  int local = strcmp(field, "fleet.local") == 0;
  said(&lines, rc == LUARETRY_OK);
  if (rc == LUARETRY_OK && a.reset) {
    char fresh[160];
    fresh_state(p, local, fresh, sizeof fresh);
    printf("fleet %s: reset: %s%s\n", t.name, fresh, local ? "" : ", no processes");
  } else if (rc == LUARETRY_OK) {
    print_status(p, t.name, &st, local);
    luaretry_fleet_status_free(&st);
  } else {
    fprintf(stderr, "luaretry: %s\n", luaretry_policy_errmsg(p));
    status = rc == LUARETRY_E_FLEET ? EXIT_FINAL : EXIT_POLICY;
  }
  luaretry_policy_free(p);
  said(&lines, status == EXIT_OK); /* anything said as the handle closed */
  return status;
}
