/* judge.c: the calls into the script on each decision (is_success,
 * is_transient, backoff, on_retry) and on each request (is_idempotent,
 * prepare), each in a state borrowed from the call's load for its
 * duration, under protection and the sandbox's limits.  `info` is a
 * read-only proxy: what a script does not read costs nothing. */
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

/* ---- one call into the script */

/* Borrows a state of g for the call described by ctx (and o), whose
 * stream is rng (ctx's, or NULL without one: a decision always has one). */
static inline __attribute__((always_inline)) lr_script *begin_call(lr_gen *g,
                                                                   const luaretry_outcome *o,
                                                                   const lr_attempt_ctx *ctx,
                                                                   lr_rng *rng, char *err,
                                                                   size_t errlen) {
  lr_script *s = lr_gen_borrow(g, err, errlen);
  if (!s) return NULL;
  s->cur = o;
  s->cur_ctx = ctx;
  s->generation++;
  s->sb->rng = rng;
  return s;
}

/* What begin_call set, back as it was: a state between calls has no
 * outcome, context or stream (a workflow's info reads nil).  cur_decision
 * and cur_request are cleared by the calls that set them. */
static void end_call(lr_script *s) {
  s->cur = NULL;
  s->cur_ctx = NULL;
  s->sb->rng = NULL;
  lr_gen_return(s);
}

/* Whether the state's body slot already holds body[0..len) (o's body cut
 * to body_limit).  A service in trouble answers the same page again and
 * again: then the Lua string of the last decision serves again, and a
 * retry loop makes no garbage.  Compared byte for byte: a host may have
 * written another answer into the same buffer. */
static int body_cached(lr_script *s, const char *body, size_t len) {
  if (!s->slot_body) s->slot_body = lua_tolstring(s->sb->L, SLOT_BODY, &s->slot_body_len);
  return s->slot_body_len == len && memcmp(s->slot_body, body, len) == 0;
}

/* The string at `idx` becomes the body slot's. */
static void keep_body(lr_script *s, int idx) {
  lua_State *L = s->sb->L;
  lua_copy(L, idx, SLOT_BODY);
  s->slot_body = lua_tolstring(L, SLOT_BODY, &s->slot_body_len); /* a string: no conversion */
}

/* Under protection, for a body not cached: the hook called with a new
 * body string, which is returned too (for the body slot). */
static int call_fresh(lua_State *L) {
  lr_script *s = lua_touserdata(L, 1);
  lua_pushlstring(L, s->cur_body, s->cur_body_len); /* 2: kept */
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->cur_fn);
  lua_pushinteger(L, s->cur->status);
  lua_pushvalue(L, 2);
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref_info);
  lua_call(L, 3, 2);
  return 3; /* the body, then the verdict and its reason */
}

static int keep_call_protected(lua_State *L) {
  lr_script_keep_call(L, lua_touserdata(L, 1));
  return 0;
}

/* o's body as the script gets it: cut to body_limit. */
static inline const char *body_of(const lr_script *s, size_t *len) {
  const luaretry_outcome *o = s->cur;
  *len = !o->body ? 0 : o->body_len < s->gen->body_limit ? o->body_len : s->gen->body_limit;
  return o->body ? o->body : "";
}

/* A body not cached, pushed as a new string without a protected C call
 * (lr_sandbox_push_string) and kept in the body slot too, 1; or 0 with
 * nothing pushed, the body left in cur_body for call_fresh. */
static __attribute__((noinline)) int body_new(lr_script *s) {
  s->cur_body = body_of(s, &s->cur_body_len);
  const char *copy = lr_sandbox_push_string(s->sb, s->cur_body, s->cur_body_len);
  if (!copy) return 0;
  lua_copy(s->sb->L, -1, SLOT_BODY); /* pushvalue's slot: the string's bytes stay put */
  s->slot_body = copy;
  s->slot_body_len = s->cur_body_len;
  return 1;
}

