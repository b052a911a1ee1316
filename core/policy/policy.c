/* policy.c: the policy's public side: loading and reloading a script,
 * settings (luaretry_policy_set/get), tuning, counters, callbacks.  Each
 * load or change of a setting makes a new load of the script (gen.c);
 * calls in flight finish under the one they began with.  Changes are
 * serialized by `writer`; `lock` guards what readers take (the current
 * load, the tuning). */
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fleet/fleet.h"
#include "policy.h"

static void breaker_changed(void *ud, luaretry_breaker_state state) {
  luaretry_policy *p = ud;
  if (p->breaker_fn) p->breaker_fn(p->breaker_ud, state);
  lr_gen *g = lr_policy_current(p);
  if (g && g->has_on_breaker) lr_gen_on_breaker(g, luaretry_breaker_state_name(state));
  lr_gen_unref(g);
}

/* Every policy, so that a fork's child can make its locks new: a thread of
 * the parent's may have held a policy's writer lock (a load, a set) or its
 * readers' lock at the fork, and that thread is not in the child, which
 * would wait for it for ever.  The list's own lock is held across the fork
 * (taken only to link and unlink, never around a call out), so the child's
 * copy of the list is whole. */
static struct {
  pthread_mutex_t lock;
  luaretry_policy *head;
} all = { .lock = PTHREAD_MUTEX_INITIALIZER };
static pthread_once_t all_once = PTHREAD_ONCE_INIT;

/* The policy whose writer lock this thread holds (writer_lock, below). */
static _Thread_local const luaretry_policy *writing;

static void fork_prepare(void) { pthread_mutex_lock(&all.lock); }
static void fork_parent(void) { pthread_mutex_unlock(&all.lock); }
/* Only the thread that forked is in the child: a lock it holds itself (a
 * fork from the log callback of a load) stays held, for it to release. */
