/* fleet.h: fleet-wide guards.  One retry budget, one circuit breaker and
 * one client-side throttle's window per policy, shared through Redis by
 * every process that names the same server and key (README.md "Fleet: one budget and one breaker for every
 * process").
 *
 * Plain C: neither lua.h, curl.h nor hiredis.h is needed to use it.  The
 * engine keeps its local guards (guard.c) and asks the fleet first; every
 * question here may answer LR_FLEET_LOCAL ("the fleet's counts are not
 * known right now: decide with the local guards"), which is what happens
 * before the first sync, while Redis is slow, down or refusing, and when
 * the view has gone stale.
 *
 * The budget is leased (budget_lease.c, whose header is the design): a
 * process holds a block of the fleet's tokens and pays its failures from
 * it, with no round trip until the sync period's.
 *
 * Cost model: no function the engine calls waits for Redis.
 *   lr_fleet_record, lr_fleet_spend, lr_fleet_throttle_request
 *                              a few relaxed atomic adds (a failure: a
 *                              compare-and-swap on the block), no lock,
 *                              no I/O
 *   lr_fleet_budget_allows_retry, lr_fleet_breaker_admits
 *                              atomic loads, no lock, no I/O
 *   lr_fleet_maybe_sync, lr_fleet_refresh_soon, and a first attempt while
 *   the fleet's breaker is half-open, or a rate limiter's empty lease
 *                              a coarse clock read; when a round trip is
 *                              due, a kick of the handle's worker (a lock
 *                              held for a few instructions, a condition
 *                              signalled): the worker makes it
 *   lr_fleet_sync_now, lr_fleet_refresh, lr_fleet_flush, admin
 *                              one round trip on the caller's thread,
 *                              bounded by command_timeout_ms (plus
 *                              connect_timeout_ms when a reconnect is due:
 *                              AUTH and SELECT share the
 *                              command's time)
 *
 * Threads: every function may be called from any number of threads on one
 * handle, except lr_fleet_free.  Each handle has one thread of its own,
 * the worker (worker.c), started by the first round trip the engine's
 * calls need and joined by lr_fleet_free; it blocks all signals and never
 * calls into the host: the log callback is called on a caller's thread,
 * by the next call into the handle after a change of health.  In a fork's
 * child the handle makes no round trip (the connection is the parent's):
 * local guards decide.  Host names that are not numeric addresses are
 * resolved with glibc's getaddrinfo_a, which runs the lookup in a glibc
 * helper thread so that the connect deadline bounds it; that thread never
 * calls into the host.
 *
 * URLs:
 *   redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]   (PORT 6379, DB 0 by default;
 *                                 HOST may be [IPv6]; USER and PASSWORD are
 *                                 percent-decoded)
 *   unix://[[USER]:PASSWORD@]/PATH/TO/SOCKET[?db=N]
 *   redis+unix:// is accepted as a synonym of unix://.
 * No message this module produces contains USER or PASSWORD: URLs are shown
 * redacted, the userinfo replaced by three asterisks, and a server's text
 * is scrubbed of them before it is cut.
 *
 * Whatever answers on Redis's port is not trusted: replies are read with
 * hard limits (reply.c), each number is checked against what the update
 * script can answer, and anything else is LR_FLEET_E_PROTOCOL, which
 * degrades to the local guards as a timeout does.
 */
#ifndef LUARETRY_FLEET_H
#define LUARETRY_FLEET_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

typedef struct lr_fleet lr_fleet;

