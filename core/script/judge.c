/* judge.c: the calls into the script on each decision (is_success,
 * is_transient, backoff, on_retry) and on each request (is_idempotent,
 * prepare), each under protection and the sandbox's limits. */
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

/* ---- the calls into the script on each decision */

static void push_headers(lua_State *L, lr_script *p) {
  if (p->headers_generation == p->generation && p->ref_headers != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, p->ref_headers);
    return;
  }
  const luaretry_outcome *o = p->cur;
  lua_createtable(L, 0, (int)o->header_count);
  for (size_t i = 0; i < o->header_count; i++) {
    /* Scripts are promised lower-case names, whatever the host passed. */
    const char *name = o->headers[i].name ? o->headers[i].name : "";
    size_t len = strlen(name);
    luaL_Buffer lb;
    char *lower = luaL_buffinitsize(L, &lb, len);
    for (size_t k = 0; k < len; k++)
      lower[k] = name[k] >= 'A' && name[k] <= 'Z' ? (char)(name[k] + 32) : name[k];
    luaL_pushresultsize(&lb, len);
    lua_pushstring(L, o->headers[i].value ? o->headers[i].value : "");
    lua_rawset(L, -3);
  }
  lua_pushvalue(L, -1);
  if (p->ref_headers == LUA_NOREF) p->ref_headers = luaL_ref(L, LUA_REGISTRYINDEX);
  else lua_rawseti(L, LUA_REGISTRYINDEX, p->ref_headers);
  p->headers_generation = p->generation;
}

int lr_info_index(lua_State *L) {
  lr_script *p = lua_touserdata(L, lua_upvalueindex(1));
  const char *k = lua_tostring(L, 2);
  const luaretry_outcome *o = p->cur;
  if (!k || !o) return 0;
  if (strcmp(k, "attempt") == 0) lua_pushinteger(L, p->cur_ctx->attempt);
  else if (strcmp(k, "elapsed") == 0) lua_pushnumber(L, p->cur_ctx->elapsed);
  else if (strcmp(k, "error") == 0) o->error ? (void)lua_pushstring(L, o->error) : lua_pushnil(L);
  else if (strcmp(k, "method") == 0) o->method ? (void)lua_pushstring(L, o->method) : lua_pushnil(L);
  else if (strcmp(k, "url") == 0) o->url ? (void)lua_pushstring(L, o->url) : lua_pushnil(L);
  else if (strcmp(k, "workflow") == 0) lua_pushboolean(L, o->workflow);
  else if (strcmp(k, "kind") == 0)
    lua_pushstring(L, o->kind == LUARETRY_OUTCOME_COMMAND ? "command" : "http");
  else if (strcmp(k, "headers") == 0) push_headers(L, p);
  else return 0;
  return 1;
}

static int call_classifier(lua_State *L) {
  lr_script *p = lua_touserdata(L, 1);
  const luaretry_outcome *o = p->cur;
  size_t len = o->body ? o->body_len : 0;
  if (len > p->body_limit) len = p->body_limit;
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->cur_fn);
  lua_pushinteger(L, o->status);
  lua_pushlstring(L, o->body ? o->body : "", len);
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->ref_info);
  lua_call(L, 3, 1);
  return 1;
}

static const char *luatype_of_result(lua_State *L) {
  return lua_typename(L, lua_type(L, -1));
}

/* Runs is_success or is_transient; 0 with the result on the stack, or -1
 * with v filled as a policy error. */
static int run_hook(lr_script *p, int ref, const char *fname,
                    const char *rule, lr_verdict *v) {
  p->cur_fn = ref;
  char err[sizeof v->message];
  luaretry_code rc = lr_sandbox_call(p->sb, call_classifier, p, 1,
                                     LUARETRY_E_POLICY, err, sizeof err);
  if (rc == LUARETRY_OK) return 0;
  v->cls = LUARETRY_CLASS_ERROR;
  v->rule = rule;
  lr_fmt(v->message, sizeof v->message, "%s: %s", fname, err);
  return -1;
}

