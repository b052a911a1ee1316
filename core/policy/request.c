/* request.c: the script's is_idempotent(request) and prepare(request,
 * attempt, info), each in a state borrowed from the load.  A request as a
 * script sees it: method, url, headers, body_len (the whole body's length)
 * and body (its first body_limit bytes, so an upload of any size costs the
 * script nothing).  What prepare leaves is checked (http or https only; no
 * line break or NUL where it would split the request) and copied into one
 * block of C memory the caller owns. */
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "policy.h"

static void push_request(lua_State *L, const luaretry_request *r, size_t body_limit) {
  lua_createtable(L, 0, 5);
  if (r->method) {
    lua_pushstring(L, r->method);
    lua_setfield(L, -2, "method");
  }
  if (r->url) {
    lua_pushstring(L, r->url);
    lua_setfield(L, -2, "url");
  }
  if (r->body) {
    lua_pushlstring(L, r->body, r->body_len < body_limit ? r->body_len : body_limit);
    lua_setfield(L, -2, "body");
  }
  lua_pushinteger(L, (lua_Integer)(r->body ? r->body_len : 0));
  lua_setfield(L, -2, "body_len");
  lua_createtable(L, 0, (int)r->header_count);
  for (size_t i = 0; i < r->header_count; i++) {
    if (!r->headers[i].value) continue; /* removed (curl's -H 'Name:'): not a header */
    lua_pushstring(L, r->headers[i].value);
    lua_setfield(L, -2, r->headers[i].name);
  }
  lua_setfield(L, -2, "headers");
}

static int method_is_idempotent(const char *m) {
  static const char *const safe[] = { "GET", "HEAD", "OPTIONS", "PUT", "DELETE", NULL };
  if (!m) return 1; /* no method: a GET */
  for (int i = 0; safe[i]; i++)
    if (strcmp(m, safe[i]) == 0) return 1;
  return 0;
}

static int call_is_idempotent(lua_State *L) {
  lr_script *s = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref_is_idempotent);
  push_request(L, s->cur_request, s->gen->body_limit);
  lua_call(L, 1, 1);
  return 1;
}

/* A request built with a slip (a count that takes in a {NULL, NULL}
 * sentinel, or headers NULL with a count) is refused naming it: the script
 * and the propagate headers read every name. */
static luaretry_code check_request(const luaretry_request *r, char *err, size_t errlen) {
  if (r->header_count && !r->headers) {
    lr_fmt(err, errlen, "the request has %zu headers and no array of them (headers NULL)",
           r->header_count);
    return LUARETRY_E_ARG;
  }
  for (size_t i = 0; i < r->header_count; i++)
    if (!r->headers[i].name) {
      lr_fmt(err, errlen, "the request's header %zu of %zu has a NULL name", i + 1,
             r->header_count);
      return LUARETRY_E_ARG;
    }
  return LUARETRY_OK;
}

luaretry_code lr_gen_is_idempotent(lr_gen *g, const luaretry_request *r, int *yes,
                                   const lr_attempt_ctx *ctx, char *err, size_t errlen) {
  luaretry_code bad = check_request(r, err, errlen);
  if (bad != LUARETRY_OK) return bad;
  lr_script *s = lr_gen_borrow(g, err, errlen);
  if (!s) return LUARETRY_E_NOMEM;
  if (!s->ref_is_idempotent) {
    lr_gen_return(s);
    *yes = method_is_idempotent(r->method);
    return LUARETRY_OK;
  }
  s->cur_request = r;
  s->cur_call = ctx ? ctx->call : NULL; /* not cur_ctx: no info here */
  char msg[1024];
  luaretry_code rc =
    lr_sandbox_call(s->sb, call_is_idempotent, s, 1, LUARETRY_E_POLICY, msg, sizeof msg);
  s->cur_request = NULL;
  s->cur_call = NULL;
  if (rc != LUARETRY_OK) {
    lr_fmt(err, errlen, "is_idempotent: %s", msg);
  } else {
    lua_State *L = s->sb->L;
    int t = lua_type(L, -1);
    *yes = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (t != LUA_TBOOLEAN && t != LUA_TNIL) {
      lr_fmt(err, errlen, "%s: is_idempotent returned a %s (expected true, false or nil)",
             s->rule_is_idempotent, lua_typename(L, t));
      rc = LUARETRY_E_POLICY;
    }
  }
  lr_gen_return(s);
  return rc;
}

