/* policy_fleet.c: the public luaretry_policy_fleet_* functions: the
 * fleet of a policy's current load (fleet_link.c), synced, read or reset
 * on the host's request. */
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet.h"
#include "fleet/local_store.h"
#include "policy.h"

void luaretry_policy_on_fleet(luaretry_policy *p, luaretry_log_fn fn, void *ud) {
  if (!lr_policy_ok(p)) return;
  p->fleet_log.fn = fn;
  p->fleet_log.ud = ud;
}

/* The current load's fleet, referenced through the load; NULL (errmsg
 * set) without one. */
static lr_gen *fleet_load(luaretry_policy *p) {
  lr_gen *g = lr_policy_current(p);
  if (g && g->fleet) return g;
  lr_policy_error(p, !g ? "no policy loaded"
                        : "no fleet: neither fleet.redis nor fleet.local is set, or the policy "
                          "has neither budget, breaker, admission nor a fixed rate");
  lr_gen_unref(g);
  return NULL;
}

/* errmsg: where and why, without credentials (the fleet's own text). */
static luaretry_code fleet_failed(luaretry_policy *p, lr_fleet *f, lr_fleet_code rc,
                                  const char *err) {
  lr_fleet_view v;
  lr_fleet_view_get(f, &v);
  char msg[800];
  if (rc == LR_FLEET_E_FORKED) /* the view's detail is the parent's */
    lr_fmt(msg, sizeof msg, "fleet: %s: %s", v.where, lr_fleet_strerror(rc));
  else if (err && err[0])
    lr_fmt(msg, sizeof msg, "fleet: %s", err);
  else
    lr_fmt(msg, sizeof msg, "fleet: %s: %s", v.where,
           v.detail[0] ? v.detail : lr_fleet_strerror(rc));
  lr_policy_error(p, msg);
  return LUARETRY_E_FLEET;
}

luaretry_code luaretry_policy_fleet_sync(luaretry_policy *p) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  lr_gen *g = fleet_load(p);
  if (!g) return LUARETRY_E_STATE;
  if (lr_fleet_link_local(g->fleet)) { /* every count is read where it lives */
    lr_gen_unref(g);
    return LUARETRY_OK;
  }
  lr_fleet_code rc = lr_fleet_sync_to_call(lr_fleet_link_fleet(g->fleet));
  luaretry_code out =
    rc == LR_FLEET_OK ? LUARETRY_OK : fleet_failed(p, lr_fleet_link_fleet(g->fleet), rc, NULL);
  lr_gen_unref(g);
  return out;
}

static luaretry_code copy_status(const lr_fleet_status *in, const lr_fleet_view *v,
                                 luaretry_fleet_status *st) {
  st->exists = in->exists;
  st->tokens = in->tokens;
  st->max_tokens = in->max_tokens;
  st->breaker = (luaretry_breaker_state)in->breaker;
  st->consecutive_failures = in->consecutive_failures;
  st->probes_left = in->probes_left;
  st->opened_at = (double)in->opened_at_ms / 1000;
  st->now = (double)in->now_ms / 1000;
  lr_strlcpy(st->key, v->key, sizeof st->key);
  lr_strlcpy(st->where, v->where, sizeof st->where);
  if (in->throttle) {
    st->window_requests = in->window_requests;
    st->window_accepts = in->window_accepts;
    st->window_seconds = in->window_seconds;
  }
  if (in->rate) st->rate_limit = in->rate_limit, st->rate_ahead = in->rate_ahead;
  st->leased_tokens = in->leased;
  st->lease_holders = in->lease_holders > 0 ? (uint64_t)in->lease_holders : 0;
  if (!in->count) return LUARETRY_OK;
  st->processes = calloc(in->count, sizeof *st->processes);
  if (!st->processes) return LUARETRY_E_NOMEM;
  st->process_count = in->count;
  for (size_t i = 0; i < in->count; i++) {
    lr_strlcpy(st->processes[i].member, in->processes[i].member, sizeof st->processes[i].member);
    st->processes[i].seen_ago = in->processes[i].seen_ago;
  }
  return LUARETRY_OK;
}

/* The local store's state: every shared guard, no registry of processes
 * (a process is not seen until it counts). */