/* Append-only: a code never changes meaning. */
typedef enum {
  LR_FLEET_OK = 0,
  LR_FLEET_E_ARG, /* a bad URL, key or setting */
  LR_FLEET_E_NOMEM,
  LR_FLEET_E_CONNECT,   /* name not resolved, connection refused, reset or closed */
  LR_FLEET_E_TIMEOUT,   /* connect or command took longer than allowed */
  LR_FLEET_E_AUTH,      /* wrong user or password, or the server needs one */
  LR_FLEET_E_REFUSED,   /* an error reply: read-only replica, no scripting, bad DB... */
  LR_FLEET_E_PROTOCOL,  /* a reply that is not what was asked for */
  LR_FLEET_E_BACKOFF,   /* degraded, the next reconnect is not due: nothing sent */
  LR_FLEET_E_CANCELLED, /* the call whose round trip it was was cancelled */
  LR_FLEET_E_FORKED     /* a fork's child asked a handle its parent made: nothing sent */
} lr_fleet_code;

const char *lr_fleet_strerror(lr_fleet_code code);

/* 1 in the process that made the handle, 0 in a fork's child: there the
 * parent's threads (the worker) may have held any of its locks at the
 * fork, so a child's question takes none of them, and no round trip is
 * made on the parent's connection (LR_FLEET_E_FORKED): the child's own
 * load makes it a handle of its own. */
int lr_fleet_owned(const lr_fleet *f);

/* One line, no newline, no credentials; called once per change of health
 * (to degraded, and back), on a caller's thread (never the worker's), by
 * the first call into the handle after the change, with no lock held. */
typedef void (*lr_fleet_log_fn)(void *ud, const char *message);

typedef struct {
  /* The guards, with the meaning of the policy's `budget` and `breaker`
   * (lr_guards in the engine): the same numbers on every process. */
  int budget;
  double max_tokens, token_ratio;
  double reserve; /* the budget's floor, retries per second fleet-wide (reserve.c) */
  int breaker;
  int failures;        /* transient failures in a row, fleet-wide */
  double open_seconds; /* on Redis's clock; kept at most LR_FLEET_OPEN_MAX_S */
  int probes;          /* permits fleet-wide while half-open */
  /* the client-side throttle (the policy's `throttle`) on the fleet's
   * counts: requests and accepts over `throttle_window` seconds, in ten
   * buckets on Redis's clock as the local throttle keeps them in ten on
   * its own; a throttling answer costs `throttle_cost` tokens (the budget's
   * budget.throttle_cost) and is an answer to the breaker */
  int throttle;
  double throttle_k, throttle_window, throttle_cost;

  int connect_timeout_ms; /* name lookup + TCP or Unix connect; 250 */
  int command_timeout_ms; /* one round trip; after a connect, its AUTH
                                and SELECT within it; 100 */
  int sync_ms;            /* the longest a success's delta waits; 200 */
  int stale_ms;           /* a view older than this is not used; 0: 10 * sync_ms */
  int reconnect_min_ms;   /* first wait after a failure; 500 */
  int reconnect_max_ms;   /* doubling up to this, jittered; 30000 */
  int ttl_seconds;        /* state expires this long after the last sync; 3600 */
  const char *member;     /* name in the registry; NULL: "HOST:PID:N", N this
                             process's Nth handle (the settings are HOST:PID's) */
  lr_fleet_log_fn log;    /* NULL: silent */
  void *log_ud;
  /* the rate limiter (the policy's fixed `rate`), one GCRA for the fleet
   * under "luaretry:{KEY}:rate" (redis_rate.c): 0: off */
  int rate;
  double rate_limit; /* tokens per second, > 0 */
  long rate_burst;   /* >= 1 */
  /* the breaker's rate rules (the local store only; Redis's fleet leaves
   * them to each process): over the last `window` outcomes, once
   * `min_calls` are in; 0: off */
  int window, min_calls;
  double failure_rate, slow_rate;
} lr_fleet_settings;

/* The longest open period the fleet's breaker keeps (Redis's and the
 * local store's), seconds: 9e9, as the engine's breaker keeps its times
 * (guard.c's to_ns), about 285 years, for ever in effect.  A longer
 * open_seconds (the schema takes any up to infinity) is kept as this: in
 * ms or centiseconds it overflowed a long long, and the breaker read a
 * negative period, over at once. */