static void default_classify(const luaretry_outcome *o, lr_verdict *v) {
  v->rule = "default";
  if (o->kind == LUARETRY_OUTCOME_COMMAND) {
    v->cls = o->status == 0 ? LUARETRY_CLASS_SUCCESS : LUARETRY_CLASS_TRANSIENT;
    return;
  }
  switch (o->status) {
  case 0: case 408: case 429: case 500: case 502: case 503: case 504:
    v->cls = LUARETRY_CLASS_TRANSIENT;
    return;
  }
  v->cls = o->error ? LUARETRY_CLASS_TRANSIENT : LUARETRY_CLASS_FINAL;
}

static int default_success(const luaretry_outcome *o) {
  if (o->error) return 0;
  if (o->kind == LUARETRY_OUTCOME_COMMAND) return o->status == 0;
  return o->status >= 200 && o->status <= 399;
}

static void classify(void *ud, const luaretry_outcome *o, const lr_attempt_ctx *ctx,
                     lr_verdict *v) {
  lr_script *p = ud;
  if (p->p->host_classify) {
    double wait = -1;
    v->cls = p->p->host_classify(p->p->host_ud, o, ctx->attempt, &wait);
    v->wait = wait >= 0 && isfinite(wait) ? wait : -1;
    v->rule = "host classifier";
    if (v->cls != LUARETRY_CLASS_SUCCESS && v->cls != LUARETRY_CLASS_FINAL &&
        v->cls != LUARETRY_CLASS_TRANSIENT) {
      /* ERROR, or a value outside the enum: a policy error with a message */
      lr_fmt(v->message, sizeof v->message, "the host classifier %s "
             "(attempt %d)", v->cls == LUARETRY_CLASS_ERROR ? "failed"
             : "returned an unknown class", ctx->attempt);
      v->cls = LUARETRY_CLASS_ERROR;
    }
    return;
  }
  lua_State *L = p->sb->L;
  p->cur = o;
  p->cur_ctx = ctx;
  p->generation++;
  if (p->ref_is_success) {
    if (run_hook(p, p->ref_is_success, "is_success", p->rule_is_success, v)) goto done;
    int t = lua_type(L, -1), yes = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (t != LUA_TBOOLEAN && t != LUA_TNIL) {
      v->cls = LUARETRY_CLASS_ERROR;
      v->rule = p->rule_is_success;
      lr_fmt(v->message, sizeof v->message, "%s: is_success returned a %s "
               "(expected true, false or nil)", p->rule_is_success, lua_typename(L, t));
      goto done;
    }
    if (yes) {
      v->cls = LUARETRY_CLASS_SUCCESS;
      v->rule = p->rule_is_success;
      goto done;
    }
  } else if (default_success(o)) {
    v->cls = LUARETRY_CLASS_SUCCESS;
    v->rule = "default";
    goto done;
  }
  if (!p->ref_is_transient) {
    default_classify(o, v);
    goto done;
  }
  if (run_hook(p, p->ref_is_transient, "is_transient", p->rule_is_transient, v)) goto done;
  v->rule = p->rule_is_transient;
  switch (lua_type(L, -1)) {
  case LUA_TBOOLEAN:
    v->cls = lua_toboolean(L, -1) ? LUARETRY_CLASS_TRANSIENT : LUARETRY_CLASS_FINAL;
    break;
  case LUA_TNIL:
    v->cls = LUARETRY_CLASS_FINAL;
    break;
  case LUA_TNUMBER: {
    double w = lua_tonumber(L, -1);
    if (isfinite(w) && w >= 0) {
      v->cls = LUARETRY_CLASS_TRANSIENT;
      v->wait = w;
      break;
    }
    v->cls = LUARETRY_CLASS_ERROR;
    lr_fmt(v->message, sizeof v->message, "%s: is_transient returned %g "
             "(a wait must be a finite number of seconds, 0 or more)",
             p->rule_is_transient, w);
    break;
  }
  default:
    v->cls = LUARETRY_CLASS_ERROR;
    lr_fmt(v->message, sizeof v->message, "%s: is_transient returned a %s "
             "(expected true, false, nil or a number of seconds)",
             p->rule_is_transient, luatype_of_result(L));
    break;
  }
  lua_pop(L, 1);
done:
  p->cur = NULL;
}

