/* local_store.h: the fleet on one machine with no server (`--fleet local`,
 * README "Fleet").  The processes of one user that name the same key share
 * the guards through a shared-memory file (local_file.c opens it,
 * local_guard.c answers the engine through lr_remote_ops, as the Redis
 * view does through remote_guard.c; local_handle.c holds the settings,
 * local_settings.c what processes with other settings meet).  Needs no
 * hiredis.
 *
 * Crash-safe without a lock: every shared count is one 64-bit word of
 * the mapped file changed by one compare-and-swap (the budget's tokens;
 * the breaker's state, run, probes and opening packed in one word; each
 * bucket of the admission window as its number and count; the rate
 * limiter's theoretical arrival time; each block of the breaker's rate
 * window), so a process killed at any
 * instruction leaves every word as before or after its update, and no
 * one waits for it.
 *
 * A file that is not ours is refused, never used: a link, another
 * user's, another magic, version or size, a key of another name; so is a
 * folder that others may write to, and a file system with no room for
 * it.  Refused, the handle answers LR_REMOTE_LOCAL to every question (the
 * local guards decide) and the log hears why, once, at the first question
 * or outcome (a host sets its log after the load that opens the store).
 * The size is checked at open only: a file cut while mapped ends the
 * process with SIGBUS at its next update (local_file.c says why).
 *
 * The processes that share a store share its guard settings, as Redis's
 * script makes them (redis_script.c's cfg): the file holds a hash of the
 * settings, and the process that last used them and when.  A process
 * whose settings differ is refused the same way (LR_REMOTE_LOCAL, said
 * once, and once more when the store is its again) until no process with
 * the store's settings has used it for LR_LOCAL_SETTINGS_S seconds, unless
 * it was the last to use it (a reload): then its settings take over. */
#ifndef LUARETRY_LOCAL_STORE_H
#define LUARETRY_LOCAL_STORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "fleet.h"

typedef struct lr_local lr_local;

/* The store of `key` (any bytes: the file's name is a hash of it) in
 * folder `dir` (NULL or "": /tmp/luaretry-UID, made 0700).  Only the guard
 * fields, `log` and `log_ud` of *s are read.  OK with a handle even when
 * the file is refused (why in err, and through s->log at the first
 * question); E_NOMEM, E_ARG (no key) with no handle. */
lr_fleet_code lr_local_new(const char *dir, const char *key, const lr_fleet_settings *s,
                           lr_local **out, char *err, size_t errlen);
void lr_local_free(lr_local *l); /* NULL is fine */
/* New guard numbers (a reload): the shared counts go on. */
void lr_local_configure(lr_local *l, const lr_fleet_settings *s);

#define LR_LOCAL_SETTINGS_S 60 /* other settings' hold on a store (Redis's minute) */

/* ---- local_settings.c, for local_guard.c and local_handle.c: the
 * store's settings */

/* l's guard numbers as text and hash (l->cfg, l->cfg_hash). */
void lr_local_settings_text(lr_local *l);
/* Other settings hold the store (l->map): 1 and why in out; else 0. */
int lr_local_settings_refusal(lr_local *l, char *out, size_t size);

/* The store's settings made this process's when they may be (none yet,
 * its own last use, or another's older than LR_LOCAL_SETTINGS_S): 2 when
 * this call took the store over, 1 when they were already ours; else 0,
 * said once.  Called when the hashes differ. */
int lr_local_settings_claim(lr_local *l);
/* The store usable again after a refusal was said: said too (at a
 * claim, or by lr_local_settings_seen). */
void lr_local_settings_back(lr_local *l);
/* This process uses the store's settings at `now` (CLOCK_MONOTONIC
 * seconds, an outcome's): noted at most once a second (one word
 * written). */
void lr_local_settings_seen(lr_local *l, double now);

extern const lr_remote_ops lr_local_remote_ops;

typedef struct {
  int usable;                /* the file is open and ours */
  double tokens, max_tokens; /* max_tokens: this process's */
  int breaker, consecutive_failures, probes_left;
  double opened_ago;        /* seconds since it opened (or went half-open); -1: never */
  double requests, accepts; /* the admission window, */
  double window_seconds;    /* its length (0: no throttle) */
  double rate_limit;        /* per second (0: no shared rate) */
  double rate_ahead;        /* slots handed out up to this many seconds ahead */
  /* the file; why it is refused ("" when usable), or why this process's
   * settings are not the store's (usable, the counts shown: others' ) */
  char path[4200], detail[600];
} lr_local_status;