/* Pushes this call's body: the body slot's string when it is the same
 * (body_cached), or a new one made now (body_new finds the body again:
 * nothing is kept across the compare); 0 when it must be made under
 * protection, nothing pushed. */
static inline int push_body(lr_script *s) {
  size_t len;
  const char *body = body_of(s, &len);
  if (!body_cached(s, body, len)) return body_new(s);
  lua_pushvalue(s->sb->L, SLOT_BODY);
  return 1;
}

/* How a hook's call ended, rc (err saying why when not LUARETRY_OK): 0
 * with its results on the stack, info.call kept when the hook made it;
 * or -1 with v filled as a policy error. */
static int hook_done(lr_script *s, luaretry_code rc, char *err, size_t errlen, const char *fname,
                     const char *rule, lr_verdict *v) {
  if (rc == LUARETRY_OK && s->call_made) {
    /* on failure the stack is back at its base: the hook's result is gone */
    rc = lr_sandbox_call(s->sb, keep_call_protected, s, 0, LUARETRY_E_POLICY, err, errlen);
  }
  if (rc == LUARETRY_OK) return 0;
  s->call_made = 0;
  v->cls = LUARETRY_CLASS_ERROR;
  v->rule = rule;
  lr_fmt(v->message, sizeof v->message, "%s: %s", fname, err);
  return -1;
}

/* A hook called directly that failed, hit a limit, or made info.call:
 * out of line, so the common end (none of these) keeps no error buffer. */
static __attribute__((noinline)) int hook_slow(lr_script *s, int status, const char *fname,
                                               const char *rule, lr_verdict *v) {
  char err[sizeof v->message];
  luaretry_code rc = status == LUA_OK
                       ? LUARETRY_OK
                       : lr_sandbox_failed(s->sb, status, LUARETRY_E_POLICY, err, sizeof err);
  return hook_done(s, rc, err, sizeof err, fname, rule, v);
}

/* A body the sandbox cannot push safely outside protection (near the
 * memory limit): the string made under it, by call_fresh. */
static __attribute__((noinline)) int hook_fresh(lr_script *s, const char *fname, const char *rule,
                                                lr_verdict *v) {
  char err[sizeof v->message];
  lua_State *L = s->sb->L;
  luaretry_code rc = lr_sandbox_call(s->sb, call_fresh, s, 3, LUARETRY_E_POLICY, err, sizeof err);
  if (rc == LUARETRY_OK) { /* copies, not rotations: they cost less */
    keep_body(s, -3);
    lua_copy(L, -2, -3);
    lua_copy(L, -1, -2);
    lua_pop(L, 1);
  }
  return hook_done(s, rc, err, sizeof err, fname, rule, v);
}

/* call_hook's answer when the body must be made under protection. */
#define HOOK_FRESH (-2)

/* Calls is_success, is_transient or is_throttling (in `slot`, or else
 * registry `ref`) with what it declares; the Lua status (lr_sandbox_run's),
 * or HOOK_FRESH with nothing called (and nothing left pushed).  Nothing
 * pushed here can raise (a new body only through lr_sandbox_push_string,
 * straight into its argument's place), so the hook is called directly,
 * with no C function between the host and the script.  Inline: a
 * decision's path through judge.c is one function, with one prologue. */
static inline __attribute__((always_inline)) int call_hook(lr_script *s, int slot, int ref,
                                                           int bodiless) {
  lua_State *L = s->sb->L;
  if (slot)
    lua_pushvalue(L, slot);
  else
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  lua_pushinteger(L, s->cur->status);
  if (bodiless == LR_HOOK_STATUS_ONLY) /* hook(status): nothing allocated */
    return lr_sandbox_run(s->sb, 1, 2);
  if (bodiless == LR_HOOK_BODY_UNUSED) {
    lua_pushvalue(L, SLOT_EMPTY);
  } else if (!push_body(s)) {
    lua_pop(L, 2);
    s->cur_fn = ref;
    return HOOK_FRESH;
  }
  lua_pushvalue(L, SLOT_INFO);
  return lr_sandbox_run(s->sb, 3, 2);
}