static int call_backoff(lua_State *L) {
  lr_script *p = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->ref_backoff);
  lua_pushinteger(L, p->backoff_n);
  lua_pushnumber(L, p->backoff_previous);
  lua_call(L, 2, 1);
  return 1;
}

static int script_backoff(void *ud, long n, double previous, double *wait,
                          lr_verdict *v) {
  lr_script *p = ud;
  p->backoff_n = n;
  p->backoff_previous = previous;
  char err[sizeof v->message];
  v->rule = p->rule_backoff;
  luaretry_code rc = lr_sandbox_call(p->sb, call_backoff, p, 1, LUARETRY_E_POLICY,
                                     err, sizeof err);
  if (rc != LUARETRY_OK) {
    lr_fmt(v->message, sizeof v->message, "backoff: %s", err);
    return -1;
  }
  lua_State *L = p->sb->L;
  int isnum;
  double w = lua_tonumberx(L, -1, &isnum);
  int type = lua_type(L, -1);
  lua_pop(L, 1);
  if (type == LUA_TNUMBER && isnum && isfinite(w) && w >= 0) {
    *wait = w;
    return 0;
  }
  lr_fmt(v->message, sizeof v->message, "%s: backoff returned %s%s (expected a "
           "finite number of seconds, 0 or more)", p->rule_backoff,
           type == LUA_TNUMBER ? "" : "a ", type == LUA_TNUMBER ? "an invalid number"
                                                                : lua_typename(L, type));
  return -1;
}

static int call_on_retry(lua_State *L) {
  lr_script *p = lua_touserdata(L, 1);
  const luaretry_decision *d = p->cur_decision;
  const luaretry_outcome *o = p->cur;
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->ref_on_retry);
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, d->attempt); lua_setfield(L, -2, "attempt");
  lua_pushinteger(L, o->status); lua_setfield(L, -2, "status");
  if (o->error) { lua_pushstring(L, o->error); lua_setfield(L, -2, "error"); }
  lua_pushnumber(L, d->wait); lua_setfield(L, -2, "delay");
  lua_pushnumber(L, d->elapsed); lua_setfield(L, -2, "elapsed");
  lua_pushstring(L, luaretry_wait_source_name(d->wait_source));
  lua_setfield(L, -2, "wait_source");
  lua_pushstring(L, d->rule); lua_setfield(L, -2, "rule");
  lua_call(L, 1, 0);
  return 0;
}

static const char *on_retry(void *ud, const luaretry_outcome *o,
                            const luaretry_decision *d) {
  lr_script *p = ud;
  p->cur = o;
  p->cur_decision = d;
  char err[sizeof p->hook_error - 16];
  luaretry_code rc = lr_sandbox_call(p->sb, call_on_retry, p, 0, LUARETRY_E_POLICY,
                                     err, sizeof err);
  p->cur = NULL;
  if (rc == LUARETRY_OK) return NULL;
  lr_fmt(p->hook_error, sizeof p->hook_error, "on_retry: %s", err);
  return p->hook_error;
}

static luaretry_code judge_is_idempotent(void *ud, const luaretry_request *r, int *yes,
                                         char *err, size_t errlen) {
  lr_script *p = ud;
  luaretry_code rc = lr_script_is_idempotent(p, r, yes);
  if (rc != LUARETRY_OK) lr_strlcpy(err, p->errmsg, errlen);
  return rc;
}

