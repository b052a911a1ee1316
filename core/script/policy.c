/* policy.c: loading a policy script into its sandbox, and the policy's
 * public side (overrides, reload, tuning).  Everything that touches Lua
 * runs under protection (lr_sandbox_call). */
#include <errno.h>
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "policy.h"

static luaretry_code reload_text(luaretry_policy *p);

/* ---- the public side */

static void breaker_changed(void *ud, luaretry_breaker_state state) {
  luaretry_policy *p = ud;
  if (p->breaker_fn) p->breaker_fn(p->breaker_ud, state);
  if (p->main && p->main->ref_on_breaker) {
    /* a state of its own: the thread that got here may hold another */
    lr_script *s = lr_script_acquire(p);
    if (s) lr_script_on_breaker(s, luaretry_breaker_state_name(state));
    lr_script_release(p, s);
  }
}

luaretry_code luaretry_policy_new(luaretry_policy **out) {
  if (!out) return LUARETRY_E_ARG;
  luaretry_policy *p = calloc(1, sizeof *p);
  *out = p;
  if (!p) return LUARETRY_E_NOMEM;
  p->instruction_limit = (long)lr_fields[F_INSTRUCTION_LIMIT].def;
  p->memory_limit = (size_t)lr_fields[F_MEMORY_LIMIT].def;
  pthread_mutex_init(&p->pool_lock, NULL);
  lr_guards none;
  memset(&none, 0, sizeof none);
  lr_shared_init(&p->shared, &none);
  p->shared.on_change = breaker_changed;
  p->shared.on_change_ud = p;
  return LUARETRY_OK;
}

lr_shared *lr_policy_shared(luaretry_policy *p) { return &p->shared; }

void luaretry_policy_on_breaker(luaretry_policy *p, luaretry_breaker_fn fn, void *ud) {
  if (!p) return;
  p->breaker_fn = fn;
  p->breaker_ud = ud;
}

luaretry_code luaretry_policy_metrics(const luaretry_policy *p, luaretry_metrics *m) {
  if (!p || !m) return LUARETRY_E_ARG;
  lr_shared *s = (lr_shared *)&p->shared;
  long long c[LR_METRIC_COUNT];
  for (int i = 0; i < LR_METRIC_COUNT; i++) c[i] = atomic_load(&s->counters[i]);
  memset(m, 0, sizeof *m);
  m->calls = (uint64_t)c[LR_M_CALLS];
  m->attempts = (uint64_t)c[LR_M_ATTEMPTS];
  m->retries = (uint64_t)c[LR_M_RETRIES];
  m->successes = (uint64_t)c[LR_M_SUCCESSES];
  m->finals = (uint64_t)c[LR_M_FINALS];
  m->exhausted = (uint64_t)c[LR_M_EXHAUSTED];
  m->deadline_stops = (uint64_t)c[LR_M_DEADLINE];
  m->policy_errors = (uint64_t)c[LR_M_POLICY_ERRORS];
  m->cancelled = (uint64_t)c[LR_M_CANCELLED];
  m->budget_refusals = (uint64_t)c[LR_M_BUDGET];
  m->circuit_refusals = (uint64_t)c[LR_M_CIRCUIT];
  m->breaker_openings = (uint64_t)c[LR_M_BREAKER_OPENINGS];
  m->time_waited = (double)atomic_load(&s->waited_ns) * 1e-9;
  m->budget_tokens = s->guards.budget ? lr_budget_tokens(s) : 0;
  m->breaker = (luaretry_breaker_state)atomic_load(&s->breaker_state);
  return LUARETRY_OK;
}

void luaretry_policy_free(luaretry_policy *p) {
  if (!p) return;
  /* every call is over (a policy outlives its calls): all states are free */
  while (p->free_scripts) {
    lr_script *next = p->free_scripts->next_free;
    lr_script_free(p->free_scripts);
    p->free_scripts = next;
  }
  free(p->text);
  lr_free_warnings(p->warnings, &p->warning_count);
  lr_free_warnings(p->load_warnings, &p->load_warning_count);
  pthread_mutex_destroy(&p->pool_lock);
  free(p);
}

const char *luaretry_policy_errmsg(const luaretry_policy *p) {
  return p ? p->errmsg : "no policy";
}

size_t luaretry_policy_warning_count(const luaretry_policy *p) {
  return p ? p->warning_count : 0;
}