void lr_local_status_get(lr_local *l, lr_local_status *st);
/* Every shared guard afresh: full budget, breaker closed, empty window,
 * rate bucket full.  A refused entry (garbage, truncated, a link, a file
 * not writable, an empty folder) is removed instead, never followed, and
 * said through s->log, for the next process to make anew (this handle
 * stays refused: it is never remapped under running calls).  E_REFUSED
 * (err) when the folder is refused or the entry cannot be removed. */
lr_fleet_code lr_local_reset(lr_local *l, char *err, size_t errlen);

/* ---- local_guard.c, for local_handle.c: the counts of a usable store
 * (l->map) into *st */
void lr_local_counts(lr_local *l, lr_local_status *st);

/* ---- local_file.c, for local_handle.c and local_guard.c */

#define LR_LOCAL_BUCKETS 10
#define LR_LOCAL_BLOCKS  16

/* The file, as mapped: one page. */
typedef struct {
  uint64_t magic;
  uint32_t version, size; /* LR_LOCAL_VERSION, sizeof (lr_local_file) */
  uint64_t key_hash[2];
  char key[200]; /* the key's start, for people looking at the file */
  /* the guard settings' hash (0: none yet; local_handle.c), in the
   * padding of this read-mostly line: a file of version 1 without it has
   * the size and 0 */
  atomic_ullong cfg_hash;
  _Alignas(64) atomic_llong tokens; /* milli-tokens; < 0: full (a new or reset store) */
  atomic_ullong breaker;            /* local_guard.c's packing */
  _Alignas(64) atomic_ullong requests[LR_LOCAL_BUCKETS], accepts[LR_LOCAL_BUCKETS];
  _Alignas(64) atomic_llong tat_us; /* the rate limiter's; CLOCK_MONOTONIC µs */
  /* the budget's reserve (its floor): when it was last empty, µs as tat_us
   * (0 in a file of an older version: full); in tat_us's line, the size
   * unchanged */
  atomic_llong reserve_tat_us;
  /* the breaker's rate window: outcomes numbered by `outcomes`, in blocks
   * (local_guard.c's packing), counted from `window_from` (the number
   * of the first outcome since the breaker last opened or closed) */
  _Alignas(64) atomic_ullong outcomes, window_from;
  atomic_ullong blocks[LR_LOCAL_BLOCKS];
  /* who last used the settings of cfg_hash, and when: pid << 32 | seconds
   * of CLOCK_MONOTONIC (in the padding after the blocks: the size unchanged) */
  atomic_ullong cfg_seen;
} lr_local_file;

struct lr_local {
  lr_local_file *map; /* NULL: refused, the local guards decide */
  /* the guard numbers, read by decisions without a lock */
  atomic_int budget, breaker, throttle, rate;
  atomic_llong max_milli, ratio_milli, cost_milli, failures, open_cs, probes;
  atomic_llong reserve_milli; /* budget.reserve, thousandths of a retry per second */
  atomic_llong k_milli, bucket_ms, interval_us, tolerance_us;
  atomic_int rated, window, min_calls; /* the breaker's rate rules */
  atomic_llong failure_milli, slow_milli;
  char path[4200], detail[600];
  int file_refused;    /* the file (not the folder) was refused: reset removes it */
  lr_fleet_log_fn log; /* the refusal told once, at the first question */
  void *log_ud;
  atomic_int said;
  /* the guard settings as text (under cfg_lock: a reload rewrites it,
   * messages read it) and their hash; cfg_said: other settings' refusal
   * said */
  pthread_mutex_t cfg_lock;
  char cfg[400];
  atomic_ullong cfg_hash;
  atomic_int cfg_said;
  atomic_uint seen_s; /* when this process last wrote cfg_seen */
};

/* Maps the file of `key` under `dir` into l->map, or says why not in
 * l->detail (and err). */
void lr_local_file_open(lr_local *l, const char *dir, const char *key);
void lr_local_file_close(lr_local *l);
/* A store as new (the budget full, breaker closed, window empty). */
void lr_local_file_clear(lr_local_file *m);
/* local_guard.c's: what of a file's counts no process writes (garbage,
 * a time ahead of now: the rate limiter's judged by l's settings), for
 * local_file.c to refuse; NULL: none. */
const char *lr_local_counts_garbage(const lr_local *l, const lr_local_file *m);

#endif