static void fork_child(void) {
  for (luaretry_policy *p = all.head; p; p = p->next) {
    pthread_mutex_init(&p->lock, NULL);
    if (writing != p) pthread_mutex_init(&p->writer, NULL);
  }
  pthread_mutex_init(&all.lock, NULL);
}
static void watch_forks(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

static void link_policy(luaretry_policy *p) {
  pthread_once(&all_once, watch_forks);
  pthread_mutex_lock(&all.lock);
  p->prev = NULL;
  p->next = all.head;
  if (all.head) all.head->prev = p;
  all.head = p;
  pthread_mutex_unlock(&all.lock);
}

static void unlink_policy(luaretry_policy *p) {
  pthread_mutex_lock(&all.lock);
  if (p->prev)
    p->prev->next = p->next;
  else if (all.head == p)
    all.head = p->next;
  if (p->next) p->next->prev = p->prev;
  p->prev = p->next = NULL;
  pthread_mutex_unlock(&all.lock);
}

luaretry_code luaretry_policy_new(luaretry_policy **out) {
  if (!out) return LUARETRY_E_ARG;
  luaretry_policy *p = lr_aligned_calloc(sizeof *p); /* the counters' stripes */
  *out = p;
  if (!p) return LUARETRY_E_NOMEM;
  p->magic = LR_POLICY_MAGIC;
  p->limits.instructions = 0; /* counted only when the host asks */
  p->limits.memory = (size_t)lr_fields[F_MEMORY_LIMIT].def;
  p->limits.seconds = lr_fields[F_TIME_LIMIT].def;
  lr_policy_fleet_init(p);
  pthread_mutex_init(&p->lock, NULL);
  pthread_mutex_init(&p->writer, NULL);
  link_policy(p);
  lr_guards none;
  memset(&none, 0, sizeof none);
  lr_shared_init(&p->shared, &none);
  /* its threads count the rate's sends on lines of their own */
  if (lr_pace_spread(&p->shared.pace) != 0) {
    luaretry_policy_free(p);
    *out = NULL;
    return LUARETRY_E_NOMEM;
  }
  p->shared.on_change = breaker_changed;
  p->shared.on_change_ud = p;
  return LUARETRY_OK;
}

lr_shared *lr_policy_shared(luaretry_policy *p) { return &p->shared; }

/* Every call's begin: no lock (grace.c), so that threads calling at once
 * each write only lines of their own. */
lr_gen *lr_policy_current(luaretry_policy *p) {
  int window = lr_read_begin();
  lr_gen *g = atomic_load(&p->gen);
  if (g) lr_sref_take_in(&g->refs, window);
  lr_read_end(window);
  return g;
}

void luaretry_policy_on_breaker(luaretry_policy *p, luaretry_breaker_fn fn, void *ud) {
  if (!lr_policy_ok(p)) return;
  p->breaker_fn = fn;
  p->breaker_ud = ud;
}

luaretry_code luaretry_policy_metrics(const luaretry_policy *p, luaretry_metrics *m) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  if (!m) return lr_policy_refuse_null(p, "luaretry_policy_metrics", "m");
  lr_shared *s = (lr_shared *)&p->shared;
  long long c[LR_METRIC_COUNT];
  for (int i = 0; i < LR_METRIC_COUNT; i++) c[i] = lr_counted(s, i);
  memset(m, 0, sizeof *m);
  m->calls = (uint64_t)c[LR_M_CALLS];
  long long stops = 0;
  for (int i = LR_M_SUCCESSES; i <= LR_M_RATE_STOPS; i++) /* the stops */
    if (i != LR_M_BREAKER_OPENINGS) stops += c[i];
  /* a hedge is an attempt that began without a retry */
  m->attempts = (uint64_t)(c[LR_M_RETRIES] + stops - c[LR_M_UNATTEMPTED] + c[LR_M_HEDGES]);
  m->hedges = (uint64_t)c[LR_M_HEDGES];
  m->hedges_won = (uint64_t)c[LR_M_HEDGES_WON];
  m->hedges_cancelled = (uint64_t)c[LR_M_HEDGES_CANCELLED];
  m->retries = (uint64_t)c[LR_M_RETRIES];
  m->successes = (uint64_t)c[LR_M_SUCCESSES];
  m->finals = (uint64_t)c[LR_M_FINALS];
  m->exhausted = (uint64_t)c[LR_M_EXHAUSTED];
  m->deadline_stops = (uint64_t)c[LR_M_DEADLINE];
  m->policy_errors = (uint64_t)c[LR_M_POLICY_ERRORS];
  m->cancelled = (uint64_t)c[LR_M_CANCELLED];
  m->budget_refusals = (uint64_t)c[LR_M_BUDGET];
  m->throttled = (uint64_t)c[LR_M_THROTTLED];
  m->admission_refusals = (uint64_t)c[LR_M_THROTTLE_STOPS];
  m->rate_limited = (uint64_t)c[LR_M_RATE_STOPS];
  m->circuit_refusals = (uint64_t)c[LR_M_CIRCUIT];
  m->breaker_openings = (uint64_t)c[LR_M_BREAKER_OPENINGS];
  m->gave_up = (uint64_t)c[LR_M_GAVE_UP];
  m->server_waits_too_long = (uint64_t)c[LR_M_SERVER_WAIT];
  m->time_waited = (double)lr_counted(s, LR_METRIC_COUNT) * 1e-9;
  pthread_mutex_lock((pthread_mutex_t *)&p->lock);
  int budget = p->gen && p->gen->rules.guards.budget;
  pthread_mutex_unlock((pthread_mutex_t *)&p->lock);
  m->budget_tokens = budget ? lr_budget_tokens(s) : 0;
  m->breaker = (luaretry_breaker_state)atomic_load(&s->breaker_state);
  double tokens = m->budget_tokens;
  lr_gen *g = lr_policy_current((luaretry_policy *)p);
  m->guards = lr_fleet_link_scope(g ? g->fleet : NULL, &tokens, &m->breaker);
  m->fleet_round_trips = g && g->fleet ? lr_fleet_round_trips(lr_fleet_link_fleet(g->fleet)) : 0;
  lr_gen_unref(g);
  if (budget) m->budget_tokens = tokens;
  return LUARETRY_OK;
}

double luaretry_policy_rate(const luaretry_policy *p) {
  if (!lr_policy_ok(p)) return 0;
  lr_shared *s = (lr_shared *)&p->shared;
  pthread_mutex_lock((pthread_mutex_t *)&p->lock);
  double rate = p->gen ? lr_rate_now(s, &p->gen->rules.guards) : 0;
  pthread_mutex_unlock((pthread_mutex_t *)&p->lock);
  return rate;
}

void luaretry_policy_free(luaretry_policy *p) {
  if (!lr_policy_ok(p)) return;
  p->magic = 0;
  /* every call is over (a policy outlives its calls) */
  lr_gen_retire(p->gen); /* and with the last load, its fleet */
  lr_policy_fleet_free(p);
  lr_free_warnings(p->warnings, &p->warning_count);
  lr_free_warnings(p->load_warnings, &p->load_warning_count);
  for (size_t k = 0; k < p->override_count; k++) free(p->overrides[k].value);
  free(p->prepared);
  free(p->workflow_body);
  lr_pace_unspread(&p->shared.pace);
  unlink_policy(p);
  pthread_mutex_destroy(&p->lock);
  pthread_mutex_destroy(&p->writer);
  lr_policy_errbuf_forget(p); /* a new policy may get its address */
  free(p);
}

size_t luaretry_policy_warning_count(const luaretry_policy *p) {
  return lr_policy_ok(p) ? p->warning_count : 0;
}

const char *luaretry_policy_warning(const luaretry_policy *p, size_t i) {
  return lr_policy_ok(p) && i < p->warning_count ? p->warnings[i] : NULL;
}