const char *luaretry_policy_warning(const luaretry_policy *p, size_t i) {
  return p && i < p->warning_count ? p->warnings[i] : NULL;
}

size_t luaretry_policy_memory(const luaretry_policy *p) {
  return p && p->main ? p->main->sb->used : 0;
}

int lr_policy_loaded(const luaretry_policy *p) { return p->main != NULL; }
lr_sandbox *lr_policy_sandbox(luaretry_policy *p) { return p->main->sb; }
int lr_policy_run_ref(const luaretry_policy *p) { return p->main ? p->main->ref_run : 0; }
char *lr_policy_errbuf(luaretry_policy *p, size_t *size) {
  *size = sizeof p->errmsg;
  return p->errmsg;
}

void luaretry_policy_set_log(luaretry_policy *p, luaretry_log_fn fn, void *ud) {
  if (!p) return;
  p->log = fn;
  p->log_ud = ud;
  pthread_mutex_lock(&p->pool_lock);
  for (lr_script *s = p->free_scripts; s; s = s->next_free) s->sb->log = fn, s->sb->log_ud = ud;
  if (p->main) p->main->sb->log = fn, p->main->sb->log_ud = ud;
  pthread_mutex_unlock(&p->pool_lock);
}

luaretry_code luaretry_policy_set_classifier(luaretry_policy *p,
                                             luaretry_classify_fn fn, void *ud) {
  if (!p) return LUARETRY_E_ARG;
  p->host_classify = fn;
  p->host_ud = ud;
  return LUARETRY_OK;
}

luaretry_code luaretry_policy_tuning(const luaretry_policy *p, luaretry_tuning *t) {
  if (!p || !t) return LUARETRY_E_ARG;
  if (!p->main) return LUARETRY_E_STATE;
  *t = p->tuning;
  t->name = p->name;
  t->source = p->source;
  t->instruction_limit = p->instruction_limit;
  t->memory_limit = p->memory_limit;
  return LUARETRY_OK;
}

static void default_name(char *dst, size_t size, const char *chunk) {
  const char *base = strrchr(chunk, '/');
  base = base ? base + 1 : chunk;
  lr_strlcpy(dst, base, size);
  char *dot = strrchr(dst, '.');
  if (dot && strcmp(dot, ".lua") == 0) *dot = '\0';
}

/* Loads `text` (owned by this function from here on) as the policy's
 * script: validated, it becomes the policy, and the states of the previous
 * load leave the pool (calls in flight keep theirs until they end). */
static luaretry_code install(luaretry_policy *p, char *text, size_t len,
                             const char *chunkname, const char *script_path) {
  char old_path[sizeof p->script_path];
  lr_strlcpy(old_path, p->script_path, sizeof old_path);
  lr_strlcpy(p->script_path, script_path, sizeof p->script_path);
  lr_load *ld = calloc(1, sizeof *ld);
  if (!ld) {
    free(text);
    lr_strlcpy(p->script_path, old_path, sizeof p->script_path);
    return LUARETRY_E_NOMEM;
  }
  ld->p = p;
  ld->text = text;
  ld->text_len = len;
  ld->chunkname = chunkname;
  luaretry_code rc;
  char err[sizeof p->errmsg];
  lr_script *s = lr_script_new(p, ld, &rc, err, sizeof err);
  lr_script *stale = NULL;
  if (!s) {
    lr_strlcpy(p->errmsg, err, sizeof p->errmsg);
  } else {
    char chunk[1024];
    lr_strlcpy(chunk, ld->chunk_src, sizeof chunk);
    pthread_mutex_lock(&p->pool_lock);
    if (lr_compose(p, ld->fields, chunk, ld->warnings, ld->warning_count) != 0) {
      rc = LUARETRY_E_POLICY;
    } else {
      stale = p->free_scripts;
      s->epoch = ++p->epoch;
      s->body_limit = p->tuning.body_limit;
      p->free_scripts = s;
      p->main = s;
      s = NULL;
      free(p->text);
      p->text = text;
      p->text_len = len;
      text = NULL;
      lr_strlcpy(p->chunkname, chunkname, sizeof p->chunkname);
      memcpy(p->fields, ld->fields, sizeof p->fields);
      lr_free_warnings(p->load_warnings, &p->load_warning_count);
      memcpy(p->load_warnings, ld->warnings, ld->warning_count * sizeof *ld->warnings);
      p->load_warning_count = ld->warning_count;
      ld->warning_count = 0;
      lr_strlcpy(p->source, chunk, sizeof p->source);
      if (ld->fields[F_NAME].type != LUA_TSTRING) default_name(p->name, sizeof p->name, chunk);
    }
    pthread_mutex_unlock(&p->pool_lock);
  }
  if (rc != LUARETRY_OK) lr_strlcpy(p->script_path, old_path, sizeof p->script_path);
  while (stale) {
    lr_script *next = stale->next_free;
    lr_script_free(stale);
    stale = next;
  }
  lr_script_free(s);
  free(text);
  lr_free_warnings(ld->warnings, &ld->warning_count);
  free(ld);
  return rc;
}