static luaretry_code judge_prepare(void *ud, const luaretry_request *in, int attempt,
                                   luaretry_request *out, char *err, size_t errlen) {
  lr_script *p = ud;
  luaretry_code rc = lr_script_prepare(p, in, attempt, out);
  if (rc != LUARETRY_OK) lr_strlcpy(err, p->errmsg, errlen);
  return rc;
}

lr_judge lr_script_judge(lr_script *p) {
  lr_judge j = { p, classify, NULL, NULL, judge_is_idempotent, judge_prepare, NULL };
  if (p->ref_backoff) j.backoff = script_backoff;
  if (p->ref_on_retry) j.on_retry = on_retry;
  return j;
}

/* ---- requests: is_idempotent(request) and prepare(request, attempt) */

static void push_request(lua_State *L, const luaretry_request *r) {
  lua_createtable(L, 0, 4);
  if (r->method) { lua_pushstring(L, r->method); lua_setfield(L, -2, "method"); }
  if (r->url) { lua_pushstring(L, r->url); lua_setfield(L, -2, "url"); }
  if (r->body) { lua_pushlstring(L, r->body, r->body_len); lua_setfield(L, -2, "body"); }
  lua_createtable(L, 0, (int)r->header_count);
  for (size_t i = 0; i < r->header_count; i++) {
    lua_pushstring(L, r->headers[i].value ? r->headers[i].value : "");
    lua_setfield(L, -2, r->headers[i].name);
  }
  lua_setfield(L, -2, "headers");
}

static int call_is_idempotent(lua_State *L) {
  lr_script *p = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->ref_is_idempotent);
  push_request(L, p->cur_request);
  lua_call(L, 1, 1);
  return 1;
}

static int method_is_idempotent(const char *m) {
  static const char *const safe[] = { "GET", "HEAD", "OPTIONS", "PUT", "DELETE", NULL };
  if (!m) return 1;  /* no method: a GET */
  for (int i = 0; safe[i]; i++)
    if (strcmp(m, safe[i]) == 0) return 1;
  return 0;
}

luaretry_code lr_script_is_idempotent(lr_script *p,
                                            const luaretry_request *r,
                                            int *idempotent) {
  if (!p || !r || !idempotent) return LUARETRY_E_ARG;
  if (!p->sb) return LUARETRY_E_STATE;
  if (!p->ref_is_idempotent) {
    *idempotent = method_is_idempotent(r->method);
    return LUARETRY_OK;
  }
  p->cur_request = r;
  char err[1024];
  luaretry_code rc = lr_sandbox_call(p->sb, call_is_idempotent, p, 1,
                                     LUARETRY_E_POLICY, err, sizeof err);
  p->cur_request = NULL;
  if (rc != LUARETRY_OK) {
    lr_fmt(p->errmsg, sizeof p->errmsg, "is_idempotent: %s", err);
    return rc;
  }
  lua_State *L = p->sb->L;
  int t = lua_type(L, -1);
  *idempotent = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (t != LUA_TBOOLEAN && t != LUA_TNIL) {
    lr_fmt(p->errmsg, sizeof p->errmsg, "%s: is_idempotent returned a %s "
           "(expected true, false or nil)", p->rule_is_idempotent, lua_typename(L, t));
    return LUARETRY_E_POLICY;
  }
  return LUARETRY_OK;
}

void lr_free_prepared(lr_script *p) {
  free(p->prep_method);
  free(p->prep_url);
  free(p->prep_body);
  for (size_t i = 0; i < p->prep_header_count; i++) {
    free((char *)p->prep_headers[i].name);
    free((char *)p->prep_headers[i].value);
  }
  free(p->prep_headers);
  p->prep_method = p->prep_url = p->prep_body = NULL;
  p->prep_headers = NULL;
  p->prep_header_count = p->prep_body_len = 0;
}