static luaretry_code local_status(luaretry_policy *p, lr_local *l, const char *key,
                                  luaretry_fleet_status *st) {
  lr_local_status *in = malloc(sizeof *in);
  if (!in) {
    lr_policy_error(p, "out of memory");
    return LUARETRY_E_NOMEM;
  }
  lr_local_status_get(l, in);
  luaretry_code out = LUARETRY_OK;
  /* other settings holding the store refuse it as run is refused: its
   * counts read with this policy's numbers would be neither's */
  if (!in->usable || in->detail[0]) {
    char msg[800];
    lr_fmt(msg, sizeof msg, "fleet: %s", in->detail);
    lr_policy_error(p, msg);
    out = LUARETRY_E_FLEET;
  } else {
    st->exists = 1;
    st->tokens = in->tokens;
    st->max_tokens = in->max_tokens;
    st->breaker = (luaretry_breaker_state)in->breaker;
    st->consecutive_failures = in->consecutive_failures;
    st->probes_left = in->probes_left;
    st->now = lr_monotonic_now();
    st->opened_at = in->opened_ago >= 0 ? st->now - in->opened_ago : 0;
    if (in->window_seconds > 0) {
      st->window_requests = in->requests;
      st->window_accepts = in->accepts;
      st->window_seconds = in->window_seconds;
    }
    if (in->rate_limit > 0) st->rate_limit = in->rate_limit, st->rate_ahead = in->rate_ahead;
    lr_strlcpy(st->key, key, sizeof st->key);
    lr_strlcpy(st->where, in->path, sizeof st->where);
  }
  free(in);
  return out;
}

luaretry_code luaretry_policy_fleet_status(luaretry_policy *p, luaretry_fleet_status *st) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  if (!st) return lr_policy_refuse_null(p, "luaretry_policy_fleet_status", "st");
  memset(st, 0, sizeof *st);
  lr_gen *g = fleet_load(p);
  if (!g) return LUARETRY_E_STATE;
  if (lr_fleet_link_local(g->fleet)) {
    luaretry_code out =
      local_status(p, lr_fleet_link_local(g->fleet), lr_fleet_link_key(g->fleet), st);
    lr_gen_unref(g);
    return out;
  }
  lr_fleet *f = lr_fleet_link_fleet(g->fleet);
  lr_fleet_status in;
  char err[600] = "";
  lr_fleet_code rc = lr_fleet_status_get(f, &in, err, sizeof err);
  luaretry_code out = LUARETRY_OK;
  if (rc != LR_FLEET_OK) {
    out = fleet_failed(p, f, rc, err);
  } else {
    lr_fleet_view v;
    lr_fleet_view_get(f, &v);
    out = copy_status(&in, &v, st);
    if (out != LUARETRY_OK) lr_policy_error(p, "out of memory");
  }
  lr_fleet_status_free(&in);
  lr_gen_unref(g);
  return out;
}

void luaretry_fleet_status_free(luaretry_fleet_status *st) {
  if (!st) return;
  free(st->processes);
  st->processes = NULL;
  st->process_count = 0;
}

luaretry_code luaretry_policy_fleet_reset(luaretry_policy *p) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  lr_gen *g = fleet_load(p);
  if (!g) return LUARETRY_E_STATE;
  char err[600] = "";
  if (lr_fleet_link_local(g->fleet)) {
    lr_fleet_code rc = lr_local_reset(lr_fleet_link_local(g->fleet), err, sizeof err);
    char msg[800];
    lr_fmt(msg, sizeof msg, "fleet: %s", err);
    if (rc != LR_FLEET_OK) lr_policy_error(p, msg);
    lr_gen_unref(g);
    return rc == LR_FLEET_OK ? LUARETRY_OK : LUARETRY_E_FLEET;
  }
  lr_fleet_code rc = lr_fleet_reset(lr_fleet_link_fleet(g->fleet), err, sizeof err);
  luaretry_code out =
    rc == LR_FLEET_OK ? LUARETRY_OK : fleet_failed(p, lr_fleet_link_fleet(g->fleet), rc, err);
  lr_gen_unref(g);
  return out;
}