/* Runs a hook (call_hook); 0 with its two results on the stack (the
 * verdict, and a reason or nil), or -1 with v filled as a policy error. */
static inline __attribute__((always_inline)) int run_hook(lr_script *s, int slot, int ref,
                                                          int bodiless, const char *fname,
                                                          const char *rule, lr_verdict *v) {
  int status = call_hook(s, slot, ref, bodiless);
  if (__builtin_expect(status == LUA_OK && !s->call_made, 1)) return 0;
  if (status == HOOK_FRESH) return hook_fresh(s, fname, rule, v);
  return hook_slow(s, status, fname, rule, v);
}

static void default_classify(const luaretry_outcome *o, lr_verdict *v) {
  v->rule = "default";
  if (o->kind == LUARETRY_OUTCOME_COMMAND) {
    /* 126 (cannot execute) and 127 (not found) stay so however often the
     * command is run; an attempt that timed out did not succeed, whatever
     * status its first process left */
    if (o->error)
      v->cls = LUARETRY_CLASS_TRANSIENT;
    else if (o->status == 126 || o->status == 127)
      v->cls = LUARETRY_CLASS_FINAL;
    else
      v->cls = o->status == 0 ? LUARETRY_CLASS_SUCCESS : LUARETRY_CLASS_TRANSIENT;
    return;
  }
  /* a certificate or host name that does not verify: no retry makes it
   * good, and retrying only hides an attack or a misconfiguration; a
   * redirect chain longer than the limit the user set is as long again, a
   * body larger than its size limit as large; a body that twice was not
   * the host's checksum is something else */
  if (o->error &&
      (strcmp(o->error, "tls_verify") == 0 || strcmp(o->error, "too_many_redirects") == 0 ||
       strcmp(o->error, "redirect_refused") == 0 || strcmp(o->error, "too_large") == 0 ||
       strcmp(o->error, "checksum_mismatch") == 0)) {
    v->cls = LUARETRY_CLASS_FINAL;
    return;
  }
  switch (o->status) {
  case 0:
  case 408:
  case 429:
  case 500:
  case 502:
  case 503:
  case 504:
    v->cls = LUARETRY_CLASS_TRANSIENT;
    v->throttled = o->status == 429 && !o->error;
    return;
  }
  v->cls = o->error ? LUARETRY_CLASS_TRANSIENT : LUARETRY_CLASS_FINAL;
}

static int default_success(const luaretry_outcome *o) {
  if (o->error) return 0;
  if (o->kind == LUARETRY_OUTCOME_COMMAND) return o->status == 0;
  return o->status >= 200 && o->status <= 399;
}

static void host_classify(lr_gen *g, const luaretry_outcome *o, const lr_attempt_ctx *ctx,
                          lr_verdict *v) {
  double wait = -1;
  v->cls = g->p->host_classify(g->p->host_ud, o, ctx->attempt, &wait);
  v->wait = wait >= 0 && isfinite(wait) ? wait : -1;
  v->rule = "host classifier";
  if (isnan(wait) || wait == INFINITY) { /* neither "the backoff" (< 0) nor a wait */
    lr_fmt(v->message, sizeof v->message,
           "the host classifier set a wait of %g (attempt %d): a wait is a finite number of "
           "seconds, 0 or more, or below 0 for the backoff",
           wait, ctx->attempt);
    v->cls = LUARETRY_CLASS_ERROR;
    return;
  }
  if (v->cls == LUARETRY_CLASS_THROTTLING) {
    v->cls = LUARETRY_CLASS_TRANSIENT;
    v->throttled = 1;
  }
  if (v->cls != LUARETRY_CLASS_SUCCESS && v->cls != LUARETRY_CLASS_FINAL &&
      v->cls != LUARETRY_CLASS_TRANSIENT) {
    /* ERROR, or a value outside the enum: a policy error with a message */
    lr_fmt(v->message, sizeof v->message, "the host classifier %s (attempt %d)",
           v->cls == LUARETRY_CLASS_ERROR ? "failed" : "returned an unknown class", ctx->attempt);
    v->cls = LUARETRY_CLASS_ERROR;
  }
}

