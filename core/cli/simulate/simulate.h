/* simulate.h: the herd `simulate --clients` measures, and svg.c draws. */
#ifndef LUARETRY_CLI_SIMULATE_H
#define LUARETRY_CLI_SIMULATE_H

#include <stdint.h>
#include <stdio.h>

#include "cli/cli.h"
#include "luaretry.h"

#define WINDOW    0.1 /* the peak's window, seconds */
#define N_REASONS (LUARETRY_REASON_RATE_LIMIT + 1)

typedef struct {
  const char *path;
  const char *name; /* the policy's name */
  long clients;
  double outage;
  int status; /* the outage's answer (503, or 429: throttling) */
  uint64_t seed;
  double *retry; /* start times of attempts after the first */
  size_t nretry, cap;
  long by_reason[N_REASONS];
  long capped; /* clients stopped by LUARETRY_SIMULATE_ATTEMPT_CAP */
  double last; /* the last attempt's start */
  /* the peak: most retries in any WINDOW, and where */
  long peak;
  double peak_at;
  double even; /* retries per WINDOW if spread evenly */
  long windows;
  /* the histogram */
  double width;
  long nbuckets;
  long *buckets;
} herd;

/* probes.c: one call whose attempts meet the outcomes pr[0..n) in order,
 * the last repeating, each decision given to `each`; an exit status. */
int cli_simulate_probes(luaretry_policy *p, const cli_probe *pr, size_t n, uint64_t seed,
                        luaretry_decision_fn each, void *ud);

/* svg.c: the histogram of a measured herd as one self-contained SVG. */
void svg_write(FILE *f, const herd *h);

#endif