size_t luaretry_policy_memory(const luaretry_policy *p) { return lr_policy_ok(p) ? p->memory : 0; }

void luaretry_policy_on_log(luaretry_policy *p, luaretry_log_fn fn, void *ud) {
  if (!lr_policy_ok(p)) return;
  p->log.fn = fn;
  p->log.ud = ud;
}

luaretry_code luaretry_policy_set_classifier(luaretry_policy *p, luaretry_classify_fn fn,
                                             void *ud) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  p->host_classify = fn;
  p->host_ud = ud;
  return LUARETRY_OK;
}

luaretry_code luaretry_policy_tuning(const luaretry_policy *p, luaretry_tuning *t) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  if (!t) return lr_policy_refuse_null(p, "luaretry_policy_tuning", "t");
  pthread_mutex_t *lock = (pthread_mutex_t *)&p->lock;
  pthread_mutex_lock(lock);
  luaretry_code rc = p->gen ? LUARETRY_OK : LUARETRY_E_STATE;
  if (p->gen) {
    *t = p->tuning.pub;
    t->name = p->name;
    t->source = p->source;
    t->instruction_limit = p->gen->limits.instructions;
    t->memory_limit = p->gen->limits.memory;
    t->time_limit = p->gen->limits.seconds;
  }
  pthread_mutex_unlock(lock);
  return rc;
}

static void default_name(char *dst, size_t size, const char *chunk) {
  const char *base = strrchr(chunk, '/');
  base = base ? base + 1 : chunk;
  lr_strlcpy(dst, base, size);
  char *dot = strrchr(dst, '.');
  if (dot && strcmp(dot, ".lua") == 0) *dot = '\0';
}

/* A new load of `text` (taken over) for p, with p's settings of now. */
static lr_gen *new_gen(luaretry_policy *p, char *text, size_t len, const char *chunkname,
                       const char *script_path) {
  lr_gen *g = lr_gen_new(p, text, len, chunkname, script_path);
  if (!g) return NULL;
  g->judge = lr_gen_judge(g);
  g->limits = p->limits;
  for (size_t k = 0; k < p->override_count && g->option_count < MAX_OVERRIDES; k++) {
    if (strncmp(p->overrides[k].name, "options.", 8) != 0 ||
        lr_field_renamed(p->overrides[k].name) >= 0) /* options.retry_all_errors */
      continue;
    lr_override *o = &g->options[g->option_count];
    *o = p->overrides[k];
    /* the load's own copy: a later set replaces the policy's */
    if (!(o->value = strdup(p->overrides[k].value))) {
      lr_gen_unref(g);
      return NULL;
    }
    g->option_count++;
  }
  return g;
}

/* What the load's first state found defined. */
static void note_hooks(lr_gen *g, const lr_script *s) {
  g->has_decision_hooks = s->ref_is_success || s->ref_is_transient || s->ref_is_throttling;
  g->has_run = s->ref_run != 0;
  g->has_on_breaker = s->ref_on_breaker != 0;
  g->has_on_retry = s->ref_on_retry != 0;
  g->has_prepare = s->ref_prepare != 0;
  /* the engine calls only what is there */
  if (!g->has_on_retry) g->judge.on_retry = NULL;
  if (!s->ref_backoff) g->judge.backoff = NULL;
}

/* A fleet keeps a breaker's open period within LR_FLEET_OPEN_MAX_S (a
 * longer one overflowed its stores' clocks): a longer one is clamped, and
 * said so here, where every host (check, run,
 * the module, an embedder) reads its warnings.  Named as the field alone
 * when a --set gave it, as the library's other warnings of overrides. */
static void fleet_open_clamped(const luaretry_policy *p, const lr_tuning *t, const char *chunk,
                               char **warnings, size_t *count) {
  if (!(p->fleet_url || p->fleet_local) || !t->pub.breaker ||
      !(t->pub.open_seconds > LR_FLEET_OPEN_MAX_S))
    return;
  int from_set = 0;
  for (size_t k = 0; k < p->override_count; k++)
    from_set |= strcmp(p->overrides[k].name, "breaker.open_seconds") == 0;
  lr_add_warning(warnings, count,
                 "%s%sbreaker.open_seconds: %g s is above what the fleet keeps (fleet.%s); "
                 "clamped to 9e9 s (about 285 years: for ever in effect)",
                 from_set ? "" : chunk, from_set ? "" : ": ", t->pub.open_seconds,
                 p->fleet_url ? "redis" : "local");
}

/* The load g, its first state s read into ld, validated: it becomes the
 * policy's (under the lock), or the thread's error says why not.  Kept whole: every
 * step can fail and each undoes what came before, in one place. */