#define LR_FLEET_OPEN_MAX_S 9e9
/* open_seconds as the fleet keeps it: within [0, LR_FLEET_OPEN_MAX_S]. */
static inline double lr_fleet_open_seconds(double open_seconds) {
  return open_seconds < LR_FLEET_OPEN_MAX_S ? (open_seconds > 0 ? open_seconds : 0)
                                            : LR_FLEET_OPEN_MAX_S;
}

/* Fills the defaults above; guards off. */
void lr_fleet_settings_init(lr_fleet_settings *s);

/* Parses the URL and checks the key (the policy's name or its fleet.key:
 * 1 to 200 printable bytes, no '{', '}' or space).  The guard settings are
 * stored with the key; a process whose settings differ from those stored
 * is refused (E_REFUSED, local guards) until they give way (redis_script.c).  Does no I/O: a handle
 * is made even when Redis is down.  On an error, *out is NULL and err says
 * why (never with credentials).  Redis keys: "luaretry:{KEY}" (a hash) and
 * "luaretry:{KEY}:procs" (a sorted set); the braces keep both in one slot
 * of a Redis Cluster. */
lr_fleet_code lr_fleet_new(const char *url, const char *key, const lr_fleet_settings *s,
                           lr_fleet **out, char *err, size_t errlen);
void lr_fleet_free(lr_fleet *f); /* NULL is fine */

/* Parses a URL as lr_fleet_new does (no I/O): OK with the URL as messages
 * show it in `redacted`, or why not in err (never with credentials). */
lr_fleet_code lr_fleet_url_check(const char *url, char *redacted, size_t size, char *err,
                                 size_t errlen);

/* New guard numbers (a reload, an override); the fleet's counts go on.
 * Only the guard fields of *s are read: timeouts, sync, log and member
 * stay as lr_fleet_new set them. */
void lr_fleet_configure(lr_fleet *f, const lr_fleet_settings *s);

/* ---- the engine's side */

typedef enum {
  LR_FLEET_SUCCESS,  /* +token_ratio, resets the failure run, closes half-open */
  LR_FLEET_FAILURE,  /* -1 token, one more failure in a row */
  LR_FLEET_ANSWERED, /* a final answer: resets the run, closes half-open */
  LR_FLEET_THROTTLED /* a throttling answer: -throttle_cost tokens, an answer */
} lr_fleet_outcome;

/* Counts an outcome into the next batch.  Lock-free, no I/O.  1: a
 * failure paid from this process's block of the budget's tokens (its
 * lease, budget_lease.c), which needs no round trip soon; 0 otherwise. */
int lr_fleet_record(lr_fleet *f, lr_fleet_outcome o);

/* One round trip: flushes the batch, learns the fleet's state.  Connects
 * when not connected and the reconnect backoff allows (E_BACKOFF
 * otherwise, at once).  Never longer than connect_timeout_ms +
 * command_timeout_ms (a SCRIPT FLUSH's EVAL included). */
lr_fleet_code lr_fleet_sync_now(lr_fleet *f);

/* lr_fleet_sync_now for a process about to make calls (`run`'s first
 * sync, luaretry_policy_fleet_sync): while the fleet's breaker is
 * half-open the same round trip asks for a probe permit, which this
 * process's next first attempt takes (a permit never used is renewed
 * fleet-wide after open_seconds). */
lr_fleet_code lr_fleet_sync_to_call(lr_fleet *f);

/* Never blocks.  When sync_ms passed since the last sync, kicks the
 * worker to send the batch (and tells the log of a change of health). */
void lr_fleet_maybe_sync(lr_fleet *f);
/* The same with the caller's reading of CLOCK_MONOTONIC in ms (the
 * engine's call has one already: a clock read less on the success path). */
void lr_fleet_maybe_sync_at(lr_fleet *f, int64_t now_ms);