/* ---- prepare: the request it leaves, checked and copied */

/* A string field of the table at t, checked: NULL when absent. */
static const char *field(lua_State *L, int t, const char *k, size_t *len) {
  int type = lua_getfield(L, t, k);
  if (type == LUA_TNIL) {
    lua_pop(L, 1);
    return NULL;
  }
  if (type != LUA_TSTRING)
    luaL_error(L, "prepare: request.%s must be a string, not a %s", k, lua_typename(L, type));
  const char *v = lua_tolstring(L, -1, len);
  lua_pop(L, 1); /* the table keeps it alive */
  return v;
}

/* Refuses what would let a script split or redirect a request. */
static void check_text(lua_State *L, const char *what, const char *v, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (v[i] == '\r' || v[i] == '\n' || v[i] == '\0')
      luaL_error(L, "prepare: %s holds a line break or NUL: a request cannot be split", what);
}

static void check_url(lua_State *L, const char *url, size_t len) {
  check_text(L, "request.url", url, len);
  if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
    luaL_error(L, "prepare: request.url must be an http or https URL, not \"%s\"",
               lr_quote_clip(L, url));
}

typedef struct {
  const char *method, *url, *body;
  size_t method_len, url_len, body_len, header_bytes, header_count;
  int body_replaced;
} packed_sizes;

/* s copied at *at, within the block that ends at end: measured from the
 * same snapshot, it always fits; a refusal, never a write past it. */
static char *put(lua_State *L, char **at, const char *end, const char *s, size_t len) {
  if ((size_t)(end - *at) < len + 1) luaL_error(L, "prepare: the request grew while it was copied");
  char *start = *at;
  memcpy(start, s, len);
  start[len] = '\0';
  *at += len + 1;
  return start;
}

/* The request's removed headers (a NULL value: curl's -H 'Name:') that
 * the table at t does not name: kept through prepare, which never saw
 * them.  Counted into z, or written at *h (a NULL at: count only). */
static void carry_removed(lua_State *L, int t, const luaretry_request *in, packed_sizes *z,
                          luaretry_header *h, size_t *n, char **at, const char *end) {
  size_t removed = 0;
  for (size_t i = 0; i < in->header_count; i++) removed += !in->headers[i].value;
  if (!removed) return; /* nearly every request: no lookup in the table */
  int named = lua_getfield(L, t, "headers") == LUA_TTABLE;
  for (size_t i = 0; i < in->header_count; i++) {
    const char *name = in->headers[i].name;
    if (in->headers[i].value) continue;
    if (named) {
      lua_pushstring(L, name);
      int kept = lua_rawget(L, -2) != LUA_TNIL;
      lua_pop(L, 1);
      if (kept) continue;
    }
    if (!at) {
      z->header_bytes += strlen(name) + 1;
      z->header_count++;
      continue;
    }
    h[*n].name = put(L, at, end, name, strlen(name));
    h[*n].value = NULL;
    ++*n;
  }
  lua_pop(L, 1);
}