static luaretry_code adopt(luaretry_policy *p, lr_gen *g, lr_script *s, lr_load *ld) {
  char errors[LR_ERRMSG_SIZE];
  lr_tuning tuning;
  char *warnings[MAX_WARNINGS];
  size_t count = 0;
  for (size_t i = 0; i < ld->warning_count; i++) {
    char *copy = strdup(ld->warnings[i]);
    if (copy) warnings[count++] = copy;
  }
  if (lr_schema_apply(ld->fields, p->overrides, p->override_count, ld->chunk_src, &tuning,
                      &g->rules, warnings, &count, errors, sizeof errors) != 0) {
    /* A failed load reports everything at once: the errors, then what
     * would have been warnings (a typo'd name is often the cause). */
    lr_sort_warnings(warnings, count, ld->chunk_src);
    size_t len = strlen(errors);
    for (size_t i = 0; i < count; i++) {
      lr_fmt(errors + len, sizeof errors - len, "\n%s", warnings[i]);
      len += strlen(errors + len);
    }
    lr_free_warnings(warnings, &count);
    lr_strlcpy(lr_policy_errbuf(p), errors, LR_ERRMSG_SIZE);
    return LUARETRY_E_POLICY;
  }
  g->rules.hedge.latency = &p->latency; /* learned across reloads */
  /* the tuning's name, --set's over the script's: two tunings of one
   * script apart in logs, metrics and the fleet */
  char name[sizeof p->name];
  if (tuning.name[0])
    lr_strlcpy(name, tuning.name, sizeof name);
  else
    default_name(name, sizeof name, ld->chunk_src);
  if ((p->fleet_url || p->fleet_local) && !tuning.pub.budget && !tuning.pub.breaker &&
      !tuning.admission && !(tuning.rate && !tuning.rate_adaptive))
    lr_add_warning(warnings, &count,
                   "%s: fleet.%s is set, but the policy has neither "
                   "budget nor breaker, admission or fixed rate: there is nothing to share",
                   ld->chunk_src, p->fleet_url ? "redis" : "local");
  fleet_open_clamped(p, &tuning, ld->chunk_src, warnings, &count);
  if (lr_policy_fleet_attach(p, g, &tuning, name, errors, sizeof errors) != 0) {
    lr_free_warnings(warnings, &count);
    lr_strlcpy(lr_policy_errbuf(p), errors, LR_ERRMSG_SIZE);
    return LUARETRY_E_NOMEM;
  }
  g->body_limit = tuning.pub.body_limit;
  g->retry_all_errors = tuning.retry_all_errors;
  lr_sort_warnings(warnings, count, ld->chunk_src);
  lr_sort_warnings(ld->warnings, ld->warning_count, ld->chunk_src);
  note_hooks(g, s);
  lr_gen_adopt(g, s);
  pthread_mutex_lock(&p->lock);
  lr_gen *old = p->gen;
  p->tuning = tuning;
  p->memory = s->sb->used;
  memcpy(p->fields, ld->fields, sizeof p->fields);
  memcpy(p->origin, ld->origin, sizeof p->origin);
  lr_free_warnings(p->warnings, &p->warning_count);
  memcpy(p->warnings, warnings, count * sizeof *warnings);
  p->warning_count = count;
  lr_free_warnings(p->load_warnings, &p->load_warning_count);
  memcpy(p->load_warnings, ld->warnings, ld->warning_count * sizeof *ld->warnings);
  p->load_warning_count = ld->warning_count;
  ld->warning_count = 0;
  lr_strlcpy(p->source, ld->chunk_src, sizeof p->source);
  lr_strlcpy(p->name, name, sizeof p->name);
  lr_shared_configure(&p->shared, &g->rules.guards);
  /* last: a call that begins on it (lr_policy_current takes no lock) finds
   * the policy set up for it, and its state no longer read here */
  lr_gen_publish(g);
  p->gen = g;
  pthread_mutex_unlock(&p->lock);
  lr_gen_retire(old);
  return LUARETRY_OK;
}

/* Loads `text` (taken over) as the policy's script: validated, it becomes
 * the policy; calls in flight keep the load they began with.  Under the
 * writer lock. */
static luaretry_code install(luaretry_policy *p, char *text, size_t len, const char *chunkname,
                             const char *script_path) {
  lr_gen *g = new_gen(p, text, len, chunkname, script_path);
  if (!g) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "out of memory");
    return LUARETRY_E_NOMEM;
  }
  lr_load *ld = calloc(1, sizeof *ld);
  luaretry_code rc = LUARETRY_E_NOMEM;
  lr_script *s = NULL;
  if (ld)
    s = lr_script_new(g, ld, &rc, lr_policy_errbuf(p), LR_ERRMSG_SIZE);
  else
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "out of memory");
  if (s) {
    rc = adopt(p, g, s, ld);
    if (rc != LUARETRY_OK) lr_script_free(s);
  }
  if (rc != LUARETRY_OK) lr_gen_unref(g);
  if (ld) lr_free_warnings(ld->warnings, &ld->warning_count);
  free(ld);
  return rc;
}

