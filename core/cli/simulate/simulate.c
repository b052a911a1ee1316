/* simulate.c: `luaretry simulate`.
 *
 * Without --clients: the wait schedule a policy gives when every attempt
 * fails transiently (luaretry_simulate), or, with --probe OUTCOME..., when
 * the attempts meet those outcomes (probes.c).
 *
 * With --clients N: N clients fail at the same instant t=0 against an
 * outage of --outage seconds, run by the library's herd simulator
 * (luaretry_simulate_herd, as --fleet is): each client is its own call
 * (seed + client index) with guards of its own on the virtual clock; an
 * attempt that starts before the outage ends is a 503, one after it a 200,
 * so the policy's own classifier and rules decide.  This file prints how
 * the retries bunch up, and with --svg a histogram (svg.c).
 *
 * Only the public API (luaretry.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/output.h"
#include "cli/run/outfile.h"
#include "cli/simulate/simulate.h"

#define MAX_CLIENTS 1000000L
#define MAX_OUTAGE  1e6
#define MAX_RETRIES 20000000L /* all clients together: 160 MB of times */
#define MAX_BUCKETS 200

/* The options' numbers are read by the one rule of them (number.c). */

/* A whole number from 0 to hi; -1 when it is not one. */
static long long parse_count(const char *s, long long hi) {
  long long v;
  return cli_whole(s, 0, hi, &v) ? v : -1;
}

/* Seconds, 0 to MAX_OUTAGE; -1 when it is not that. */
static double parse_seconds(const char *s) {
  double v;
  return cli_decimal(s, &v) && v >= 0 && v <= MAX_OUTAGE ? v : -1;
}

/* ---- the schedule (no --clients) */

typedef struct {
  int json;
  int policy_error; /* the schedule ended on one */
  int retried;      /* the attempt whose retry was shown last */
} schedule_out;

/* Seconds for people: milliseconds shown, but a wait of 1e300 s in four
 * significant digits rather than three hundred. */
static const char *secs(char buf[32], double v) {
  snprintf(buf, 32, fabs(v) < 1e9 ? "%.3f" : "%.4g", v);
  return buf;
}

static int print_decision(void *ud, const luaretry_decision *d) {
  schedule_out *out = ud;
  const char *verdict = luaretry_reason_name(d->reason);
  if (d->reason == LUARETRY_REASON_POLICY_ERROR) {
    out->policy_error = 1;
    fprintf(stderr, "luaretry: simulate: %s\n", d->message ? d->message : "policy error");
  }
  if (out->json) {
    cli_json_decision(stdout, d, -1, NULL, NULL);
  } else if (d->retry) {
    char w[32], e[32];
    printf("attempt %d: retry in %s s (%s), elapsed %s s\n", d->attempt, secs(w, d->wait),
           luaretry_wait_source_name(d->wait_source), secs(e, d->elapsed));
    out->retried = d->attempt;
  } else if (d->attempt == out->retried) {
    /* refused as the next attempt would go (luaretry_call_next), as run's
     * "before attempt N" line */
    char e[32];
    printf("before attempt %d: %s at %s s (%s)\n", d->attempt + 1, verdict, secs(e, d->elapsed),
           d->rule);
  } else {
    char e[32];
    printf("attempt %d: %s at %s s (%s)\n", d->attempt, verdict, secs(e, d->elapsed), d->rule);
  }
  cli_out_flush(); /* a line at a time, in order with the errors on stderr */
  return 0;
}

/* ---- the herd (--clients) */

/* An attempt after a client's first, at time t. */
static int record_retry(herd *h, double t) {
  if (h->nretry == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 4096;
    if (cap > (size_t)MAX_RETRIES) cap = (size_t)MAX_RETRIES;
    double *r = h->cap < (size_t)MAX_RETRIES ? realloc(h->retry, cap * sizeof *r) : NULL;
    if (!r) {
      fprintf(stderr,
              "luaretry: simulate: more than %ld attempts in all; use fewer "
              "--clients or --attempts\n",
              MAX_RETRIES);
      return -1;
    }
    h->retry = r;
    h->cap = cap;
  }
  h->retry[h->nretry++] = t;
  if (t > h->last) h->last = t;
  return 0;
}

static void json_attempt(long client, const luaretry_decision *d, double t, int status) {
  printf("{\"client\":%ld,\"attempt\":%d,\"time\":%.6f,\"status\":%d,\"verdict\":", client,
         d->attempt, t, status);
  cli_json_string(stdout, d->retry ? "retry" : luaretry_reason_name(d->reason));
  printf(",\"wait\":%.6f}\n", d->retry ? d->wait : 0.0);
}