/* A wait returned as a table, {wait = SECONDS, jitter = true, server = true},
 * at the top of the stack: 0, or -1 with the reason in v->message.  Raw
 * reads only, so no script code runs here, outside the sandbox's guard. */
static int read_wait_table(lua_State *L, lr_script *s, lr_verdict *v) {
  const char *bad = NULL, *what = "field ";
  lua_pushnil(L);
  while (!bad && lua_next(L, -2)) {
    const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
    int t = lua_type(L, -1);
    if (k && strcmp(k, "wait") == 0 && t == LUA_TNUMBER)
      v->wait = lua_tonumber(L, -1);
    else if (k && strcmp(k, "jitter") == 0 && t == LUA_TBOOLEAN)
      v->jitter = lua_toboolean(L, -1);
    else if (k && strcmp(k, "server") == 0 && t == LUA_TBOOLEAN)
      v->server = lua_toboolean(L, -1);
    else if (k)
      bad = k;
    else
      bad = "a key that is not a name", what = "";
    lua_pop(L, 1);
  }
  if (bad) {
    lua_pop(L, 1); /* the key lua_next left */
    lr_fmt(v->message, sizeof v->message,
           "%s: is_transient returned a table with %s%s "
           "(expected wait = seconds, jitter = true/false, server = true/false)",
           s->rule_is_transient, what, bad);
    return -1;
  }
  if (isfinite(v->wait) && v->wait >= 0) return 0;
  lr_fmt(v->message, sizeof v->message,
         "%s: is_transient returned a table without a valid "
         "wait (a finite number of seconds, 0 or more)",
         s->rule_is_transient);
  return -1;
}

/* A wait (a number or a table) at the top of the stack, as a verdict. */
static void read_wait(lua_State *L, lr_script *s, lr_verdict *v) {
  switch (lua_type(L, -1)) {
  case LUA_TNUMBER: {
    double w = lua_tonumber(L, -1);
    if (isfinite(w) && w >= 0) {
      v->cls = LUARETRY_CLASS_TRANSIENT;
      v->wait = w;
      return;
    }
    v->cls = LUARETRY_CLASS_ERROR;
    lr_fmt(v->message, sizeof v->message,
           "%s: is_transient returned %g (a wait must be a "
           "finite number of seconds, 0 or more)",
           s->rule_is_transient, w);
    return;
  }
  case LUA_TTABLE:
    v->cls = read_wait_table(L, s, v) == 0 ? LUARETRY_CLASS_TRANSIENT : LUARETRY_CLASS_ERROR;
    if (v->cls == LUARETRY_CLASS_ERROR) v->wait = -1, v->jitter = v->server = 0;
    return;
  default:
    v->cls = LUARETRY_CLASS_ERROR;
    lr_fmt(v->message, sizeof v->message,
           "%s: is_transient returned a %s (expected true, "
           "false, nil, a number of seconds or {wait = seconds, ...})",
           s->rule_is_transient, luaL_typename(L, -1));
  }
}

/* A final verdict's reason (is_transient's second value, a string) into
 * v->message, where the attempt line and --log-json find it. */
static void read_reason(lua_State *L, lr_verdict *v) {
  if (lua_type(L, -1) == LUA_TSTRING) {
    v->reason = 1;
    lr_strlcpy(v->message, lua_tostring(L, -1), sizeof v->message);
  }
}

/* is_transient's results, at the top of the stack (the verdict, then a
 * reason or nil), as a verdict; pops them. */
