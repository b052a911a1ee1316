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
  double w = o->retry_after;
  if (rate_limit) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    w = luaretry_rate_limit(o->headers, o->header_count,
                            (double)now.tv_sec + (double)now.tv_nsec * 1e-9);
  }
  if (!(w >= 0)) return 0;
  lua_pushnumber(L, w);
  return 1;
}

int lr_info_index(lua_State *L) {
  lr_script *s = lua_touserdata(L, lua_upvalueindex(1));
  const char *k = lua_tostring(L, 2);
  const luaretry_outcome *o = s->cur;
  if (!k || !s->cur_ctx) return 0;
  if (strcmp(k, "attempt") == 0)
    lua_pushinteger(L, s->cur_ctx->attempt);
  else if (strcmp(k, "elapsed") == 0)
    lua_pushnumber(L, s->cur_ctx->elapsed);
  else if (strcmp(k, "call") == 0 && s->cur_ctx->data)
    lr_script_push_call(L, s);
  else if (strcmp(k, "hedge") == 0)
    lua_pushboolean(L, s->cur_ctx->hedge);
  else if (strcmp(k, "invocation_id") == 0 && s->cur_ctx->call)
    lua_pushstring(L, luaretry_call_invocation_id(s->cur_ctx->call));
  else if (!o)
    return 0;
  else if (strcmp(k, "error") == 0)
    push_string_or_nil(L, o->error);
  else if (strcmp(k, "error_detail") == 0)
    push_string_or_nil(L, o->error_detail);
  else if (strcmp(k, "method") == 0)
    push_string_or_nil(L, o->method);
  else if (strcmp(k, "url") == 0)
    push_string_or_nil(L, o->url);
  else if (strcmp(k, "workflow") == 0)
    lua_pushboolean(L, o->workflow);
  else if (strcmp(k, "kind") == 0)
    lua_pushstring(L, o->kind == LUARETRY_OUTCOME_COMMAND ? "command" : "http");
  else if (strcmp(k, "headers") == 0)
    push_headers(L, s);
  else if (strcmp(k, "retry_after") == 0)
    return push_wait(L, o, 0);
  else if (strcmp(k, "rate_limit") == 0)
    return push_wait(L, o, 1);
  else
    return 0;
  return 1;
}

int lr_info_newindex(lua_State *L) {
  return luaL_error(L, "info is read-only (keep what a call needs in info.call)");
}
