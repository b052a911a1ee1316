/* local_handle.c: the local store's handle (local_store.h): its settings,
 * read by the guards without a lock (local_guard.c), its file
 * (local_file.c), and what `luaretry fleet --fleet local` shows and
 * resets. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local_store.h"

#define MILLI 1000

void lr_local_configure(lr_local *l, const lr_fleet_settings *s) {
  if (!l || !s) return;
  atomic_store(&l->max_milli, llround(s->max_tokens * MILLI));
  atomic_store(&l->ratio_milli, llround(s->token_ratio * MILLI));
  atomic_store(&l->reserve_milli, llround(s->reserve * MILLI));
  atomic_store(&l->cost_milli, llround(s->throttle_cost * MILLI));
  atomic_store(&l->failures, s->failures);
  atomic_store(&l->open_cs, llround(lr_fleet_open_seconds(s->open_seconds) * 100));
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
  lr_local_settings_text(l);
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
  lr_local_settings_refusal(l, st->detail, sizeof st->detail);
}

/* The refused entry at l->path removed, never followed (unlink and rmdir
 * take a link itself): 0 and what it was in *what, or -1. */
static int remove_refused(lr_local *l, const char **what) {
  struct stat st;
  if (lstat(l->path, &st) != 0) return -1;
  *what = S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISDIR(st.st_mode) ? "a folder" : "a file";
  return S_ISDIR(st.st_mode) ? rmdir(l->path) : unlink(l->path);
}

lr_fleet_code lr_local_reset(lr_local *l, char *err, size_t errlen) {
  if (!l) return LR_FLEET_E_ARG;
  const char *what = NULL;
  if (!l->map && l->file_refused && remove_refused(l, &what) == 0) {
    lr_fmt(err, errlen, "%s: %s, refused: removed; the next process makes the store anew", l->path,
           what);
    if (l->log) { /* what was there is said: it is gone */
      char line[4400];
      lr_fmt(line, sizeof line, "fleet guards (local): %s", err);
      l->log(l->log_ud, line);
    }
    return LR_FLEET_OK;
  }
  if (!l->map && what) {
    lr_fmt(err, errlen, "%s; %s, cannot be removed: %s", l->detail, what, strerror(errno));
    return LR_FLEET_E_REFUSED;
  }
  if (!l->map) {
    lr_fmt(err, errlen, "%s", l->detail);
    return LR_FLEET_E_REFUSED;
  }
  lr_local_file_clear(l->map);
  return LR_FLEET_OK;
}