static void read_transient(lua_State *L, lr_script *s, lr_verdict *v) {
  v->rule = s->rule_is_transient;
  int t = lua_type(L, -2); /* read once: nil and false are alike final */
  if (t == LUA_TBOOLEAN || t == LUA_TNIL) {
    v->cls =
      t == LUA_TBOOLEAN && lua_toboolean(L, -2) ? LUARETRY_CLASS_TRANSIENT : LUARETRY_CLASS_FINAL;
    if (v->cls == LUARETRY_CLASS_FINAL) read_reason(L, v);
    lua_pop(L, 2);
    return;
  }
  lua_pop(L, 1); /* a reason counts only for a final verdict */
  read_wait(L, s, v);
  lua_pop(L, 1);
}

/* A yes-or-no hook's two results (a reason, ignored, with the verdict),
 * popped: 1 or 0, or -1 with v filled as a policy error. */
static int hook_boolean(lua_State *L, const char *fname, const char *rule, lr_verdict *v) {
  int t = lua_type(L, -2), yes = lua_toboolean(L, -2);
  lua_pop(L, 2);
  if (t == LUA_TBOOLEAN || t == LUA_TNIL) return yes;
  v->cls = LUARETRY_CLASS_ERROR;
  v->rule = rule;
  lr_fmt(v->message, sizeof v->message, "%s: %s returned a %s (expected true, false or nil)", rule,
         fname, lua_typename(L, t));
  return -1;
}

/* 1 when the script's is_success says success or failed (v filled). */
static int script_success(lua_State *L, lr_script *s, lr_verdict *v) {
  if (run_hook(s, SLOT_IS_SUCCESS, s->ref_is_success, s->bodiless_is_success, "is_success",
               s->rule_is_success, v))
    return 1;
  int yes = hook_boolean(L, "is_success", s->rule_is_success, v);
  if (yes < 0) return 1;
  if (!yes) return 0;
  v->cls = LUARETRY_CLASS_SUCCESS;
  v->rule = s->rule_is_success;
  return 1;
}

/* A transient outcome: throttling?  The script's is_throttling, or else
 * the engine's rule: an HTTP 429 (Too Many Requests) is. */
static void judge_throttling(lua_State *L, lr_script *s, lr_verdict *v) {
  const luaretry_outcome *o = s->cur;
  if (!s->ref_is_throttling) {
    v->throttled = o->kind != LUARETRY_OUTCOME_COMMAND && o->status == 429 && !o->error;
    return;
  }
  if (run_hook(s, 0, s->ref_is_throttling, 0, "is_throttling", s->rule_is_throttling, v)) return;
  int yes = hook_boolean(L, "is_throttling", s->rule_is_throttling, v);
  if (yes < 0) return;
  v->throttled = yes;
}

static void judge_in(lr_script *s, const luaretry_outcome *o, lr_verdict *v) {
  lua_State *L = s->sb->L;
  if (s->ref_is_success) {
    if (script_success(L, s, v)) return;
  } else if (default_success(o)) {
    v->cls = LUARETRY_CLASS_SUCCESS;
    v->rule = "default";
    return;
  }
  if (!s->ref_is_transient) {
    default_classify(o, v);
    if (v->cls == LUARETRY_CLASS_TRANSIENT && s->ref_is_throttling) judge_throttling(L, s, v);
    return;
  }
  if (run_hook(s, SLOT_IS_TRANSIENT, s->ref_is_transient, s->bodiless_is_transient, "is_transient",
               s->rule_is_transient, v))
    return;
  read_transient(L, s, v);
  if (v->cls != LUARETRY_CLASS_TRANSIENT) return;
  if (s->ref_is_throttling)
    judge_throttling(L, s, v);
  else /* the engine's rule, without a call */
    v->throttled = o->kind != LUARETRY_OUTCOME_COMMAND && o->status == 429 && !o->error;
}