/* What the library's herd tells of each attempt (luaretry_simulate_herd:
 * client after client): the JSON line, the retry's time, the first policy
 * error.  Nonzero stops the herd. */
typedef struct {
  herd *h;
  int json;
  int failed; /* out of room for the retries' times */
} herd_view;

static int on_attempt(void *ud, long client, double t, int status, const luaretry_decision *d) {
  herd_view *v = ud;
  if (v->json) json_attempt(client, d, t, status);
  if (d->attempt > 1 && record_retry(v->h, t) != 0) return v->failed = 1;
  if (!d->retry && d->reason == LUARETRY_REASON_POLICY_ERROR &&
      !v->h->by_reason[LUARETRY_REASON_POLICY_ERROR]++)
    fprintf(stderr, "luaretry: simulate: client %ld: %s\n", client,
            d->message ? d->message : "policy error");
  return 0;
}

/* Runs every client through the library's herd simulator, each its own
 * call (seed + index) with guards of its own; EXIT_OK when all ran,
 * whatever their verdicts. */
static int run_clients(luaretry_policy *p, herd *h, int json) {
  herd_view v = { h, json, 0 };
  luaretry_herd_options o = { .clients = h->clients,
                              .outage = h->outage,
                              .seed = h->seed,
                              .outage_status = h->status,
                              .each = on_attempt,
                              .ud = &v };
  luaretry_herd_result r;
  luaretry_code rc = luaretry_simulate_herd(p, &o, &r);
  if (v.failed) return EXIT_POLICY;
  if (rc != LUARETRY_OK) {
    fprintf(stderr, "luaretry: simulate: %s\n", luaretry_strerror(rc));
    return EXIT_POLICY;
  }
  for (int k = 1; k < N_REASONS; k++) h->by_reason[k] = (long)r.stops[k];
  h->capped = (long)r.stops[0];
  return EXIT_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The peak in any window [t, t + WINDOW) that starts at a retry, and the
 * even spread: retries / windows from the first retry to the last attempt. */
static void measure(herd *h) {
  if (!h->nretry) return;
  qsort(h->retry, h->nretry, sizeof *h->retry, cmp_double);
  size_t lo = 0;
  for (size_t hi = 0; hi < h->nretry; hi++) {
    while (h->retry[hi] - h->retry[lo] >= WINDOW) lo++;
    long n = (long)(hi - lo + 1);
    if (n > h->peak) {
      h->peak = n;
      h->peak_at = h->retry[lo];
    }
  }
  double span = h->retry[h->nretry - 1] - h->retry[0];
  h->windows = (long)ceil(span / WINDOW - 1e-9);
  if (h->windows < 1) h->windows = 1;
  h->even = (double)h->nretry / (double)h->windows;
}

/* A bucket width from 1, 2, 2.5, 5 x 10^k giving at most MAX_BUCKETS
 * buckets over [0, last] (so ~100 to 200 of them). */
static void choose_buckets(herd *h) {
  static const double m[] = { 1, 2, 2.5, 5 };
  h->width = 0.1;
  if (h->last > 0) {
    int e = (int)floor(log10(h->last / MAX_BUCKETS)) - 1;
    for (int k = e; k <= e + 3; k++) {
      int found = 0;
      for (int j = 0; j < 4; j++) {
        double w = m[j] * pow(10, k);
        if (floor(h->last / w) + 1 <= MAX_BUCKETS) {
          h->width = w;
          found = 1;
          break;
        }
      }
      if (found) break;
    }
  }
  h->nbuckets = (long)floor(h->last / h->width) + 1;
}

static int fill_buckets(herd *h) {
  h->buckets = calloc((size_t)h->nbuckets, sizeof *h->buckets);
  if (!h->buckets) return -1;
  h->buckets[0] += h->clients; /* every first attempt, at t=0 */
  for (size_t i = 0; i < h->nretry; i++) {
    long b = (long)floor(h->retry[i] / h->width);
    if (b >= h->nbuckets) b = h->nbuckets - 1;
    if (b < 0) b = 0;
    h->buckets[b]++;
  }
  return 0;
}

/* Draws the SVG in memory, then replaces f's file with it whole. */
static int svg_save(outfile *f, const char *path, const herd *h) {
  char *svg = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&svg, &len);
  if (mem) svg_write(mem, h);
  if (!mem || fclose(mem) != 0) {
    fprintf(stderr, "luaretry: --svg %s: out of memory\n", path);
    free(svg);
    outfile_finish(f, 0);
    return -1;
  }
  outfile_write(f, svg, len);
  free(svg);
  return outfile_finish(f, 1);
}

