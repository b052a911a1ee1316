/*
 * luaretry_tool.h: what the command line (`luaretry check`, `luaretry
 * simulate`) and the Lua module's testing methods (p:sample) use beside
 * luaretry.h.  UNSTABLE: not installed, not exported by libluaretry.so
 * (these functions are in libluaretry.a and the objects the command and
 * the module are built from), and free to change in any release; no ABI
 * promise of luaretry.h covers it.  A host needs none of it.
 *
 * What stays public, and why: luaretry_simulate (p:schedule, `luaretry
 * simulate`'s schedule) is the engine's answer to "what will this policy
 * do", which a host may show its users; it is in luaretry.h under its ABI
 * rules.  luaretry_policy_sample_backoff (p:sample) is the engine's
 * arithmetic for tests: here.
 */
#ifndef LUARETRY_TOOL_H
#define LUARETRY_TOOL_H

#include "luaretry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Hidden in the shared library: the command and the module link the
 * objects themselves. */
#define LUARETRY_TOOL

/* A number by the rule of a policy's numbers (a file's, a --set's):
 * decimal, no spaces, '+', hex, inf or nan; 1 and *out, or 0.  The
 * command reads its own options' numbers by it (-m as attempt_timeout). */
LUARETRY_TOOL int luaretry_decimal(const char *s, double *out);
/* For a refused s that strtod would have read (" 1", "0x2", "inf"): the
 * rule, said in words, to add to the error; "" otherwise. */
LUARETRY_TOOL const char *luaretry_decimal_note(const char *s);

/* For checks (`luaretry check`), set before loading: a trap on the
 * script's globals adds a warning ("FILE:LINE: NAME: read of an undefined
 * global inside a hook") for each read of a global no one set, whenever a
 * hook runs (a typo such as `statuss`); warnings stay in line order.  It
 * finds only what runs: a probe must reach the line.  A script that sets a
 * metatable on its globals (a strict mode) is left alone. */
LUARETRY_TOOL void luaretry_policy_warn_undefined_globals(luaretry_policy *p, int on);

/* Where the loaded script's field (or a table's field: "backoff.initial")
 * came from when it was inherited: the name of the policy it requires
 * ("http" for require "http"); NULL when the script set it itself or left
 * it to the default.  A policy that requires another inherits its settings
 * and hooks as defaults; its own assignments win wherever they stand. */
LUARETRY_TOOL const char *luaretry_policy_origin(const luaretry_policy *p, const char *field);

/* For checks: runs the script's on_breaker(state) once, as a breaker
 * change would ("open", "half_open", "closed").  LUARETRY_OK also when the
 * script has none; LUARETRY_E_POLICY with its error (file and line) in
 * err. */
LUARETRY_TOOL luaretry_code luaretry_policy_probe_on_breaker(luaretry_policy *p, const char *state,
                                                             char *err, size_t errlen);

/* What N clients failing together at t=0 do to a service, each one call
 * on the virtual clock through the engine (luaretry simulate --clients N
 * --fleet): every attempt that starts within `outage` seconds gets a 503,
 * every later one a 200, and the policy's own classifier and rules decide.
 * `fleet` = 0: each client has a budget and breaker of its own (N
 * processes, one call each); 1: the N clients share one, each learning
 * the others' counts as a process of the fleet does (a sync when its call
 * begins, a batch of its outcomes at most `sync` seconds apart, and one
 * before each retry), round trips taking no time.  Nothing here touches
 * Redis or the policy's counters. */
/* Each attempt of a herd's clients, as it is decided: the client, the
 * attempt's start (virtual seconds), the status it got and the decision;
 * return nonzero to stop the simulation (LUARETRY_E_CANCELLED).  Without
 * `fleet`, client 0's attempts come first, then client 1's...; with it,
 * every client's, in the order of their start times. */
typedef int (*luaretry_herd_attempt_fn)(void *ud, long client, double time, int status,
                                        const luaretry_decision *d);

