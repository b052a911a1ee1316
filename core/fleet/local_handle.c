/* local_handle.c: the local store's handle (local_store.h): its settings,
 * read by the guards without a lock (local_guard.c), its file
 * (local_file.c), and what `luaretry fleet --fleet local` shows and
 * resets. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "local_store.h"

#define MILLI 1000

/* The guard numbers as text (what a refusal shows as ours) and its hash
 * (what the file holds): every number the shared words are read with. */
static void settings_text(lr_local *l) {
  long long v[] = { atomic_load(&l->max_milli),     atomic_load(&l->ratio_milli),
                    atomic_load(&l->reserve_milli), atomic_load(&l->cost_milli),
                    atomic_load(&l->failure_milli), atomic_load(&l->slow_milli),
                    atomic_load(&l->k_milli) };
  char milli[7][32];
  for (int i = 0; i < 7; i++)
    lr_fmt(milli[i], sizeof milli[i], "%lld.%03lld", v[i] / MILLI, v[i] % MILLI);
  char text[sizeof l->cfg];
  lr_fmt(text, sizeof text,
         "budget=%d max_tokens=%s token_ratio=%s reserve=%s throttle_cost=%s breaker=%d "
         "failures=%lld open_cs=%lld probes=%lld window=%d min_calls=%d failure_rate=%s "
         "slow_rate=%s admission=%d k=%s bucket_ms=%lld rate=%d interval_us=%lld "
         "tolerance_us=%lld",
         atomic_load(&l->budget), milli[0], milli[1], milli[2], milli[3], atomic_load(&l->breaker),
         atomic_load(&l->failures), atomic_load(&l->open_cs), atomic_load(&l->probes),
         atomic_load(&l->rated) ? atomic_load(&l->window) : 0,
         atomic_load(&l->rated) ? atomic_load(&l->min_calls) : 0, milli[4], milli[5],
         atomic_load(&l->throttle), milli[6], atomic_load(&l->bucket_ms), atomic_load(&l->rate),
         atomic_load(&l->interval_us), atomic_load(&l->tolerance_us));
  pthread_mutex_lock(&l->cfg_lock);
  lr_strlcpy(l->cfg, text, sizeof l->cfg);
  pthread_mutex_unlock(&l->cfg_lock);
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (const char *c = text; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
  atomic_store(&l->cfg_hash, h ? h : 1); /* 0 is the file's "none yet" */
}

static uint32_t seconds_now(void) { return (uint32_t)(lr_monotonic_coarse_ms() / 1000); }

/* Another process's settings hold the store now: 1, with who and how
 * long ago they were used. */
static int held_by_others(lr_local *l, uint64_t theirs, uint32_t *by, int32_t *ago) {
  uint64_t seen = atomic_load(&l->map->cfg_seen);
  *by = (uint32_t)(seen >> 32);
  *ago = (int32_t)(seconds_now() - (uint32_t)seen); /* < 0: another's clock read later */
  if (*ago < 0) *ago = 0;
  return theirs != 0 && theirs != atomic_load(&l->cfg_hash) && *by != (uint32_t)getpid() &&
         *ago < LR_LOCAL_SETTINGS_S;
}

/* Redis's refusal (redis_script.c), in the store's words: theirs are a
 * process's, whose pid the file holds. */
static void refusal_text(lr_local *l, uint32_t by, int32_t ago, char *out, size_t size) {
  pthread_mutex_lock(&l->cfg_lock);
  lr_fmt(out, size,
         "%s: the key is shared with other settings (theirs: process %u's, used %d s ago; ours: "
         "%s): give this policy a fleet.key of its own, or reset the fleet",
         l->path, (unsigned)by, (int)ago, l->cfg);
  pthread_mutex_unlock(&l->cfg_lock);
}

static void say(lr_local *l, const char *what) {
  if (!l->log) return;
  char line[1200];
  lr_fmt(line, sizeof line, "fleet guards (local): %s", what);
  l->log(l->log_ud, line);
}

int lr_local_settings_claim(lr_local *l) {
  lr_local_file *m = l->map;
  uint64_t ours = atomic_load(&l->cfg_hash), theirs = atomic_load(&m->cfg_hash);
  while (theirs != ours) {
    uint32_t by;
    int32_t ago;
    if (held_by_others(l, theirs, &by, &ago)) {
      if (!atomic_exchange(&l->cfg_said, 1)) {
        char text[1100];
        refusal_text(l, by, ago, text, sizeof text);
        lr_strlcpy(text + strlen(text), "; local guards decide", sizeof text - strlen(text));
        say(l, text);
      }
      return 0;
    }
    if (atomic_compare_exchange_strong(&m->cfg_hash, &theirs, ours)) {
      atomic_store(&l->seen_s, 0);
      lr_local_settings_seen(l);
      lr_local_settings_back(l);
      return 1;
    }
  }
  return 1;
}

void lr_local_settings_back(lr_local *l) {
  if (!atomic_exchange(&l->cfg_said, 0)) return;
  char text[4300];
  lr_fmt(text, sizeof text, "%s: back, machine-wide again", l->path);
  say(l, text);
}

void lr_local_settings_seen(lr_local *l) {
  uint32_t now = seconds_now();
  if (atomic_load_explicit(&l->seen_s, memory_order_relaxed) == now) return;
  atomic_store_explicit(&l->seen_s, now, memory_order_relaxed);
  lr_local_file *m = l->map;
  if (atomic_load(&m->cfg_hash) == atomic_load(&l->cfg_hash))
    atomic_store(&m->cfg_seen, (uint64_t)(uint32_t)getpid() << 32 | now);
}

void lr_local_configure(lr_local *l, const lr_fleet_settings *s) {
  if (!l || !s) return;
  atomic_store(&l->max_milli, llround(s->max_tokens * MILLI));
  atomic_store(&l->ratio_milli, llround(s->token_ratio * MILLI));
  atomic_store(&l->reserve_milli, llround(s->reserve * MILLI));
  atomic_store(&l->cost_milli, llround(s->throttle_cost * MILLI));
  atomic_store(&l->failures, s->failures);
  atomic_store(&l->open_cs, llround(s->open_seconds * 100));
  atomic_store(&l->probes, s->probes < 1 ? 1 : s->probes);
  atomic_store(&l->k_milli, llround(s->throttle_k * MILLI));
  long long bucket = llround(s->throttle_window * 1000 / LR_LOCAL_BUCKETS);
  atomic_store(&l->bucket_ms, bucket < 1 ? 1 : bucket);
  int rate = s->rate && s->rate_limit > 0;
  long long interval = rate ? llround(1e6 / s->rate_limit) : 1;
  atomic_store(&l->interval_us, interval < 1 ? 1 : interval);
  atomic_store(&l->tolerance_us, rate ? (s->rate_burst - 1) * interval : 0);
  int window = s->window < 1 ? 1 : s->window > 16 * 4095 ? 16 * 4095 : s->window;
  atomic_store(&l->window, window);
  atomic_store(&l->min_calls, s->min_calls);
  atomic_store(&l->failure_milli, llround(s->failure_rate * MILLI));
  atomic_store(&l->slow_milli, llround(s->slow_rate * MILLI));
  atomic_store(&l->rated, s->breaker && s->window > 0 && (s->failure_rate > 0 || s->slow_rate > 0));
  atomic_store(&l->budget, s->budget);
  atomic_store(&l->breaker, s->breaker);
  atomic_store(&l->throttle, s->throttle);
  atomic_store(&l->rate, rate);
  settings_text(l);
}

lr_fleet_code lr_local_new(const char *dir, const char *key, const lr_fleet_settings *s,
                           lr_local **out, char *err, size_t errlen) {
  if (!out || !s || !key || !key[0]) return LR_FLEET_E_ARG;
  lr_local *l = calloc(1, sizeof *l);
  *out = l;
  if (!l) return LR_FLEET_E_NOMEM;
  pthread_mutex_init(&l->cfg_lock, NULL);
  lr_local_configure(l, s);
  l->log = s->log, l->log_ud = s->log_ud;
  lr_local_file_open(l, dir, key);
  if (l->detail[0] && err) lr_fmt(err, errlen, "%s", l->detail);
  return LR_FLEET_OK;
}

void lr_local_free(lr_local *l) {
  if (!l) return;
  lr_local_file_close(l);
  pthread_mutex_destroy(&l->cfg_lock);
  free(l);
}

void lr_local_status_get(lr_local *l, lr_local_status *st) {
  memset(st, 0, sizeof *st);
  if (!l) return;
  lr_strlcpy(st->path, l->path, sizeof st->path);
  lr_strlcpy(st->detail, l->detail, sizeof st->detail);
  st->max_tokens = (double)atomic_load(&l->max_milli) / MILLI;
  st->opened_ago = -1;
  if (!l->map) return;
  st->usable = 1;
  lr_local_counts(l, st);
  uint32_t by;
  int32_t ago;
  if (held_by_others(l, atomic_load(&l->map->cfg_hash), &by, &ago))
    refusal_text(l, by, ago, st->detail, sizeof st->detail);
}

lr_fleet_code lr_local_reset(lr_local *l, char *err, size_t errlen) {
  if (!l) return LR_FLEET_E_ARG;
  if (!l->map && l->file_refused && unlink(l->path) == 0) {
    lr_fmt(err, errlen, "%s: removed (it was refused); the next process makes a new one", l->path);
    return LR_FLEET_OK;
  }
  if (!l->map) {
    lr_fmt(err, errlen, "%s", l->detail);
    return LR_FLEET_E_REFUSED;
  }
  lr_local_file_clear(l->map);
  return LR_FLEET_OK;
}
