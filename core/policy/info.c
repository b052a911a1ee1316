/* info.c: `info`, the third argument of is_transient (and of prepare): a
 * read-only proxy (a userdata, so no rawset reaches it) whose fields are
 * read from the call into the script in progress, so what a script does
 * not read costs nothing. */
#include <lauxlib.h>
#include <string.h>
#include <time.h>

#include "policy.h"

/* The outcome's headers as a table, lower-case names, the first of a
 * repeated name; made once per decision, on first use. */
static void push_headers(lua_State *L, lr_script *s) {
  if (s->headers_generation == s->generation && s->ref_headers != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref_headers);
    return;
  }
  const luaretry_outcome *o = s->cur;
  lua_createtable(L, 0, (int)o->header_count);
  for (size_t i = 0; i < o->header_count; i++) {
    const char *name = o->headers[i].name ? o->headers[i].name : "";
    size_t len = strlen(name);
    luaL_Buffer lb;
    char *lower = luaL_buffinitsize(L, &lb, len);
    for (size_t k = 0; k < len; k++)
      lower[k] = name[k] >= 'A' && name[k] <= 'Z' ? (char)(name[k] + 32) : name[k];
    luaL_pushresultsize(&lb, len);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, -3) != LUA_TNIL) {
      lua_pop(L, 2);
      continue;
    }
    lua_pop(L, 1);
    lua_pushstring(L, o->headers[i].value ? o->headers[i].value : "");
    lua_rawset(L, -3);
  }
  lua_pushvalue(L, -1);
  if (s->ref_headers == LUA_NOREF)
    s->ref_headers = luaL_ref(L, LUA_REGISTRYINDEX);
  else
    lua_rawseti(L, LUA_REGISTRYINDEX, s->ref_headers);
  s->headers_generation = s->generation;
}

static void push_string_or_nil(lua_State *L, const char *v) {
  if (v)
    lua_pushstring(L, v);
  else
    lua_pushnil(L);
}

/* The engine's readers of the server's wait: Retry-After as the engine
 * took it, the rate-limit fields read now; nil when there is none. */
static int push_wait(lua_State *L, const luaretry_outcome *o, int rate_limit) {
  if (rate_limit && !o->header_count) return 0; /* no headers: no clock read */
  double w = o->retry_after;
  if (rate_limit) luaretry_rate_limit(o->headers, o->header_count, 0, &w); /* 0: the wall clock */
  if (!(w >= 0)) return 0;
  lua_pushnumber(L, w);
  return 1;
}

/* info's fields.  A script reads one or two of them per decision, each
 * read a call into C: the name is found by its length, then a memcmp or
 * two, not a strcmp down a list (the last name cost 14 strcmps). */
enum {
  K_ATTEMPT,
  K_ELAPSED,
  K_CALL,
  K_HEDGE,
  K_INVOCATION_ID,
  K_ERROR,
  K_ERROR_DETAIL,
  K_METHOD,
  K_URL,
  K_WORKFLOW,
  K_KIND,
  K_HEADERS,
  K_RETRY_AFTER,
  K_RATE_LIMIT,
  K_NONE
};

static int field_of(const char *k, size_t len) {
#define IS(name) (memcmp(k, name, sizeof name - 1) == 0)
  switch (len) {
  case 3: return IS("url") ? K_URL : K_NONE;
  case 4: return IS("call") ? K_CALL : IS("kind") ? K_KIND : K_NONE;
  case 5: return IS("error") ? K_ERROR : IS("hedge") ? K_HEDGE : K_NONE;
  case 6: return IS("method") ? K_METHOD : K_NONE;
  case 7:
    return IS("attempt")   ? K_ATTEMPT
           : IS("elapsed") ? K_ELAPSED
           : IS("headers") ? K_HEADERS
                           : K_NONE;
  case 8: return IS("workflow") ? K_WORKFLOW : K_NONE;
  case 10: return IS("rate_limit") ? K_RATE_LIMIT : K_NONE;
  case 11: return IS("retry_after") ? K_RETRY_AFTER : K_NONE;
  case 12: return IS("error_detail") ? K_ERROR_DETAIL : K_NONE;
  case 13: return IS("invocation_id") ? K_INVOCATION_ID : K_NONE;
  }
  return K_NONE;
#undef IS
}

/* The fields that need no outcome (a backoff or prepare has none). */
static int push_ctx_field(lua_State *L, lr_script *s, int key) {
  const lr_attempt_ctx *ctx = s->cur_ctx;
  switch (key) {
  case K_ATTEMPT: lua_pushinteger(L, ctx->attempt); return 1;
  case K_ELAPSED: lua_pushnumber(L, ctx->elapsed); return 1;
  case K_HEDGE: lua_pushboolean(L, ctx->hedge); return 1;
  case K_CALL:
    if (!ctx->data && !ctx->call) return 0;
    lr_script_push_call(L, s);
    return 1;
  case K_INVOCATION_ID:
    if (!ctx->call) return 0;
    lua_pushstring(L, luaretry_call_invocation_id(ctx->call));
    return 1;
  }
  return -1; /* an outcome's field */
}

int lr_info_index(lua_State *L) {
  size_t len;
  const char *k = lua_tolstring(L, 2, &len); /* a number key is no name either */
  /* two loads (an upvalue's index costs ~30), after the call: one
   * register less kept across it */
  lr_script *s = lr_sandbox_of(L)->owner;
  const luaretry_outcome *o = s->cur;
  if (!k || !s->cur_ctx) return 0;
  int key = field_of(k, len), pushed = push_ctx_field(L, s, key);
  if (pushed >= 0 || !o) return pushed > 0;
  switch (key) {
  case K_ERROR: push_string_or_nil(L, o->error); return 1;
  case K_ERROR_DETAIL: push_string_or_nil(L, o->error_detail); return 1;
  case K_METHOD: push_string_or_nil(L, o->method); return 1;
  case K_URL: push_string_or_nil(L, o->url); return 1;
  case K_WORKFLOW: lua_pushboolean(L, o->workflow); return 1;
  case K_KIND:
    lua_pushstring(L, o->kind == LUARETRY_OUTCOME_COMMAND ? "command" : "http");
    return 1;
  case K_HEADERS: push_headers(L, s); return 1;
  case K_RETRY_AFTER: return push_wait(L, o, 0);
  case K_RATE_LIMIT: return push_wait(L, o, 1);
  }
  return 0;
}

int lr_info_newindex(lua_State *L) {
  return luaL_error(L, "info is read-only (keep what a call needs in info.call)");
}