/* An open descriptor on path when it is a regular file of at most `limit`
 * bytes; -1 with the thread's error.  O_NONBLOCK: a FIFO or a device is refused,
 * never waited on; the size is refused before a byte is read. */
static int open_script(luaretry_policy *p, const char *path, const char *shown, size_t limit) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "%s: cannot open: %s", shown, strerror(errno));
    return -1;
  }
  struct stat st;
  const char *why = NULL;
  if (fstat(fd, &st) != 0)
    why = strerror(errno);
  else if (!S_ISREG(st.st_mode))
    why = "not a regular file";
  if (why) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "%s: cannot read: %s", shown, why);
  } else if ((unsigned long long)st.st_size > limit) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE,
           "%s: %lld bytes, above the memory limit (%zu bytes): "
           "not read",
           shown, (long long)st.st_size, limit);
  } else {
    return fd;
  }
  close(fd);
  return -1;
}

/* The whole file, at most the memory limit (the script could never fit in
 * less), and a byte offset past a "#!" line or a UTF-8 BOM (as
 * luaL_loadfile skips them); NULL with the thread's error and *rc (LUARETRY_E_IO,
 * or LUARETRY_E_NOMEM when the host's memory ran out). */
static char *read_script(luaretry_policy *p, const char *path, const char *shown, size_t *len,
                         luaretry_code *rc) {
  size_t limit = p->limits.memory;
  *rc = LUARETRY_E_IO;
  int fd = open_script(p, path, shown, limit);
  if (fd < 0) return NULL;
  size_t cap = 8192, n = 0;
  char *text = malloc(cap);
  int err = 0;
  /* a file that grows while read stops at limit + 1 bytes: refused */
  while (text && n <= limit) {
    if (n == cap) {
      char *grown = realloc(text, cap *= 2);
      if (!grown) {
        free(text);
        text = NULL;
        break;
      }
      text = grown;
    }
    size_t want = cap - n < limit + 1 - n ? cap - n : limit + 1 - n;
    ssize_t got = read(fd, text + n, want);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) err = errno;
    if (got <= 0) break;
    n += (size_t)got;
  }
  close(fd);
  if (!text || err || n > limit) {
    if (!text) *rc = LUARETRY_E_NOMEM;
    if (text && !err)
      lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE,
             "%s: above the memory limit (%zu "
             "bytes): not read",
             shown, limit);
    else
      lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "%s: cannot read: %s", shown,
             text ? strerror(err) : "out of memory");
    free(text);
    return NULL;
  }
  if (n >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) memset(text, ' ', 3);
  if (n && text[0] == '#') /* blank the first line, keep the numbering */
    for (size_t i = 0; i < n && text[i] != '\n'; i++) text[i] = ' ';
  *len = n;
  *rc = LUARETRY_OK;
  return text;
}

/* `writing`, the policy whose writer lock this thread holds: a load runs
 * the script's top level, whose print() reaches the host's log callback; a
 * set or load of the same policy from there would wait for itself for
 * ever, so it is refused instead. */

static int writer_lock(luaretry_policy *p, const char *what, const luaretry_policy **outer) {
  if (writing == p) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE,
           "%s: called while the same policy loads (from its log callback?); "
           "set or load it after that returns",
           what);
    return -1;
  }
  pthread_mutex_lock(&p->writer);
  *outer = writing;
  writing = p;
  return 0;
}

static void writer_unlock(luaretry_policy *p, const luaretry_policy *outer) {
  writing = outer;
  pthread_mutex_unlock(&p->writer);
}

static luaretry_code load(luaretry_policy *p, const char *path, const char *chunkname,
                          const char *source) {
  if (!p || (!path && !source)) return LUARETRY_E_ARG;
  const luaretry_policy *outer;
  if (writer_lock(p, path ? "luaretry_policy_load_file" : "luaretry_policy_load_string", &outer))
    return LUARETRY_E_STATE;
  lr_policy_errbuf(p)[0] = '\0';
  size_t len;
  char *text = NULL;
  char name[RULE_SIZE], shown[RULE_SIZE - 1];
  struct stat st;
  memset(&st, 0, sizeof st);
  luaretry_code rc = LUARETRY_OK;
  if (path) {
    if (stat(path, &st) != 0) memset(&st, 0, sizeof st);
    /* every message names the file as shown: a newline in its name
     * would split a message in two */
    lr_escape_controls(shown, sizeof shown, path);
    text = read_script(p, path, shown, &len, &rc);
    lr_fmt(name, sizeof name, "@%s", shown);
  } else {
    len = strlen(source);
    text = malloc(len + 1);
    if (!text)
      rc = LUARETRY_E_NOMEM;
    else
      memcpy(text, source, len + 1);
    lr_strlcpy(name, chunkname ? chunkname : "=policy", sizeof name);
  }
  if (rc == LUARETRY_OK) rc = install(p, text, len, name, path ? path : "");
  if (rc == LUARETRY_OK) {
    p->mtime = st.st_mtim;
    p->size = (long long)st.st_size;
  }
  writer_unlock(p, outer);
  return rc;
}