/* Reads and checks the request table at t (the headers at t + 1). */
static void measure(lua_State *L, int t, int original_body, packed_sizes *z) {
  z->method = field(L, t, "method", &z->method_len);
  z->url = field(L, t, "url", &z->url_len);
  if (!z->url) luaL_error(L, "prepare: request.url must be a string");
  check_url(L, z->url, z->url_len);
  if (z->method) check_text(L, "request.method", z->method, z->method_len);
  lua_getfield(L, t, "body");
  z->body_replaced = !lua_rawequal(L, -1, original_body);
  lua_pop(L, 1);
  if (z->body_replaced) z->body = field(L, t, "body", &z->body_len);
  int headers = lua_getfield(L, t, "headers");
  if (headers != LUA_TTABLE && headers != LUA_TNIL) /* would send none, without a word */
    luaL_error(L, "prepare: request.headers must be a table (names to strings), not a %s",
               lua_typename(L, headers));
  if (headers != LUA_TTABLE) return;
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
      luaL_error(L, "prepare: request.headers must map names to strings");
    size_t nl, vl;
    const char *name = lua_tolstring(L, -2, &nl), *value = lua_tolstring(L, -1, &vl);
    check_text(L, "a header name", name, nl);
    if (memchr(value, '\r', vl) || memchr(value, '\n', vl) || memchr(value, '\0', vl))
      luaL_error(L, /* which one: a request may carry many */
                 "prepare: header \"%s\": its value holds a line break or NUL: a request cannot "
                 "be split",
                 lr_quote_clip(L, name));
    if (!lr_header_name_ok(name, nl)) /* the rule of attempt_header's name, and RFC 9110's */
      luaL_error(L, "prepare: header name \"%s\" is not a name (%s)", lr_quote_clip(L, name),
                 LR_HEADER_NAME_RULE);
    z->header_bytes += nl + vl + 2;
    z->header_count++;
    lua_pop(L, 1);
  }
}

/* The request table at t, copied into one malloc'ed block at *block. */
static void pack(lua_State *L, int t, int original_body, const luaretry_request *in,
                 luaretry_request *out, void **block) {
  packed_sizes z;
  memset(&z, 0, sizeof z);
  measure(L, t, original_body, &z);
  carry_removed(L, t, in, &z, NULL, NULL, NULL, NULL);
  size_t size = z.header_count * sizeof(luaretry_header) + z.header_bytes + z.method_len +
                z.url_len + z.body_len + 3;
  luaretry_header *h = malloc(size ? size : 1);
  if (!h) luaL_error(L, "prepare: out of memory");
  free(*block);
  *block = h;
  char *at = (char *)(h + z.header_count);
  const char *end = (char *)h + size;
  out->method = z.method ? put(L, &at, end, z.method, z.method_len) : in->method;
  out->url = put(L, &at, end, z.url, z.url_len);
  out->body = z.body_replaced ? (z.body ? put(L, &at, end, z.body, z.body_len) : NULL) : in->body;
  out->body_len = z.body_replaced ? z.body_len : in->body_len;
  out->headers = h;
  out->header_count = 0;
  carry_removed(L, t, in, &z, h, &out->header_count, &at, end);
  if (lua_getfield(L, t, "headers") != LUA_TTABLE) return;
  lua_pushnil(L);
  while (lua_next(L, -2) && out->header_count < z.header_count) {
    size_t nl, vl;
    const char *name = lua_tolstring(L, -2, &nl), *value = lua_tolstring(L, -1, &vl);
    h[out->header_count].name = put(L, &at, end, name, nl);
    h[out->header_count].value = put(L, &at, end, value, vl);
    out->header_count++;
    lua_pop(L, 1);
  }
}

/* The request the script left, read once into a plain table (its fields
 * through any __index once each, its headers copied raw): measure and pack
 * then read the same values.  Read twice from the script's table, an
 * __index could size the copy by one table and fill it from another. */
static int snapshot(lua_State *L, int t) {
  static const char *const FIELDS[] = { "method", "url", "body" };
  lua_createtable(L, 0, 4);
  int copy = lua_gettop(L);
  for (size_t i = 0; i < sizeof FIELDS / sizeof FIELDS[0]; i++) {
    lua_getfield(L, t, FIELDS[i]);
    lua_setfield(L, copy, FIELDS[i]);
  }
  int headers = lua_getfield(L, t, "headers"); /* copy + 1 */
  if (headers == LUA_TTABLE) {
    lua_newtable(L); /* copy + 2 */
    lua_pushnil(L);
    while (lua_next(L, copy + 1)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, copy + 2);
    }
    lua_remove(L, copy + 1);
  }
  lua_setfield(L, copy, "headers"); /* a header value of another type: measure says so */
  return copy;
}