static char *copy_field(lua_State *L, int t, const char *k, size_t *len) {
  char *copy = NULL;
  if (lua_getfield(L, t, k) == LUA_TSTRING) {
    size_t n;
    const char *s = lua_tolstring(L, -1, &n);
    copy = malloc(n + 1);
    if (copy) memcpy(copy, s, n + 1);
    if (len) *len = n;
  }
  lua_pop(L, 1);
  return copy;
}

/* Copies the request table at the top into p->prep_* (in C memory: Lua's
 * strings may be collected once the table is dropped). */
static int call_prepare(lua_State *L) {
  lr_script *p = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->ref_prepare);
  push_request(L, p->cur_request);
  lua_pushvalue(L, -1);
  lua_insert(L, -3);                       /* keep the table below the call */
  lua_pushinteger(L, p->cur_attempt);
  lua_call(L, 2, 1);
  if (lua_istable(L, -1)) lua_replace(L, -2);  /* a returned table wins */
  else lua_pop(L, 1);
  int t = lua_gettop(L);
  if (lua_getfield(L, t, "url") != LUA_TSTRING)
    return luaL_error(L, "prepare: request.url must be a string");
  lua_pop(L, 1);
  p->prep_method = copy_field(L, t, "method", NULL);
  p->prep_url = copy_field(L, t, "url", NULL);
  p->prep_body = copy_field(L, t, "body", &p->prep_body_len);
  if (lua_getfield(L, t, "headers") == LUA_TTABLE) {
    size_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, -2)) n++, lua_pop(L, 1);
    p->prep_headers = calloc(n ? n : 1, sizeof *p->prep_headers);
    if (!p->prep_headers) return luaL_error(L, "prepare: out of memory");
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
        return luaL_error(L, "prepare: request.headers must map names to strings");
      luaretry_header *h = &p->prep_headers[p->prep_header_count++];
      h->name = strdup(lua_tostring(L, -2));
      h->value = strdup(lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  }
  return 0;
}

luaretry_code lr_script_prepare(lr_script *p, const luaretry_request *in,
                                      int attempt, luaretry_request *out) {
  if (!p || !in || !out) return LUARETRY_E_ARG;
  if (!p->sb) return LUARETRY_E_STATE;
  *out = *in;
  if (!p->ref_prepare) return LUARETRY_OK;
  lr_free_prepared(p);
  p->cur_request = in;
  p->cur_attempt = attempt;
  char err[1024];
  luaretry_code rc = lr_sandbox_call(p->sb, call_prepare, p, 0, LUARETRY_E_POLICY,
                                     err, sizeof err);
  p->cur_request = NULL;
  if (rc != LUARETRY_OK) {
    lr_free_prepared(p);
    lr_fmt(p->errmsg, sizeof p->errmsg, "prepare: %s", err);
    return rc;
  }
  for (size_t i = 0; i < p->prep_header_count; i++)
    if (!p->prep_headers[i].name || !p->prep_headers[i].value) {
      lr_free_prepared(p);
      return LUARETRY_E_NOMEM;
    }
  out->method = p->prep_method ? p->prep_method : in->method;
  out->url = p->prep_url;
  out->headers = p->prep_headers;
  out->header_count = p->prep_header_count;
  out->body = p->prep_body;
  out->body_len = p->prep_body_len;
  return LUARETRY_OK;
}

/* ---- on_breaker(state): told of each change of the breaker */

static int call_on_breaker(lua_State *L) {
  lr_script *p = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->ref_on_breaker);
  lua_pushstring(L, p->cur_breaker_state);
  lua_call(L, 1, 0);
  return 0;
}

void lr_script_on_breaker(lr_script *p, const char *state) {
  p->cur_breaker_state = state;
  char err[512];
  if (lr_sandbox_call(p->sb, call_on_breaker, p, 0, LUARETRY_E_POLICY, err, sizeof err) !=
          LUARETRY_OK && p->sb->log) {
    char line[600];
    lr_fmt(line, sizeof line, "on_breaker: %s", err);
    p->sb->log(p->sb->log_ud, line);
  }
}