static void print_summary(const herd *h, const char *svg) {
  printf(
    "simulate: %s (%s): %ld clients fail together at t=0; outage %g s (%d before, 200 "
    "after); seed %llu (client i: seed + i)\n",
    h->name, h->path, h->clients, h->outage, h->status, (unsigned long long)h->seed);
  char a[32], b[32];
  printf("attempts: %zu in all: %ld at t=0, %zu retries; last attempt at %s s\n",
         (size_t)h->clients + h->nretry, h->clients, h->nretry, secs(a, h->last));
  long gave_up = h->clients - h->by_reason[LUARETRY_REASON_SUCCESS];
  printf("clients: %ld succeeded, %ld gave up", h->by_reason[LUARETRY_REASON_SUCCESS], gave_up);
  if (gave_up > 0) {
    const char *sep = " (";
    for (int r = 0; r < N_REASONS; r++) {
      if (r == LUARETRY_REASON_SUCCESS || h->by_reason[r] == 0) continue;
      printf("%s%s %ld", sep, luaretry_reason_name((luaretry_reason)r), h->by_reason[r]);
      sep = ", ";
    }
    if (h->capped)
      printf("%sstopped after %ld attempts %ld", sep, LUARETRY_SIMULATE_ATTEMPT_CAP, h->capped);
    putchar(')');
  }
  putchar('\n');
  if (h->nretry) {
    printf(
      "peak: %ld retries in one 100 ms window (from %s s); even spread: %.2f per "
      "100 ms\n",
      h->peak, secs(a, h->peak_at), h->even);
    printf(
      "  (even spread = %zu retries, the attempts after t=0, / %ld windows of 100 ms "
      "from the first retry at %s s to the last attempt at %s s)\n",
      h->nretry, h->windows, secs(a, h->retry[0]), secs(b, h->last));
  } else {
    printf("peak: no retries\n");
  }
  if (svg) printf("svg: %s, %ld buckets of %g s\n", svg, h->nbuckets, h->width);
}

static int simulate_clients(luaretry_policy *p, herd *h, int json, const char *svg) {
  luaretry_tuning t;
  if (luaretry_policy_tuning(p, &t) == LUARETRY_OK && t.name) h->name = t.name;
  /* the file made now, beside its place: a path that cannot be written
   * is a usage error before the simulation, not after it */
  outfile f;
  if (svg) {
    outfile_init(&f, svg, "--svg");
    if (outfile_create(&f) != 0) {
      outfile_finish(&f, 0);
      return EXIT_USAGE;
    }
  }
  int status = run_clients(p, h, json);
  if (status != EXIT_OK) {
    if (svg) outfile_finish(&f, 0);
    return status;
  }
  /* a policy error in the classifier is the policy's fault: exit 3, but
   * the simulation still reports what happened */
  if (h->by_reason[LUARETRY_REASON_POLICY_ERROR]) status = EXIT_POLICY;
  measure(h);
  choose_buckets(h);
  if (svg) {
    if (fill_buckets(h) != 0) {
      fprintf(stderr, "luaretry: simulate: out of memory\n");
      outfile_finish(&f, 0);
      return EXIT_POLICY;
    }
    if (svg_save(&f, svg, h) != 0) { /* a full disk, said: a file not written, exit 1 */
      if (!json) print_summary(h, NULL);
      return EXIT_FINAL;
    }
  }
  if (!json) print_summary(h, svg);
  return status;
}

typedef struct {
  const char *path, *svg;
  long long attempts, clients, status;
  uint64_t seed;
  double outage;
  long wave; /* --wave N@SECONDS: N clients start every SECONDS */
  double wave_every;
  int json, have_outage, fleet, process;
  int local;           /* --fleet local: the local store's model (each outcome at once) */
  const char *latency; /* --latency SPEC */
  luaretry_latency_options lat;
  long long calls; /* --calls N */
  char **sets;     /* room for argc + 1 */
  int nsets;
  cli_probe *probes; /* --probe's, room for argc */
  size_t nprobes;
  char attempts_set[64]; /* --clients with --attempts: max_attempts=N */
} simulate_args;