typedef struct {
  long clients;  /* 1 to 1000000 */
  double outage; /* seconds, 0 to 1e6 */
  uint64_t seed; /* client i draws from seed + i */
  int fleet;
  double sync;                   /* seconds; 0: the policy's fleet.sync */
  luaretry_herd_attempt_fn each; /* NULL: none */
  void *ud;
  int outage_status; /* the outage's answer; 0: 503 (429: throttling) */
  int shared;        /* 1: the N clients are calls of one process,
                                   sharing its guards (budget, breaker,
                                   throttle, rate): fresh ones, not the policy's */
  uint64_t reserved[1];
  /* Not with `shared`: the clients start in waves, `wave` of them every
   * `wave_every` seconds (client i at (i / wave) * wave_every), as
   * processes started by a batch; 0: every one at t=0.  The outage
   * begins at 0 whatever the waves. */
  long wave;
  double wave_every; /* seconds, 0 to 1e6 */
  /* With `fleet`: the local store's (--fleet local): each outcome counted
   * at once (give `sync` 1e-6), no leases, no round trips */
  int local;
} luaretry_herd_options;

typedef struct {
  uint64_t clients;
  uint64_t first_attempts; /* clients whose call made an attempt */
  uint64_t attempts;       /* all of them, the first ones included */
  double amplification;    /* attempts per first attempt */
  uint64_t stops[32];      /* the clients' calls by the reason they
                                   stopped (a luaretry_reason; [0]: stopped
                                   by LUARETRY_SIMULATE_ATTEMPT_CAP) */
  double last_attempt;     /* the last attempt's start, seconds */
  /* With `fleet`: the round trips the clients made to the fleet, as a
   * process's Redis commands count them (luaretry_metrics'
   * fleet_round_trips: a connect's, each sync, a lease of rate slots, the
   * reserve's), and the clients' lives (from each one's start to its
   * call's end) added up, seconds */
  uint64_t round_trips;
  double client_seconds;
  uint64_t reserved[6];
} luaretry_herd_result;

LUARETRY_TOOL luaretry_code luaretry_simulate_herd(luaretry_policy *p,
                                                   const luaretry_herd_options *o,
                                                   luaretry_herd_result *r);

/* What the policy's hedge does to the tail (luaretry simulate --latency):
 * `calls` calls one after another on the virtual clock, each attempt
 * answering 200 after `base` seconds, or after `slow` seconds for a
 * `fraction` of the attempts (drawn from `seed`; call i's jitter from
 * seed + i), an attempt longer than its timeout timing out.  Run it with
 * `no_hedge` 0 and 1 and the same options: both see the same latencies.
 * The calls share a budget and breaker of their own, fresh for each run;
 * the policy's guards, counters and fleet are never touched.
 * LUARETRY_E_ARG when an option is out of range (luaretry_policy_errmsg
 * names it), LUARETRY_E_POLICY when the script failed in a call (its
 * message there too), LUARETRY_E_NOMEM (8 bytes a call are kept). */
typedef struct {
  long calls;      /* 1 to 1000000; luaretry_latency_options_init: 1000 */
  double base;     /* seconds, 0 to 3600 */
  double slow;     /* seconds, 0 to 3600 */
  double fraction; /* the share of slow attempts, 0 to 1 */
  uint64_t seed;
  int no_hedge; /* 1: no call is hedged, whatever the policy says */
  uint32_t reserved_32;
  uint64_t reserved[4];
} luaretry_latency_options;

typedef struct {
  uint64_t calls;
  double p50, p99, p999;    /* seconds from a call's begin to its end */
  uint64_t requests;        /* attempts sent, hedges included */
  double requests_per_call; /* requests / calls */
  uint64_t hedges;          /* hedges sent */
  uint64_t hedges_won;      /* hedges whose answer ended their call */
  uint64_t reserved[8];
} luaretry_latency_result;

LUARETRY_TOOL void luaretry_latency_options_init(luaretry_latency_options *o);
LUARETRY_TOOL luaretry_code luaretry_simulate_latency(luaretry_policy *p,
                                                      const luaretry_latency_options *o,
                                                      luaretry_latency_result *r);

/* `count` draws of the policy's backoff for retry n (n = 0 before the
 * second attempt) from a generator seeded with `seed`, each starting from
 * `previous` (decorrelated jitter's state; < 0: the policy's initial), into
 * out[]: the engine's own arithmetic, for tests and documentation.
 * LUARETRY_E_STATE when the backoff is a script function. */
LUARETRY_TOOL luaretry_code luaretry_policy_sample_backoff(const luaretry_policy *p, uint64_t n,
                                                           uint64_t seed, double previous,
                                                           double *out, size_t count);

#ifdef __cplusplus
}
#endif
#endif