static int call_prepare(lua_State *L) {
  lr_script *s = lua_touserdata(L, 1);
  lua_settop(L, 1);
  push_request(L, s->cur_request, s->gen->body_limit); /* 2 */
  lua_getfield(L, 2, "body");                          /* 3: as given */
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref_prepare);
  lua_pushvalue(L, 2);
  lua_pushinteger(L, s->cur_attempt);
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref_info);
  lua_call(L, 3, 1);
  int t = lua_istable(L, -1) ? lua_gettop(L) : 2; /* a returned table wins */
  pack(L, snapshot(L, t), 3, s->cur_request, s->cur_out, s->cur_prepared);
  lr_script_keep_call(L, s);
  return 0;
}

luaretry_code lr_gen_prepare(lr_gen *g, const luaretry_request *in, int attempt,
                             luaretry_request *out, void **prepared, const lr_attempt_ctx *ctx,
                             char *err, size_t errlen) {
  *out = *in;
  luaretry_code bad = check_request(in, err, errlen);
  if (bad != LUARETRY_OK) return bad;
  if (!g->has_prepare) return LUARETRY_OK;
  lr_script *s = lr_gen_borrow(g, err, errlen);
  if (!s) return LUARETRY_E_NOMEM;
  luaretry_code rc = LUARETRY_OK;
  if (s->ref_prepare) {
    s->cur_request = in;
    s->cur_out = out;
    s->cur_attempt = attempt;
    s->cur_ctx = ctx;
    s->sb->rng = ctx ? ctx->rng : NULL;
    s->cur_prepared = prepared;
    char msg[1024];
    rc = lr_sandbox_call(s->sb, call_prepare, s, 0, LUARETRY_E_POLICY, msg, sizeof msg);
    if (rc != LUARETRY_OK) {
      *out = *in;
      /* a check of the request it left (said from C, with no position):
       * the function's own file and line; a Lua error has its own */
      if (strncmp(msg, "prepare: ", 9) == 0)
        lr_fmt(err, errlen, "%s: %s", s->rule_prepare, msg);
      else
        lr_fmt(err, errlen, "prepare: %s", msg);
    }
    s->cur_request = NULL;
    s->cur_out = NULL;
    s->cur_ctx = NULL;
    s->cur_prepared = NULL;
    s->call_made = 0;
    s->sb->rng = NULL;
  }
  lr_gen_return(s);
  return rc;
}

/* ---- headers the policy adds to each attempt (attempt_header's, and
 * propagate's), each over any header of that name the request had */

static int added(const char *name, const luaretry_header *add, size_t n_add) {
  for (size_t j = 0; j < n_add; j++)
    if (strcasecmp(name, add[j].name) == 0) return 1;
  return 0;
}

luaretry_code lr_add_headers(const luaretry_header *add, size_t n_add, luaretry_request *r,
                             void **block) {
  size_t n = 0, values = 0;
  for (size_t i = 0; i < r->header_count; i++)
    if (!added(r->headers[i].name, add, n_add)) n++;
  for (size_t j = 0; j < n_add; j++) values += strlen(add[j].value) + 1;
  char *mem = malloc((n + n_add) * sizeof(luaretry_header) + values);
  if (!mem) return LUARETRY_E_NOMEM;
  luaretry_header *h = (luaretry_header *)mem;
  char *value = mem + (n + n_add) * sizeof(luaretry_header);
  size_t k = 0;
  for (size_t i = 0; i < r->header_count; i++) /* the strings stay where they are */
    if (!added(r->headers[i].name, add, n_add)) h[k++] = r->headers[i];
  for (size_t j = 0; j < n_add; j++) { /* the names are the rules': they outlive the call */
    size_t len = strlen(add[j].value) + 1;
    memcpy(value, add[j].value, len);
    h[k].name = add[j].name;
    h[k++].value = value;
    value += len;
  }
  free(*block);
  *block = mem;
  r->headers = h;
  r->header_count = k;
  return LUARETRY_OK;
}