/* The whole file, and a byte offset past a "#!" line or a UTF-8 BOM (as
 * luaL_loadfile skips them); NULL with p->errmsg. */
static char *read_script(luaretry_policy *p, const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    lr_fmt(p->errmsg, sizeof p->errmsg, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 8192, n = 0;
  char *text = malloc(cap);
  for (;;) {
    if (!text) break;
    n += fread(text + n, 1, cap - n, f);
    if (n < cap) break;
    char *grown = realloc(text, cap *= 2);
    if (!grown) { free(text); text = NULL; break; }
    text = grown;
  }
  int failed = !text || ferror(f);
  fclose(f);
  if (failed) {
    lr_fmt(p->errmsg, sizeof p->errmsg, "%s: cannot read: %s", path,
           text ? strerror(errno) : "out of memory");
    free(text);
    return NULL;
  }
  if (n >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) memset(text, ' ', 3);
  if (n && text[0] == '#')  /* blank the first line, keep the numbering */
    for (size_t i = 0; i < n && text[i] != '\n'; i++) text[i] = ' ';
  *len = n;
  return text;
}

static luaretry_code load(luaretry_policy *p, const char *path,
                          const char *chunkname, const char *source) {
  if (!p || (!path && !source)) return LUARETRY_E_ARG;
  p->errmsg[0] = '\0';
  size_t len;
  char *text;
  char name[sizeof p->chunkname];
  struct stat st;
  memset(&st, 0, sizeof st);
  if (path) {
    if (stat(path, &st) != 0) memset(&st, 0, sizeof st);
    text = read_script(p, path, &len);
    if (!text) return LUARETRY_E_IO;
    lr_fmt(name, sizeof name, "@%s", path);
  } else {
    len = strlen(source);
    text = malloc(len + 1);
    if (!text) return LUARETRY_E_NOMEM;
    memcpy(text, source, len + 1);
    lr_strlcpy(name, chunkname ? chunkname : "=policy", sizeof name);
  }
  luaretry_code rc = install(p, text, len, name, path ? path : "");
  if (rc == LUARETRY_OK) {
    p->mtime = st.st_mtim;
    p->size = (long long)st.st_size;
  }
  return rc;
}

luaretry_code luaretry_policy_reload_if_changed(luaretry_policy *p, int *reloaded) {
  if (reloaded) *reloaded = 0;
  if (!p) return LUARETRY_E_ARG;
  if (!p->main || !p->script_path[0]) return LUARETRY_E_STATE;
  /* a stat at most once a second, whatever the host's call rate */
  double now = lr_monotonic_now();
  pthread_mutex_lock(&p->pool_lock);
  int due = p->last_check == 0 || now - p->last_check >= 1.0;
  if (due) p->last_check = now;
  pthread_mutex_unlock(&p->pool_lock);
  if (!due) return LUARETRY_OK;
  struct stat st;
  if (stat(p->script_path, &st) != 0) {
    lr_fmt(p->errmsg, sizeof p->errmsg, "%s: %s (the loaded policy stays)", p->script_path,
           strerror(errno));
    return LUARETRY_E_IO;
  }
  if (st.st_mtim.tv_sec == p->mtime.tv_sec && st.st_mtim.tv_nsec == p->mtime.tv_nsec &&
      (long long)st.st_size == p->size)
    return LUARETRY_OK;
  char path[sizeof p->script_path];
  lr_strlcpy(path, p->script_path, sizeof path);
  luaretry_code rc = load(p, path, NULL, NULL);
  if (rc == LUARETRY_OK && reloaded) *reloaded = 1;
  if (rc != LUARETRY_OK) {
    /* not again until the file changes once more */
    p->mtime = st.st_mtim;
    p->size = (long long)st.st_size;
  }
  return rc;
}

/* A set that changes what the Lua states hold (an option, a limit): load
 * the same text again, so every state of the pool agrees. */
static luaretry_code reload_text(luaretry_policy *p) {
  char *copy = malloc(p->text_len + 1);
  if (!copy) return LUARETRY_E_NOMEM;
  memcpy(copy, p->text, p->text_len);
  copy[p->text_len] = '\0';
  char name[sizeof p->chunkname], path[sizeof p->script_path];
  lr_strlcpy(name, p->chunkname, sizeof name);
  lr_strlcpy(path, p->script_path, sizeof path);
  return install(p, copy, p->text_len, name, path);
}

/* Checks a script out, and copies the rules in the same critical section
 * when `rules` is given, so the two always belong to one load. */
static lr_script *acquire(luaretry_policy *p, lr_rules *rules) {
  pthread_mutex_lock(&p->pool_lock);
  lr_script *s = p->free_scripts;
  if (s) {
    p->free_scripts = s->next_free;
  } else if (p->main) {
    /* Another thread's call holds every state: make one more.  Rare (once
     * per concurrent call at most), so under the lock. */
    lr_load *ld = calloc(1, sizeof *ld);
    if (ld) {
      ld->p = p;
      ld->text = p->text;
      ld->text_len = p->text_len;
      ld->chunkname = p->chunkname;
      luaretry_code rc;
      char err[512];
      s = lr_script_new(p, ld, &rc, err, sizeof err);
      if (s) {
        s->epoch = p->epoch;
        s->body_limit = p->tuning.body_limit;
      }
      lr_free_warnings(ld->warnings, &ld->warning_count);
      free(ld);
    }
  }
  if (s) s->next_free = NULL;
  if (s && rules) *rules = p->rules;
  pthread_mutex_unlock(&p->pool_lock);
  return s;
}

lr_script *lr_script_acquire(luaretry_policy *p) { return acquire(p, NULL); }

void lr_script_release(luaretry_policy *p, lr_script *s) {
  if (!s) return;
  pthread_mutex_lock(&p->pool_lock);
  int current = s->epoch == p->epoch;
  if (current) {
    s->next_free = p->free_scripts;
    p->free_scripts = s;
  }
  pthread_mutex_unlock(&p->pool_lock);
  if (!current) lr_script_free(s);  /* from before a reload */
}

static void release_script(void *ud) {
  lr_script *s = ud;
  lr_script_release(s->p, s);
}

luaretry_code lr_policy_checkout(luaretry_policy *p, lr_judge *j, lr_rules *r) {
  lr_script *s = acquire(p, r);
  if (!s) return LUARETRY_E_NOMEM;
  *j = lr_script_judge(s);
  j->release = release_script;
  return LUARETRY_OK;
}

luaretry_code luaretry_policy_load_file(luaretry_policy *p, const char *path) {
  return load(p, path, NULL, NULL);
}

luaretry_code luaretry_policy_load_string(luaretry_policy *p, const char *chunkname,
                                          const char *source) {
  return load(p, NULL, chunkname, source);
}

/* A sandbox limit: every Lua state of the pool is made anew with it. */
static luaretry_code set_limit(luaretry_policy *p, int i, const char *value) {
  double d;
  if (lr_schema_limit(i, value, &d, p->errmsg, sizeof p->errmsg) != 0) return LUARETRY_E_ARG;
  size_t old_memory = p->memory_limit;
  long old_instructions = p->instruction_limit;
  if (i == F_MEMORY_LIMIT) p->memory_limit = (size_t)d;
  else p->instruction_limit = (long)d;
  luaretry_code rc = p->main ? reload_text(p) : LUARETRY_OK;
  if (rc != LUARETRY_OK) {
    p->memory_limit = old_memory;
    p->instruction_limit = old_instructions;
  }
  return rc;
}

/* Records NAME=VALUE among the overrides; its slot, or -1 (errmsg). */
static int remember(luaretry_policy *p, const char *name, const char *value,
                    lr_override *saved, size_t *saved_count) {
  if (strlen(name) >= sizeof p->overrides[0].name) {
    lr_fmt(p->errmsg, sizeof p->errmsg, "%s: name too long", name);
    return -1;
  }
  if (strlen(value) >= sizeof p->overrides[0].value) {
    lr_fmt(p->errmsg, sizeof p->errmsg, "%s: value too long", name);
    return -1;
  }
  size_t k = 0;
  while (k < p->override_count && strcmp(p->overrides[k].name, name) != 0) k++;
  if (k == MAX_OVERRIDES) {
    lr_fmt(p->errmsg, sizeof p->errmsg, "%s: too many overrides", name);
    return -1;
  }
  *saved = p->overrides[k];
  *saved_count = p->override_count;
  lr_strlcpy(p->overrides[k].name, name, sizeof p->overrides[k].name);
  lr_strlcpy(p->overrides[k].value, value, sizeof p->overrides[k].value);
  if (k == p->override_count) p->override_count++;
  return (int)k;
}

luaretry_code luaretry_policy_set(luaretry_policy *p, const char *name,
                                  const char *value) {
  if (!p || !name || !value) return LUARETRY_E_ARG;
  p->errmsg[0] = '\0';
  int i = lr_field_index(name);
  int option = strncmp(name, "options.", 8) == 0 && name[8];
  if (i >= 0 && (lr_fields[i].flags & HOST)) return set_limit(p, i, value);
  if (!option && i < 0) {
    lr_unknown_field(p->errmsg, sizeof p->errmsg, name);
    return LUARETRY_E_ARG;
  }
  if (!option && !luaretry_field_at((size_t)i)->settable) {
    lr_fmt(p->errmsg, sizeof p->errmsg, "%s: can only be set in the script", name);
    return LUARETRY_E_ARG;
  }
  lr_override saved;
  size_t saved_count;
  int k = remember(p, name, value, &saved, &saved_count);
  if (k < 0) return LUARETRY_E_ARG;
  if (!p->main) return LUARETRY_OK;  /* checked at load */
  /* Loaded: validate now, keep the policy as it was when refused.  An
   * option lives in the Lua states: they are all made anew. */
  int refused;
  if (option) {
    refused = reload_text(p) != LUARETRY_OK;
  } else {
    pthread_mutex_lock(&p->pool_lock);
    refused = lr_compose(p, p->fields, p->source, p->load_warnings, p->load_warning_count) != 0;
    pthread_mutex_unlock(&p->pool_lock);
  }
  if (refused) {
    p->overrides[k] = saved;
    p->override_count = saved_count;
    return LUARETRY_E_ARG;
  }
  return LUARETRY_OK;
}

luaretry_code luaretry_policy_get(const luaretry_policy *p, const char *name, char *buf,
                                  size_t size) {
  if (!p || !name || !buf || size == 0) return LUARETRY_E_ARG;
  int i = lr_field_index(name);
  if (i < 0 || !luaretry_field_at((size_t)i)->settable) return LUARETRY_E_ARG;
  if (!p->main) return LUARETRY_E_STATE;
  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  lr_schema_format(&t, i, buf, size);
  return LUARETRY_OK;
}

int lr_compose(luaretry_policy *p, const lr_field *script_fields, const char *chunk,
               char **load_warnings, size_t load_count) {
  char errors[sizeof p->errmsg];
  char *warnings[MAX_WARNINGS];
  size_t count = 0;
  for (size_t i = 0; i < load_count; i++) {
    char *copy = strdup(load_warnings[i]);
    if (copy) warnings[count++] = copy;
  }
  lr_rules rules;
  luaretry_tuning tuning;
  if (lr_schema_apply(script_fields, p->overrides, p->override_count, chunk, &tuning, &rules,
                      warnings, &count, errors, sizeof errors) != 0) {
    /* A failed load reports everything at once: the errors, then what
     * would have been warnings (a typo'd name is often the cause). */
    size_t len = strlen(errors);
    for (size_t i = 0; i < count; i++) {
      lr_fmt(errors + len, sizeof errors - len, "\n%s", warnings[i]);
      len += strlen(errors + len);
    }
    lr_free_warnings(warnings, &count);
    lr_strlcpy(p->errmsg, errors, sizeof p->errmsg);
    return -1;
  }
  lr_free_warnings(p->warnings, &p->warning_count);
  memcpy(p->warnings, warnings, count * sizeof *warnings);
  p->warning_count = count;
  p->rules = rules;
  p->tuning = tuning;
  lr_shared_configure(&p->shared, &rules.guards);
  if (script_fields[F_NAME].type == LUA_TSTRING)
    lr_strlcpy(p->name, script_fields[F_NAME].str, sizeof p->name);
  return 0;
}