luaretry_code luaretry_policy_load_file(luaretry_policy *p, const char *path) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  if (!path) {
    lr_policy_error(p, "luaretry_policy_load_file: the path is NULL");
    return LUARETRY_E_ARG;
  }
  return load(p, path, NULL, NULL);
}

luaretry_code luaretry_policy_load_string(luaretry_policy *p, const char *chunkname,
                                          const char *source) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  if (!source) {
    lr_policy_error(p, "luaretry_policy_load_string: the source is NULL");
    return LUARETRY_E_ARG;
  }
  return load(p, NULL, chunkname, source);
}

luaretry_code luaretry_policy_reload_if_changed(luaretry_policy *p, int *reloaded) {
  if (reloaded) *reloaded = 0;
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  lr_gen *g = lr_policy_current(p);
  if (!g || !g->script_path[0]) {
    lr_policy_error(p,
                    g ? "luaretry_policy_reload_if_changed: the policy was not loaded from a file"
                      : "luaretry_policy_reload_if_changed: no policy loaded");
    lr_gen_unref(g);
    return LUARETRY_E_STATE;
  }
  char path[sizeof g->script_path];
  lr_strlcpy(path, g->script_path, sizeof path);
  lr_gen_unref(g);
  /* a stat at most once a second, whatever the host's call rate */
  double now = lr_monotonic_now();
  const luaretry_policy *outer;
  if (writer_lock(p, "luaretry_policy_reload_if_changed", &outer)) return LUARETRY_E_STATE;
  int due = p->last_check == 0 || now - p->last_check >= 1.0;
  if (due) p->last_check = now;
  struct stat st;
  luaretry_code rc = LUARETRY_OK;
  if (due && stat(path, &st) != 0) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "%s: %s (the loaded policy stays)", path,
           strerror(errno));
    rc = LUARETRY_E_IO;
    due = 0;
  }
  int changed = due && (st.st_mtim.tv_sec != p->mtime.tv_sec ||
                        st.st_mtim.tv_nsec != p->mtime.tv_nsec || (long long)st.st_size != p->size);
  writer_unlock(p, outer);
  if (!changed) return rc;
  rc = load(p, path, NULL, NULL);
  if (rc == LUARETRY_OK && reloaded) *reloaded = 1;
  if (rc != LUARETRY_OK) {
    /* not again until the file changes once more */
    pthread_mutex_lock(&p->writer);
    p->mtime = st.st_mtim;
    p->size = (long long)st.st_size;
    pthread_mutex_unlock(&p->writer);
  }
  return rc;
}

/* A new load of the same text, with the settings of now (under the writer
 * lock): every state agrees on options and limits. */
static luaretry_code reload_text(luaretry_policy *p) {
  lr_gen *g = p->gen;
  char *copy = malloc(g->text_len + 1);
  if (!copy) return LUARETRY_E_NOMEM;
  memcpy(copy, g->text, g->text_len);
  copy[g->text_len] = '\0';
  char name[RULE_SIZE], path[sizeof g->script_path];
  lr_strlcpy(name, g->chunkname, sizeof name);
  lr_strlcpy(path, g->script_path, sizeof path);
  return install(p, copy, g->text_len, name, path);
}

/* A sandbox limit: every Lua state is made anew with it. */
static luaretry_code set_limit(luaretry_policy *p, int i, const char *value) {
  double d;
  if (lr_schema_limit(i, value, &d, lr_policy_errbuf(p), LR_ERRMSG_SIZE) != 0)
    return LUARETRY_E_ARG;
  lr_limits old = p->limits;
  if (i == F_MEMORY_LIMIT)
    p->limits.memory = (size_t)d;
  else if (i == F_TIME_LIMIT)
    p->limits.seconds = d;
  else
    p->limits.instructions = (long)d;
  luaretry_code rc = p->gen ? reload_text(p) : LUARETRY_OK;
  if (rc != LUARETRY_OK) p->limits = old;
  return rc;
}

/* fleet.redis and the Redis timeouts: a new load takes them, and with
 * them a new fleet handle. */
/* fleet.local = "on", "none" or an absolute folder: the new value in
 * *out (NULL: none), or -1 (errmsg).  One store at a time: with
 * fleet.redis set, refused, as fleet.redis is with fleet.local. */