/* lr_fleet_sync_now, unless nothing counted is left to send and the
 * fleet's state was learned within sync_ms (another thread's round trip,
 * the worker's): then nothing waits. */
lr_fleet_code lr_fleet_refresh(lr_fleet *f);
/* The pre-retry check's, and a failure's: never waits.  Unless the view
 * is as recent as lr_fleet_refresh asks, the worker is kicked to make the
 * round trip; the decision goes on with what is known. */
void lr_fleet_refresh_soon(lr_fleet *f);

/* Sends what was counted and not sent yet, and gives back the budget's
 * block and the half-open breaker's probe permits this process holds,
 * when healthy: one round trip (connecting again if the worker's, cut
 * short, closed the connection; within one patience if the worker's had
 * waited less: lr_fleet_failed_locked), or none (nothing to send or give
 * back; Redis down or never reached).
 * Before a handle is freed, so that a process's last outcomes count: the
 * worker ends first (a round trip of its under way is cut short), and
 * the handle makes no more round trips but the caller's own. */
lr_fleet_code lr_fleet_flush(lr_fleet *f);

#define LR_FLEET_LOCAL (-1)

/* 1: a retry may go, 0: the fleet's budget refuses, LR_FLEET_LOCAL.  The
 * fleet's tokens at the last sync, plus this process's unsent deltas. */
int lr_fleet_budget_allows_retry(lr_fleet *f);

/* A round trip's usual time in seconds (a moving average; 0: none yet). */
double lr_fleet_round_trip(lr_fleet *f);

/* The fleet's tokens as lr_fleet_budget_allows_retry sees them. */
double lr_fleet_tokens(lr_fleet *f);

/* A hedge sent: one token, into the next batch.  Lock-free, no I/O. */
void lr_fleet_spend(lr_fleet *f);

/* The client-side throttle: counts one request into the next batch and
 * answers the probability of refusing it from the fleet's window at the
 * last sync plus this process's counts since (sent or not), or
 * LR_FLEET_LOCAL when the view is not fresh (the request is counted all
 * the same).  Lock-free, no I/O. */
double lr_fleet_throttle_request(lr_fleet *f);
/* The same probability, nothing counted; LR_FLEET_LOCAL when not fresh. */
double lr_fleet_throttle_refusal(lr_fleet *f);
/* An accept (a success, a final answer) of a request it counted. */
void lr_fleet_throttle_accept(lr_fleet *f);
/* A request lr_fleet_throttle_request counted, uncounted (a later guard
 * refused the attempt): out of the next batch.  Lock-free, no I/O. */
void lr_fleet_throttle_unrequest(lr_fleet *f);

#define LR_FLEET_PERMIT 2

/* 1: admitted, 0: the fleet's circuit is open, LR_FLEET_LOCAL.  A first
 * attempt while the fleet is half-open needs one of the fleet's probe
 * permits: one the worker brought is taken (LR_FLEET_PERMIT: admitted
 * with it), else the worker is asked for one (at most once per sync_ms)
 * and the call is refused, as a half-open breaker refuses calls beyond its
 * probes.  Never waits. */
int lr_fleet_breaker_admits(lr_fleet *f, int first_attempt);
/* A permit taken (LR_FLEET_PERMIT) for an attempt a later guard refused,
 * or whose answer was a throttling one (neutral to the breaker): back for
 * this process's next call, never more than `probes` held (those left
 * when the handle closes go back to the fleet: lr_fleet_flush).
 * Lock-free, no I/O. */
void lr_fleet_permit_give_back(lr_fleet *f);

/* The fleet's rate limiter (lr_remote_ops' rate_reserve, in seconds of
 * CLOCK_MONOTONIC): a slot of this process's lease for an attempt at
 * `at`, else the worker is asked to lease a block of them and the caller
 * asks again after *wait (a few ms).  Never waits.  1: held (*wait from
 * `at`, or -1 when it comes after `latest`), 0: ask again after *wait,
 * LR_FLEET_LOCAL: the local limiter decides (off; Redis down, slow,
 * refusing or garbled: said once through the log, as for the budget; the
 * block asked for longer than the round trip may take; no time left before
 * limit_ms, CLOCK_MONOTONIC ms, 0: none). */