static void judge_outcome(lr_gen *g, const luaretry_outcome *o, const lr_attempt_ctx *ctx,
                          lr_verdict *v) {
  if (g->p->host_classify) {
    host_classify(g, o, ctx, v);
    return;
  }
  if (!g->has_decision_hooks) { /* no state needed */
    if (default_success(o)) {
      v->cls = LUARETRY_CLASS_SUCCESS;
      v->rule = "default";
    } else {
      default_classify(o, v);
    }
    return;
  }
  lr_script *s = begin_call(g, o, ctx, ctx->rng, v->message, sizeof v->message);
  if (!s) {
    v->cls = LUARETRY_CLASS_ERROR;
    v->rule = "sandbox";
    return;
  }
  judge_in(s, o, v);
  end_call(s);
}

/* retry_all_errors (curl's --retry-all-errors), after whatever judged:
 * a final verdict is retried, so every policy takes it without declaring
 * it; but a body over its size limit (as large again).  A request that
 * may not be repeated (a POST without a key) is still not: the engine
 * stops a transient outcome of one (o->not_repeatable). */
static void retry_all(const luaretry_outcome *o, lr_verdict *v) {
  if (o->error && strcmp(o->error, "too_large") == 0) return;
  v->cls = LUARETRY_CLASS_TRANSIENT;
  v->rule = "retry_all_errors";
  v->reason = 0;
  v->message[0] = '\0';
}

static void classify(void *ud, const luaretry_outcome *o, const lr_attempt_ctx *ctx,
                     lr_verdict *v) {
  lr_gen *g = ud;
  judge_outcome(g, o, ctx, v);
  if (v->cls == LUARETRY_CLASS_FINAL && g->retry_all_errors) retry_all(o, v);
}

/* ---- backoff(n, previous) */

static int call_backoff(lua_State *L) {
  lr_script *s = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref_backoff);
  lua_pushinteger(L, s->backoff_n);
  lua_pushnumber(L, s->backoff_previous);
  lua_call(L, 2, 1);
  return 1;
}

static int backoff_result(lua_State *L, lr_script *s, double *wait, lr_verdict *v) {
  int isnum;
  double w = lua_tonumberx(L, -1, &isnum);
  int type = lua_type(L, -1);
  lua_pop(L, 1);
  if (type == LUA_TNUMBER && isnum && isfinite(w) && w >= 0) {
    *wait = w;
    return 0;
  }
  lr_fmt(v->message, sizeof v->message,
         "%s: backoff returned %s%s (expected a finite number "
         "of seconds, 0 or more)",
         s->rule_backoff, type == LUA_TNUMBER ? "" : "a ",
         type == LUA_TNUMBER ? "an invalid number" : lua_typename(L, type));
  return -1;
}

static int script_backoff(void *ud, const lr_attempt_ctx *ctx, long n, double previous,
                          double *wait, lr_verdict *v) {
  lr_script *s = begin_call(ud, NULL, ctx, ctx ? ctx->rng : NULL, v->message, sizeof v->message);
  if (!s) return -1;
  s->backoff_n = n;
  s->backoff_previous = previous;
  v->rule = s->rule_backoff;
  char err[sizeof v->message];
  luaretry_code rc = lr_sandbox_call(s->sb, call_backoff, s, 1, LUARETRY_E_POLICY, err, sizeof err);
  int r = -1;
  if (rc != LUARETRY_OK)
    lr_fmt(v->message, sizeof v->message, "backoff: %s", err);
  else
    r = backoff_result(s->sb->L, s, wait, v);
  end_call(s);
  return r;
}

/* ---- on_retry(info) */

static int call_on_retry(lua_State *L) {
  lr_script *s = lua_touserdata(L, 1);
  const luaretry_decision *d = s->cur_decision;
  const luaretry_outcome *o = s->cur;
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref_on_retry);
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, d->attempt);
  lua_setfield(L, -2, "attempt");
  lua_pushinteger(L, o->status);
  lua_setfield(L, -2, "status");
  if (o->error) {
    lua_pushstring(L, o->error);
    lua_setfield(L, -2, "error");
  }
  lua_pushnumber(L, d->wait);
  lua_setfield(L, -2, "delay");
  lua_pushnumber(L, d->elapsed);
  lua_setfield(L, -2, "elapsed");
  lua_pushstring(L, luaretry_wait_source_name(d->wait_source));
  lua_setfield(L, -2, "wait_source");
  lua_pushstring(L, d->rule);
  lua_setfield(L, -2, "rule");
  /* the rest (info.call, headers...) from the decision's info */
  lua_createtable(L, 0, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref_info);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_call(L, 1, 0);
  lr_script_keep_call(L, s);
  return 0;
}

