/* callstore.c: info.call, a table that lasts exactly as long as a call.
 * A call's decisions may run in different Lua states (on different
 * threads), so between them the table lives in the call, in C memory, as
 * bytes: strings, numbers, booleans and tables of them, nested at most
 * MAX_DEPTH deep and MAX_BYTES in all.  Anything else (a function, a
 * coroutine) cannot outlive the state it was made in: an error says so. */
#include <lauxlib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

#define MAX_DEPTH 16
#define MAX_BYTES (1u << 20)

typedef struct {
  lua_State *L;
  char **box; /* the bytes so far, in a userdata that frees them if a
                      value cannot be kept and the save is abandoned */
  size_t len, cap;
} writer;

static void put(writer *w, const void *p, size_t n) {
  if (w->len + n > MAX_BYTES)
    luaL_error(w->L, "info.call holds more than %d bytes", (int)MAX_BYTES);
  if (w->len + n > w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 256;
    while (cap < w->len + n) cap *= 2;
    char *d = realloc(*w->box, cap);
    if (!d) luaL_error(w->L, "info.call: out of memory");
    *w->box = d;
    w->cap = cap;
  }
  memcpy(*w->box + w->len, p, n);
  w->len += n;
}

static void put_value(writer *w, int idx, int depth, const char *key);

static void put_table(writer *w, int idx, int depth) {
  lua_State *L = w->L;
  if (depth > MAX_DEPTH) luaL_error(L, "info.call: tables nested more than %d deep", MAX_DEPTH);
  luaL_checkstack(L, 3, "info.call");
  uint32_t count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) count++, lua_pop(L, 1);
  put(w, "t", 1);
  put(w, &count, sizeof count);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int k = lua_gettop(L) - 1;
    int kt = lua_type(L, k);
    if (kt != LUA_TSTRING && kt != LUA_TNUMBER && kt != LUA_TBOOLEAN)
      luaL_error(L,
                 "info.call: a key that is a %s cannot be kept (strings, numbers and "
                 "booleans can)",
                 luaL_typename(L, k));
    put_value(w, k, depth, NULL);
    lua_pushvalue(L, k); /* a name for the message, without touching the key */
    const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
    put_value(w, lua_gettop(L) - 1, depth + 1, name);
    lua_pop(L, 2);
  }
}

static void put_value(writer *w, int idx, int depth, const char *key) {
  lua_State *L = w->L;
  switch (lua_type(L, idx)) {
  case LUA_TBOOLEAN: {
    char b[2] = { 'b', (char)lua_toboolean(L, idx) };
    put(w, b, 2);
    return;
  }
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) {
      lua_Integer i = lua_tointeger(L, idx);
      put(w, "i", 1);
      put(w, &i, sizeof i);
    } else {
      lua_Number n = lua_tonumber(L, idx);
      put(w, "n", 1);
      put(w, &n, sizeof n);
    }
    return;
  case LUA_TSTRING: {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    uint32_t n = (uint32_t)len;
    if (len > MAX_BYTES) luaL_error(L, "info.call holds more than %d bytes", (int)MAX_BYTES);
    put(w, "s", 1);
    put(w, &n, sizeof n);
    put(w, s, len);
    return;
  }
  case LUA_TTABLE: put_table(w, lua_absindex(L, idx), depth + 1); return;
  default:
    luaL_error(L,
               "info.call%s%s: a %s cannot be kept between attempts (strings, numbers, "
               "booleans and tables of them can)",
               key ? "." : "", key ? key : "", luaL_typename(L, idx));
  }
}

typedef struct {
  lua_State *L;
  const char *at, *end;
} reader;

static void take(reader *r, void *p, size_t n) {
  if ((size_t)(r->end - r->at) < n) luaL_error(r->L, "info.call: damaged");
  memcpy(p, r->at, n);
  r->at += n;
}

static void push_value(reader *r, int depth) {
  lua_State *L = r->L;
  luaL_checkstack(L, 3, "info.call");
  char tag;
  take(r, &tag, 1);
  switch (tag) {
  case 'b': {
    char b;
    take(r, &b, 1);
    lua_pushboolean(L, b);
    return;
  }
  case 'i': {
    lua_Integer i;
    take(r, &i, sizeof i);
    lua_pushinteger(L, i);
    return;
  }
  case 'n': {
    lua_Number n;
    take(r, &n, sizeof n);
    lua_pushnumber(L, n);
    return;
  }
  case 's': {
    uint32_t n;
    take(r, &n, sizeof n);
    if ((size_t)(r->end - r->at) < n) luaL_error(L, "info.call: damaged");
    lua_pushlstring(L, r->at, n);
    r->at += n;
    return;
  }
  case 't': {
    uint32_t count;
    take(r, &count, sizeof count);
    lua_createtable(L, 0, (int)(count < 64 ? count : 64));
    for (uint32_t k = 0; k < count; k++) {
      push_value(r, depth + 1);
      push_value(r, depth + 1);
      lua_rawset(L, -3);
    }
    return;
  }
  }
  luaL_error(L, "info.call: damaged");
}

void lr_callstore_push(lua_State *L, lr_call_data *data) {
  if (!data || !data->blob) {
    lua_newtable(L);
    return;
  }
  reader r = { L, data->blob, data->blob + data->blob_len };
  push_value(&r, 0);
}

static int free_box(lua_State *L) {
  char **box = lua_touserdata(L, 1);
  free(*box);
  *box = NULL;
  return 0;
}

void lr_callstore_save(lua_State *L, int idx, lr_call_data *data) {
  idx = lua_absindex(L, idx);
  char **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, free_box); /* C: runs with hooks off, and ends */
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  writer w = { L, box, 0, 0 };
  put_table(&w, idx, 1);
  free(data->blob);
  data->blob = *box;
  data->blob_len = w.len;
  *box = NULL;
  lua_pop(L, 1);
}

void lr_script_push_call(lua_State *L, lr_script *s) {
  if (s->call_made) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref_call);
    return;
  }
  lr_callstore_push(L, s->cur_ctx->data);
  lua_pushvalue(L, -1);
  if (s->ref_call == LUA_NOREF)
    s->ref_call = luaL_ref(L, LUA_REGISTRYINDEX);
  else
    lua_rawseti(L, LUA_REGISTRYINDEX, s->ref_call);
  s->call_made = 1;
}

void lr_script_keep_call(lua_State *L, lr_script *s) {
  if (!s->call_made) return;
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref_call);
  lr_call_data *data = lr_attempt_data(s->cur_ctx);    /* made on first use */
  if (data) lr_callstore_save(L, lua_gettop(L), data); /* else out of memory: kept as was */
  lua_pop(L, 1);
  lua_pushnil(L);
  lua_rawseti(L, LUA_REGISTRYINDEX, s->ref_call);
  s->call_made = 0;
}
