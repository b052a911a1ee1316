/* fleet_link.c: the lr_fleet each load of a policy's script uses (README
 * "Fleet"), made from the host's settings (fleet.redis, the Redis
 * timeouts) and the script's (fleet.key, fleet.sync).
 *
 * Lifetime: a load (lr_gen) holds a reference to the link it was made
 * with, as the load's calls hold the load, so no call ever sees its fleet
 * freed under it.  A new load whose URL, key, sync period and timeouts
 * are those of the current load's link reuses it (the fleet's counts and
 * connection go on; new guard numbers go in with lr_fleet_configure);
 * otherwise it gets a link of its own, and the old one goes with the last
 * load holding it, after sending what it counted and had not sent.  A
 * fork's child never reuses its parent's Redis handle (same_link). */
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet.h"
#include "fleet/local_store.h"
#include "fleet/remote_guard.h"
#include "policy.h"

struct lr_fleet_link {
  atomic_long refs;
  lr_fleet *fleet; /* Redis's, or NULL */
  lr_local *local; /* the local store's (fleet.local), or NULL */
  char *url;       /* with its credentials: compared, never shown; the
                      local store's: its folder after "local:" */
  char key[FLEET_KEY_SIZE];
  long sync, connect, command, reconnect;
};

void lr_policy_fleet_init(luaretry_policy *p) {
  p->fleet_connect_ms = (long)lr_fields[F_FL_CONNECT].def;
  p->fleet_command_ms = (long)lr_fields[F_FL_COMMAND].def;
  p->fleet_reconnect_ms = (long)lr_fields[F_FL_RECONNECT].def;
}

void lr_policy_fleet_free(luaretry_policy *p) {
  free(p->fleet_url);
  p->fleet_url = NULL;
  free(p->fleet_local);
  p->fleet_local = NULL;
}

/* The fleet's health changes: to the host's fleet log, else its log. */
static void fleet_said(void *ud, const char *line) {
  luaretry_policy *p = ud;
  const lr_log_target *t = p->fleet_log.fn ? &p->fleet_log : &p->log;
  if (t->fn) t->fn(t->ud, line);
}

int lr_fleet_url_ok(const char *url, char *err, size_t errlen) {
  char why[400] = "", shown[FLEET_URL_SHOWN];
  lr_fleet_code rc = lr_fleet_url_check(url, shown, sizeof shown, why, sizeof why);
  if (rc == LR_FLEET_OK) return 1;
  lr_fmt(err, errlen, "fleet.redis: %s", why[0] ? why : lr_fleet_strerror(rc));
  return 0;
}

/* The policy's name as a key: what the fleet cannot take becomes '_'. */
static void key_of_name(char *dst, size_t size, const char *name) {
  lr_strlcpy(dst, name && name[0] ? name : "policy", size);
  for (char *c = dst; *c; c++)
    if ((unsigned char)*c <= 0x20 || *c == 0x7f || *c == '{' || *c == '}') *c = '_';
}

/* What tells two links apart: Redis's URL, or "local:" and the folder. */
static char *where_of(const luaretry_policy *p) {
  if (p->fleet_url) return strdup(p->fleet_url);
  size_t n = strlen(p->fleet_local) + 7;
  char *s = malloc(n);
  if (s) lr_fmt(s, n, "local:%s", p->fleet_local);
  return s;
}

/* A fork's child never keeps its parent's Redis handle: its load makes
 * one of its own, which joins the fleet (the local store's is the same
 * files in every process). */
static int same_link(const struct lr_fleet_link *l, const luaretry_policy *p, const char *key,
                     long sync) {
  if (!l || (l->fleet && !lr_fleet_owned(l->fleet))) return 0;
  int same_store = p->fleet_url ? !l->local && strcmp(l->url, p->fleet_url) == 0
                                : l->local && strcmp(l->url + 6, p->fleet_local) == 0;
  return same_store && strcmp(l->key, key) == 0 && l->sync == sync &&
         l->connect == p->fleet_connect_ms && l->command == p->fleet_command_ms &&
         l->reconnect == p->fleet_reconnect_ms;
}

/* A fixed rate limiter, shared by the fleet. */
static int fleet_rate(const lr_rules *r) {
  return r->guards.rate && !r->guards.rate_adaptive && r->guards.rate_limit > 0;
}

static void guard_settings(const lr_rules *r, lr_fleet_settings *s) {
  s->budget = r->guards.budget;
  s->max_tokens = r->guards.max_tokens;
  s->token_ratio = r->guards.token_ratio;
  s->reserve = r->guards.reserve;
  s->breaker = r->guards.breaker;
  s->failures = r->guards.failures;
  s->open_seconds = r->guards.open_seconds;
  s->probes = r->guards.probes;
  s->throttle = r->guards.throttle_k > 0;
  s->throttle_k = r->guards.throttle_k;
  s->throttle_window = r->guards.throttle_window;
  s->throttle_cost = r->guards.throttle_cost;
  /* a fixed rate is the fleet's; an adaptive one follows this process's
   * answers and stays its own (README "Fleet") */
  s->rate = fleet_rate(r);
  s->rate_limit = r->guards.rate_limit;
  s->rate_burst = r->guards.rate_burst;
  if (lr_breaker_rated(&r->guards)) {
    s->window = r->guards.window;
    s->min_calls = r->guards.min_calls;
    s->failure_rate = r->guards.failure_rate;
    s->slow_rate = r->guards.slow_rate;
  }
}