static int local_value(luaretry_policy *p, const char *value, char **out) {
  *out = NULL;
  if (strcmp(value, "none") == 0) return 0;
  if (p->fleet_url) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE,
           "fleet.local: fleet.redis is set: one store at a time (fleet.redis = none first)");
    return -1;
  }
  if (strcmp(value, "on") != 0 && value[0] != '/') {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE,
           "fleet.local: expected on, none or an absolute folder, got \"%.100s\"", value);
    return -1;
  }
  *out = strdup(strcmp(value, "on") == 0 ? "" : value);
  if (*out) return 0;
  lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "out of memory");
  return -1;
}

static luaretry_code set_fleet(luaretry_policy *p, int i, const char *value) {
  if (i == F_FL_LOCAL) {
    char *old = p->fleet_local, *now;
    if (local_value(p, value, &now) != 0) return LUARETRY_E_ARG;
    p->fleet_local = now;
    luaretry_code rc = p->gen ? reload_text(p) : LUARETRY_OK;
    if (rc != LUARETRY_OK) p->fleet_local = old;
    free(rc == LUARETRY_OK ? old : now);
    return rc;
  }
  if (i == F_FL_REDIS && p->fleet_local && strcmp(value, "none") != 0) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE,
           "fleet.redis: fleet.local is set: one store at a time (fleet.local = none first)");
    return LUARETRY_E_ARG;
  }
  char *old_url = p->fleet_url;
  long old[3] = { p->fleet_connect_ms, p->fleet_command_ms, p->fleet_reconnect_ms };
  double d;
  if (i == F_FL_REDIS && strcmp(value, "none") == 0) {
    p->fleet_url = NULL;
  } else if (i == F_FL_REDIS) {
    if (!lr_fleet_url_ok(value, lr_policy_errbuf(p), LR_ERRMSG_SIZE)) return LUARETRY_E_ARG;
    if (!(p->fleet_url = strdup(value))) {
      p->fleet_url = old_url;
      lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "out of memory");
      return LUARETRY_E_NOMEM;
    }
  } else if (lr_schema_limit(i, value, &d, lr_policy_errbuf(p), LR_ERRMSG_SIZE) != 0) {
    return LUARETRY_E_ARG;
  } else {
    *(i == F_FL_CONNECT   ? &p->fleet_connect_ms
      : i == F_FL_COMMAND ? &p->fleet_command_ms
                          : &p->fleet_reconnect_ms) = (long)d;
  }
  luaretry_code rc = p->gen ? reload_text(p) : LUARETRY_OK;
  char *gone = rc == LUARETRY_OK ? old_url : p->fleet_url;
  if (rc != LUARETRY_OK) {
    p->fleet_url = old_url;
    p->fleet_connect_ms = old[0], p->fleet_command_ms = old[1], p->fleet_reconnect_ms = old[2];
  }
  if (gone != p->fleet_url) free(gone);
  return rc;
}

/* Records NAME=VALUE among the overrides (a copy of the value; the one
 * it replaces is left in *saved, for forget to free or put back); its
 * slot, or -1 (errmsg), or -2 when memory ran out. */
static int remember(luaretry_policy *p, const char *name, const char *value, lr_override *saved,
                    size_t *saved_count) {
  if (strlen(name) >= sizeof p->overrides[0].name) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "%s: name too long", name);
    return -1;
  }
  if (strlen(value) > LR_OVERRIDE_VALUE_MAX) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "%s: value too long (%zu bytes; %d at most)", name,
           strlen(value), LR_OVERRIDE_VALUE_MAX);
    return -1;
  }
  size_t k = 0;
  while (k < p->override_count && strcmp(p->overrides[k].name, name) != 0) k++;
  if (k == MAX_OVERRIDES) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "%s: too many overrides", name);
    return -1;
  }
  char *copy = strdup(value);
  if (!copy) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "%s: out of memory", name);
    return -2;
  }
  *saved = p->overrides[k];
  *saved_count = p->override_count;
  if (k == p->override_count) saved->value = NULL; /* a new slot replaces nothing */
  lr_strlcpy(p->overrides[k].name, name, sizeof p->overrides[k].name);
  p->overrides[k].value = copy;
  if (k == p->override_count) p->override_count++;
  return (int)k;
}

/* After remember: the setting kept (the value it replaced freed), or
 * undone (the new one freed, the slot as it was). */
static void settle(luaretry_policy *p, int k, lr_override *saved, size_t saved_count, int keep) {
  if (keep) {
    free(saved->value);
    return;
  }
  free(p->overrides[k].value);
  p->overrides[k] = *saved;
  p->override_count = saved_count;
}