/* One option that takes a value; 0 or a usage status. */
static int take_value(simulate_args *a, const char *opt, char *v) {
  if (strcmp(opt, "--set") == 0) {
    char name[CLI_SET_NAME];
    const char *value;
    if (cli_split_set(v, name, &value) != 0)
      return cli_usage("simulate: --set %s: expected NAME=VALUE", v);
    a->sets[a->nsets++] = v;
  } else if (strcmp(opt, "--probe") == 0) {
    char err[1024];
    if (cli_probe_parse(v, &a->probes[a->nprobes], err, sizeof err) != 0) {
      cli_probe_free(&a->probes[a->nprobes]);
      return cli_usage("simulate: %s", err);
    }
    a->nprobes++;
  } else if (strcmp(opt, "--svg") == 0) {
    if (!*v) return cli_usage("--svg needs a file name%s", "");
    a->svg = v;
  } else if (strcmp(opt, "--outage") == 0) {
    a->outage = parse_seconds(v);
    if (a->outage < 0) return cli_number_usage(NULL, opt, v, "seconds from 0 to 1e6");
    a->have_outage = 1;
  } else if (strcmp(opt, "--latency") == 0) {
    if (cli_latency_parse(v, &a->lat) != 0)
      return cli_number_usage(NULL, opt, v,
                              "BASE or BASE,SLOW@FRACTION in seconds "
                              "(0.01,1@0.05: 10 ms, and 1 s for 5% of the attempts)");
    a->latency = v;
  } else if (strcmp(opt, "--wave") == 0) {
    char *at = strchr(v, '@');
    long long n = -1;
    if (at) {
      *at = '\0';
      n = parse_count(v, MAX_CLIENTS);
      *at = '@';
    }
    a->wave_every = at ? parse_seconds(at + 1) : -1;
    if (n < 1 || a->wave_every < 0)
      return cli_number_usage(NULL, opt, v,
                              "N@SECONDS, N clients from 1 to 1000000 starting every "
                              "SECONDS (0 to 1e6; 100@5: 100 clients every 5 s)");
    a->wave = (long)n;
  } else if (strcmp(opt, "--calls") == 0) {
    a->calls = parse_count(v, 1000000);
    if (a->calls < 1) return cli_number_usage(NULL, opt, v, "a whole number from 1 to 1000000");
  } else if (strcmp(opt, "--status") == 0) {
    a->status = parse_count(v, 599);
    if (a->status < 100) return cli_number_usage(NULL, opt, v, "an HTTP status from 100 to 599");
  } else if (strcmp(opt, "--clients") == 0) {
    a->clients = parse_count(v, MAX_CLIENTS);
    if (a->clients < 1) return cli_number_usage(NULL, opt, v, "a whole number from 1 to 1000000");
  } else if (strcmp(opt, "--attempts") == 0) {
    a->attempts = parse_count(v, 1000000);
    if (a->attempts < 1) return cli_number_usage(NULL, opt, v, "a whole number from 1 to 1000000");
  } else if (!cli_seed(v, &a->seed)) { /* --seed */
    return cli_number_usage(NULL, opt, v, "a whole number, 0 or more");
  }
  return 0;
}

