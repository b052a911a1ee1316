/* local_settings.c: the guard settings that the processes of a local
 * store share (local_store.h), as Redis's script makes a fleet's
 * (redis_script.c's cfg): their text and hash, a process with others
 * refused (said once, and once more when the store is its again), and
 * who used the store's settings last, and when. */
#include <string.h>
#include <unistd.h>

#include "local_store.h"

#define MILLI 1000

/* The guard numbers as text (what a refusal shows as ours) and its hash
 * (what the file holds): every number the shared words are read with. */
void lr_local_settings_text(lr_local *l) {
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

int lr_local_settings_refusal(lr_local *l, char *out, size_t size) {
  uint32_t by;
  int32_t ago;
  if (!held_by_others(l, atomic_load(&l->map->cfg_hash), &by, &ago)) return 0;
  refusal_text(l, by, ago, out, size);
  return 1;
}

static void say(lr_local *l, const char *what) {
  if (!l->log) return;
  char line[1200];
  lr_fmt(line, sizeof line, "fleet guards (local): %s", what);
  l->log(l->log_ud, line);
}

int lr_local_settings_claim(lr_local *l) {
  lr_local_file *m = l->map;
  unsigned long long ours = atomic_load(&l->cfg_hash), theirs = atomic_load(&m->cfg_hash);
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
      lr_local_settings_seen(l, lr_monotonic_now());
      lr_local_settings_back(l);
      return 2;
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

void lr_local_settings_seen(lr_local *l, double now_s) {
  uint32_t now = (uint32_t)now_s;
  if (atomic_load_explicit(&l->seen_s, memory_order_relaxed) == now) return;
  atomic_store_explicit(&l->seen_s, now, memory_order_relaxed);
  lr_local_file *m = l->map;
  if (atomic_load(&m->cfg_hash) != atomic_load(&l->cfg_hash)) return;
  atomic_store(&m->cfg_seen, (uint64_t)(uint32_t)getpid() << 32 | now);
  /* the store ours again after a refusal (another process's reload to
   * ours, or a reset): said here, within a second, off the hot path */
  if (atomic_load_explicit(&l->cfg_said, memory_order_relaxed)) lr_local_settings_back(l);
}