static luaretry_code set(luaretry_policy *p, const char *name, const char *value) {
  int i = lr_field_index(name);
  if (i < 0) i = lr_field_renamed(name); /* read as the new name, with a warning */
  int option = strncmp(name, "options.", 8) == 0 && name[8];
  if (i >= 0 && (lr_fields[i].flags & HOST) && lr_field_in(i, F_FLEET))
    return set_fleet(p, i, value);
  if (i >= 0 && (lr_fields[i].flags & HOST)) return set_limit(p, i, value);
  if (!option && i < 0) {
    lr_unknown_field(lr_policy_errbuf(p), LR_ERRMSG_SIZE, name);
    return LUARETRY_E_ARG;
  }
  if (!option && !luaretry_field_at((size_t)i)->settable && !lr_field_guard(i)) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "%s: can only be set in the script", name);
    return LUARETRY_E_ARG;
  }
  lr_override saved;
  size_t saved_count;
  int k = remember(p, name, value, &saved, &saved_count);
  if (k < 0) return k == -2 ? LUARETRY_E_NOMEM : LUARETRY_E_ARG;
  /* Loaded: a new load under the new settings, refused (policy unchanged)
   * when invalid; otherwise checked at the load to come. */
  luaretry_code rc = p->gen ? reload_text(p) : LUARETRY_OK;
  settle(p, k, &saved, saved_count, rc == LUARETRY_OK);
  /* the host's memory ran out: the value may well be valid */
  if (rc != LUARETRY_OK) return rc == LUARETRY_E_NOMEM ? rc : LUARETRY_E_ARG;
  return LUARETRY_OK;
}

luaretry_code luaretry_policy_set(luaretry_policy *p, const char *name, const char *value) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  if (!name || !value) { /* the message names it, not the failure before */
    if (!name)
      lr_policy_error(p, "luaretry_policy_set: the name is NULL");
    else
      lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "%.200s: the value is NULL (\"none\" unsets it)",
             name);
    return LUARETRY_E_ARG;
  }
  const luaretry_policy *outer;
  if (writer_lock(p, "luaretry_policy_set", &outer)) return LUARETRY_E_STATE;
  lr_policy_errbuf(p)[0] = '\0';
  luaretry_code rc = set(p, name, value);
  writer_unlock(p, outer);
  return rc;
}

luaretry_code luaretry_policy_get(const luaretry_policy *p, const char *name, char *buf,
                                  size_t size) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  /* each refusal named: errmsg is the thread's last failure on p */
  char *err = lr_policy_errbuf(p);
  if (!name) {
    lr_fmt(err, LR_ERRMSG_SIZE, "luaretry_policy_get: the name is NULL");
    return LUARETRY_E_ARG;
  }
  if (!buf || size == 0) {
    lr_fmt(err, LR_ERRMSG_SIZE, "%.200s: no room for the value (buf NULL or size 0)", name);
    return LUARETRY_E_ARG;
  }
  int i = lr_field_index(name);
  if (i < 0) i = lr_field_renamed(name); /* throttle.k: admission.k's old name */
  if (i < 0 || !luaretry_field_at((size_t)i)->settable) {
    if (i < 0)
      lr_unknown_field(err, LR_ERRMSG_SIZE, name);
    else
      lr_fmt(err, LR_ERRMSG_SIZE, "%.200s: not a setting (only the script sets it)", name);
    return LUARETRY_E_ARG;
  }
  lr_tuning t;
  luaretry_code rc = luaretry_policy_tuning(p, &t.pub);
  if (rc != LUARETRY_OK) {
    lr_fmt(err, LR_ERRMSG_SIZE, "%.200s: no policy loaded", name);
    return rc;
  }
  pthread_mutex_lock((pthread_mutex_t *)&p->lock);
  luaretry_tuning pub = t.pub;
  t = p->tuning; /* the fields the public struct has no room for */
  t.pub = pub;
  pthread_mutex_unlock((pthread_mutex_t *)&p->lock);
  lr_schema_format(&t, i, buf, size);
  return LUARETRY_OK;
}

/* For checks (lint.c traps globals): on_breaker, which no probe reaches. */
luaretry_code luaretry_policy_probe_on_breaker(luaretry_policy *p, const char *state, char *err,
                                               size_t errlen) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  const char *fn = "luaretry_policy_probe_on_breaker";
  if (!state || !err) return lr_policy_refuse_null(p, fn, !state ? "state" : "err");
  if (!errlen) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "%s: errlen is 0", fn);
    return LUARETRY_E_ARG;
  }
  err[0] = '\0';
  lr_gen *g = lr_policy_current(p);
  if (!g) {
    lr_fmt(err, errlen, "no policy loaded");
    return LUARETRY_E_STATE;
  }
  luaretry_code rc =
    g->has_on_breaker ? lr_gen_call_on_breaker(g, state, err, errlen) : LUARETRY_OK;
  lr_gen_unref(g);
  return rc;
}

const char *luaretry_policy_origin(const luaretry_policy *p, const char *field) {
  if (!lr_policy_ok(p) || !field) return NULL;
  char top[64];
  lr_strlcpy(top, field, sizeof top);
  char *dot = strchr(top, '.');
  if (dot) *dot = '\0'; /* backoff.initial: where backoff came from */
  int i = lr_field_index(top);
  return i >= 0 && p->origin[i][0] ? p->origin[i] : NULL;
}