/* 0, or the exit status after a usage message. */
static int parse_simulate(int argc, char **argv, simulate_args *a) {
  static const char *const with_value[] = { "--attempts", "--seed",   "--set",   "--clients",
                                            "--outage",   "--svg",    "--probe", "--latency",
                                            "--calls",    "--status", "--wave",  NULL };
  for (int i = 0; i < argc; i++) {
    const char *s = argv[i];
    int takes = 0, status = 0;
    for (int k = 0; with_value[k]; k++) takes |= strcmp(s, with_value[k]) == 0;
    if (strcmp(s, "--json") == 0)
      a->json = 1;
    else if (strcmp(s, "--fleet") == 0 && i + 1 < argc && strcmp(argv[i + 1], "local") == 0)
      a->fleet = a->local = 1, i++;
    else if (strcmp(s, "--fleet") == 0)
      a->fleet = 1;
    else if (strcmp(s, "--process") == 0)
      a->process = 1;
    else if (takes && i + 1 >= argc)
      return cli_usage("%s needs a value", s);
    else if (takes)
      status = take_value(a, s, argv[++i]);
    else if (s[0] == '-' && s[1])
      return cli_usage("simulate: unknown option %s", s);
    else if (!a->path)
      a->path = s;
    else
      return cli_usage("simulate: unexpected argument %s", s);
    if (status) return status;
  }
  if (!a->path) return cli_usage("simulate: %s", "which POLICY?");
  if (!a->clients && (a->svg || a->have_outage || a->fleet || a->process || a->status != 503))
    return cli_usage("simulate: %s needs --clients N", a->svg           ? "--svg"
                                                       : a->fleet       ? "--fleet"
                                                       : a->process     ? "--process"
                                                       : a->have_outage ? "--outage"
                                                                        : "--status");
  if ((a->fleet || a->process) && a->svg)
    return cli_usage("simulate: %s draws no --svg", a->fleet ? "--fleet" : "--process");
  if (a->fleet && a->process) return cli_usage("simulate: --fleet or --process, not both%s", "");
  if (a->wave && !a->fleet) return cli_usage("simulate: --wave needs --clients N --fleet%s", "");
  if (a->clients && a->nprobes)
    return cli_usage("simulate: --probe is for one call, not --clients%s", "");
  if (a->calls && !a->latency) return cli_usage("simulate: --calls needs --latency%s", "");
  if (a->latency && (a->clients || a->attempts || a->nprobes))
    return cli_usage("simulate: --latency goes alone (not with --clients, --attempts or --probe)%s",
                     "");
  if ((a->clients || a->nprobes) &&
      a->attempts) { /* each client's call: the same override as --attempts */
    snprintf(a->attempts_set, sizeof a->attempts_set, "max_attempts=%lld", a->attempts);
    a->sets[a->nsets++] = a->attempts_set;
  }
  return 0;
}

static int simulate_herd(luaretry_policy *p, const simulate_args *a) {
  herd h;
  memset(&h, 0, sizeof h);
  h.path = a->path;
  h.name = a->path;
  h.clients = (long)a->clients;
  h.outage = a->outage;
  h.status = (int)a->status;
  h.seed = a->seed;
  int status = simulate_clients(p, &h, a->json, a->svg);
  free(h.retry);
  free(h.buckets);
  return status;
}

static int simulate_schedule(luaretry_policy *p, const simulate_args *a) {
  schedule_out out = { a->json, 0, 0 };
  if (a->nprobes) {
    int status = cli_simulate_probes(p, a->probes, a->nprobes, a->seed, print_decision, &out);
    return status == EXIT_OK && out.policy_error ? EXIT_POLICY : status;
  }
  luaretry_code rc = luaretry_simulate(p, a->seed, (long)a->attempts, print_decision, &out);
  if (rc == LUARETRY_OK) return out.policy_error ? EXIT_POLICY : EXIT_OK;
  fprintf(stderr, "luaretry: simulate: %s\n", luaretry_strerror(rc));
  return EXIT_POLICY;
}

int cli_simulate(int argc, char **argv) {
  simulate_args a;
  memset(&a, 0, sizeof a);
  a.seed = 1;
  luaretry_latency_options_init(&a.lat);
  a.outage = 30;
  a.status = 503;
  a.probes = calloc((size_t)argc + 1, sizeof *a.probes);
  if (!a.probes || !(a.sets = malloc(sizeof *a.sets * (size_t)(argc + 2)))) {
    free(a.probes);
    fprintf(stderr, "luaretry: out of memory\n");
    return EXIT_POLICY;
  }
  int status = parse_simulate(argc, argv, &a);
  luaretry_policy *p = NULL;
  if (status == 0 && !(p = cli_load_policy(a.path, a.sets, a.nsets, 1))) status = EXIT_POLICY;
  if (p) {
    if (a.latency) {
      if (a.calls) a.lat.calls = (long)a.calls;
      a.lat.seed = a.seed;
      status = cli_simulate_latency(p, &a.lat, a.json);
    } else if (a.fleet || a.process) {
      luaretry_herd_options o = { .clients = (long)a.clients,
                                  .outage = a.outage,
                                  .seed = a.seed,
                                  .outage_status = (int)a.status,
                                  .wave = a.wave,
                                  .wave_every = a.wave_every };
      status = cli_simulate_fleet(p, a.path, &o, a.json, a.process, a.local);
    } else
      status = a.clients ? simulate_herd(p, &a) : simulate_schedule(p, &a);
  }
  luaretry_policy_free(p);
  for (size_t i = 0; i < a.nprobes; i++) cli_probe_free(&a.probes[i]);
  free(a.probes);
  free(a.sets);
  return status;
}