static int on_retry(void *ud, const luaretry_outcome *o, const luaretry_decision *d,
                    const lr_attempt_ctx *ctx, char *err, size_t errlen) {
  if (!((lr_gen *)ud)->has_on_retry) return 0;
  lr_script *s = begin_call(ud, o, ctx, ctx ? ctx->rng : NULL, err, errlen);
  if (!s) return -1;
  s->cur_decision = d;
  char msg[512];
  luaretry_code rc =
    lr_sandbox_call(s->sb, call_on_retry, s, 0, LUARETRY_E_POLICY, msg, sizeof msg);
  s->call_made = 0;
  s->cur_decision = NULL;
  end_call(s);
  if (rc == LUARETRY_OK) return 0;
  lr_fmt(err, errlen, "on_retry: %s", msg);
  return -1;
}

/* ---- on_breaker(state) */

static int call_on_breaker(lua_State *L) {
  lr_script *s = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref_on_breaker);
  lua_pushstring(L, s->cur_breaker_state);
  lua_call(L, 1, 0);
  return 0;
}

luaretry_code lr_gen_call_on_breaker(lr_gen *g, const char *state, char *err, size_t errlen) {
  lr_script *s = begin_call(g, NULL, NULL, NULL, err, errlen);
  luaretry_code rc = LUARETRY_E_NOMEM;
  if (s) {
    s->cur_breaker_state = state;
    rc = s->ref_on_breaker
           ? lr_sandbox_call(s->sb, call_on_breaker, s, 0, LUARETRY_E_POLICY, err, errlen)
           : LUARETRY_OK;
    end_call(s);
  }
  return rc;
}

void lr_gen_on_breaker(lr_gen *g, const char *state) {
  char err[512];
  luaretry_code rc = lr_gen_call_on_breaker(g, state, err, sizeof err);
  const lr_log_target *log = &g->p->log;
  if (rc != LUARETRY_OK && log->fn) {
    char line[600];
    lr_fmt(line, sizeof line, "on_breaker: %s", err);
    log->fn(log->ud, line);
  }
}

static luaretry_code judge_prepare(void *ud, const luaretry_request *in, int attempt,
                                   luaretry_request *out, const lr_attempt_ctx *ctx, char *err,
                                   size_t errlen) {
  lr_gen *g = ud;
  lr_call_data *data = lr_attempt_data(ctx); /* made on first use */
  if (!data) return LUARETRY_E_NOMEM;
  /* a workflow's request is the script's own: not prepared again, but it
   * carries the policy's headers as every attempt does (attempt_header,
   * propagate: a retrying workflow tells the next service not to retry) */
  luaretry_code rc = LUARETRY_OK;
  if (ctx->request)
    *out = *in;
  else
    rc = lr_gen_prepare(g, in, attempt, out, &data->prepared, ctx, err, errlen);
  if (rc != LUARETRY_OK) return rc;
  return lr_add_policy_headers(&g->rules, attempt, ctx->call, out, &data->headers);
}

static luaretry_code judge_is_idempotent(void *ud, const luaretry_request *r, int *yes,
                                         const lr_attempt_ctx *ctx, char *err, size_t errlen) {
  return lr_gen_is_idempotent(ud, r, yes, ctx, err, errlen);
}

static void release(void *ud) { lr_gen_unref(ud); }

lr_judge lr_gen_judge(lr_gen *g) {
  lr_judge j = {
    g, classify, script_backoff, on_retry, judge_is_idempotent, judge_prepare, release
  };
  return j;
}