int lr_fleet_rate_reserve(lr_fleet *f, double at, double latest, int64_t limit_ms, double u,
                          double *wait);

/* ---- what is known */

typedef enum {
  LR_FLEET_UNKNOWN = 0, /* no sync yet */
  LR_FLEET_HEALTHY,     /* the last round trip worked */
  LR_FLEET_DEGRADED     /* the last one failed: local guards decide */
} lr_fleet_health;

const char *lr_fleet_health_name(lr_fleet_health h);

typedef struct {
  lr_fleet_health health;
  int fresh;                /* healthy and synced within stale_ms: used */
  double tokens;            /* the fleet's, this process's unsent deltas in */
  int breaker;              /* luaretry_breaker_state: 0 closed, 1 open, 2 half-open */
  int consecutive_failures; /* fleet-wide */
  int probes_left;          /* permits not yet handed out */
  double requests, accepts; /* the throttle's window, this process's since in */
  long long opened_at_ms;   /* Redis's clock, Unix ms; 0: never */
  double synced_ago;        /* seconds since the last good sync; -1: never */
  long long syncs, sync_failures;
  double lease;     /* the budget's tokens this process holds (its block) */
  double leased;    /* the fleet's tokens out in leases at the last sync */
  char where[300];  /* the redacted URL */
  char key[220];    /* the hash's key in Redis: "luaretry:{KEY}" */
  char detail[300]; /* why degraded, or "" */
} lr_fleet_view;

void lr_fleet_view_get(lr_fleet *f, lr_fleet_view *v);

/* Commands this handle sent to Redis (each a request and its reply: the
 * syncs (EVALSHA, and EVAL after NOSCRIPT), a connect's AUTH and SELECT,
 * a sentinel's question, a cluster's ASKING, the rate limiter's, the
 * reserve's when the sync before the retry did not ask it (reserve.c),
 * administration).  0 for NULL. */
unsigned long long lr_fleet_round_trips(lr_fleet *f);

/* ---- administration (luaretry fleet POLICY [--reset]): each one bounded
 * round trip, connecting at once whatever the reconnect backoff. */

typedef struct {
  char member[128]; /* "HOST:PID:N" */
  double seen_ago;  /* seconds */
} lr_fleet_process;

typedef struct {
  int exists;                /* 0: no state in Redis (never synced, expired, reset) */
  double tokens, max_tokens; /* max_tokens: the last writer's */
  int breaker, consecutive_failures, probes_left;
  long long opened_at_ms, updated_at_ms, now_ms; /* Redis's clock */
  /* the client-side throttle's window (throttle: this handle has one) */
  int throttle;
  double window_requests, window_accepts, window_seconds;
  /* the fleet's rate limiter (rate: this handle has one): slots leased
   * to processes, up to rate_ahead s after now */
  int rate;
  double rate_limit, rate_ahead;
  /* the budget's leases (budget_lease.c): tokens out in blocks (tokens
   * above counts them), and the processes holding one */
  double leased;
  long lease_holders;
  size_t count;                /* processes that synced in the last minute (the
                                newest 1000 at most), names with control
                                bytes escaped (\xNN) */
  lr_fleet_process *processes; /* most recent first; lr_fleet_status_free */
} lr_fleet_status;

lr_fleet_code lr_fleet_status_get(lr_fleet *f, lr_fleet_status *st, char *err, size_t errlen);
void lr_fleet_status_free(lr_fleet_status *st);
/* Deletes the key's hash and registry: the fleet starts afresh. */
lr_fleet_code lr_fleet_reset(lr_fleet *f, char *err, size_t errlen);

#endif