static struct lr_fleet_link *new_link(luaretry_policy *p, const lr_fleet_settings *s,
                                      const char *key, char *err, size_t errlen) {
  struct lr_fleet_link *l = calloc(1, sizeof *l);
  char *url = where_of(p);
  lr_fleet_code rc = !l || !url       ? LR_FLEET_E_NOMEM
                     : p->fleet_local ? lr_local_new(p->fleet_local, key, s, &l->local, NULL, 0)
                                      : lr_fleet_new(url, key, s, &l->fleet, err, errlen);
  if (rc != LR_FLEET_OK) {
    if (rc == LR_FLEET_E_NOMEM) lr_fmt(err, errlen, "out of memory");
    free(url);
    free(l);
    return NULL;
  }
  atomic_init(&l->refs, 1);
  l->url = url;
  lr_strlcpy(l->key, key, sizeof l->key);
  l->sync = s->sync_ms;
  l->connect = s->connect_timeout_ms;
  l->command = s->command_timeout_ms;
  l->reconnect = s->reconnect_max_ms;
  return l;
}

int lr_policy_fleet_attach(luaretry_policy *p, lr_gen *g, lr_tuning *t, const char *name, char *err,
                           size_t errlen) {
  if (!t->fleet_key[0]) key_of_name(t->fleet_key, sizeof t->fleet_key, name);
  t->fleet_connect_timeout = p->fleet_connect_ms;
  t->fleet_command_timeout = p->fleet_command_ms;
  t->fleet_reconnect = p->fleet_reconnect_ms;
  t->fleet_redis[0] = '\0';
  lr_strlcpy(t->fleet_local,
             !p->fleet_local     ? ""
             : p->fleet_local[0] ? p->fleet_local
                                 : "on",
             sizeof t->fleet_local);
  if (p->fleet_url) /* as get shows it, even when there is nothing to share */
    lr_fleet_url_check(p->fleet_url, t->fleet_redis, sizeof t->fleet_redis, NULL, 0);
  g->fleet = NULL;
  memset(&g->rules.remote, 0, sizeof g->rules.remote);
  /* nothing to share: warned of, and no connection made */
  if ((!p->fleet_url && !p->fleet_local) ||
      (!t->pub.budget && !t->pub.breaker && !t->admission && !fleet_rate(&g->rules)))
    return 0;
  lr_fleet_settings s;
  lr_fleet_settings_init(&s);
  guard_settings(&g->rules, &s);
  struct lr_fleet_link *cur = p->gen ? p->gen->fleet : NULL;
  struct lr_fleet_link *l = NULL;
  if (same_link(cur, p, t->fleet_key, t->fleet_sync)) {
    l = cur;
    atomic_fetch_add(&l->refs, 1);
    if (l->local)
      lr_local_configure(l->local, &s);
    else
      lr_fleet_configure(l->fleet, &s);
  } else {
    s.sync_ms = (int)t->fleet_sync;
    s.connect_timeout_ms = (int)p->fleet_connect_ms;
    s.command_timeout_ms = (int)p->fleet_command_ms;
    s.reconnect_max_ms = (int)p->fleet_reconnect_ms;
    if (s.reconnect_min_ms > s.reconnect_max_ms) s.reconnect_min_ms = s.reconnect_max_ms;
    s.log = fleet_said;
    s.log_ud = p;
    l = new_link(p, &s, t->fleet_key, err, errlen);
    if (!l) return -1;
  }
  g->fleet = l;
  /* the engine sees either store through the same interface */
  g->rules.remote.ops = l->local ? &lr_local_remote_ops : &lr_fleet_remote_ops;
  g->rules.remote.ud = l->local ? (void *)l->local : (void *)l->fleet;
  return 0;
}

void lr_fleet_link_unref(struct lr_fleet_link *l) {
  if (!l || atomic_fetch_sub(&l->refs, 1) != 1) return;
  lr_fleet_flush(l->fleet); /* this process's last counts */
  lr_fleet_free(l->fleet);
  lr_local_free(l->local);
  free(l->url);
  free(l);
}

luaretry_guards_scope lr_fleet_link_scope(struct lr_fleet_link *l, double *tokens,
                                          luaretry_breaker_state *breaker) {
  if (!l) return LUARETRY_GUARDS_LOCAL;
  if (l->local) {
    lr_local_status st;
    lr_local_status_get(l->local, &st);
    if (!st.usable || st.detail[0]) return LUARETRY_GUARDS_FALLBACK; /* refused, or its settings */
    *tokens = st.tokens;
    *breaker = (luaretry_breaker_state)st.breaker;
    return LUARETRY_GUARDS_FLEET;
  }
  /* a fork's child with its parent's handle decides with its own guards */
  if (!lr_fleet_owned(l->fleet)) return LUARETRY_GUARDS_FALLBACK;
  lr_fleet_view v;
  lr_fleet_view_get(l->fleet, &v);
  if (!v.fresh) return LUARETRY_GUARDS_FALLBACK;
  *tokens = v.tokens;
  *breaker = (luaretry_breaker_state)v.breaker;
  return LUARETRY_GUARDS_FLEET;
}

lr_fleet *lr_fleet_link_fleet(struct lr_fleet_link *l) { return l ? l->fleet : NULL; }

lr_local *lr_fleet_link_local(struct lr_fleet_link *l) { return l ? l->local : NULL; }

const char *lr_fleet_link_key(struct lr_fleet_link *l) { return l ? l->key : ""; }
