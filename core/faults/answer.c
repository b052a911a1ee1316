/* answer.c: the fault server's script: loaded with the standard
 * libraries and the sequence/cycle/routes helpers, called once per
 * request with `req`, its answer turned into bytes on the connection or a
 * reset, a hang, a truncation, after a delay (the API is described at the
 * top of server.c). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "faults_int.h"

static const char prelude[] =
  "local type, min, pairs, math = type, math.min, pairs, math\n"
  "local function answer (x, req)\n"
  "  if type(x) == 'function' then return x(req) end\n"
  "  return x\n"
  "end\n"
  "local function list_of (name, t)\n"
  "  if type(t) ~= 'table' or #t == 0 then\n"
  "    error(name .. ': expects a non-empty list', 3)\n"
  "  end\n"
  "  return t\n"
  "end\n"
  "function sequence (t)\n"
  "  list_of('sequence', t)\n"
  "  return function (req) return answer(t[min(req.count, #t)], req) end\n"
  "end\n"
  "function cycle (t)\n"
  "  list_of('cycle', t)\n"
  "  return function (req) return answer(t[(req.count - 1) % #t + 1], req) end\n"
  "end\n"
  "function routes (map)\n"
  "  if type(map) ~= 'table' then error('routes: expects a table', 2) end\n"
  "  return function (req)\n"
  "    local x = map[req.path]\n"
  "    if x == nil then x = map.default end\n"
  "    if x == nil then\n"
  "      return {status = 404, body = 'no route for ' .. req.path .. '\\n'}\n"
  "    end\n"
  "    return answer(x, req)\n"
  "  end\n"
  "end\n"
  /* latency{x, base =, slow =, every = N | fraction = F, seed =}: x answered
     after `base` seconds, and after `slow` seconds for every Nth request of
     its path (req.count), or for a fraction F of them drawn from a seeded
     hash of (seed, req.count): the same requests are slow on every run, and
     a reset (POST /_faults/reset) starts them over. */
  "local function unit (seed, n)\n"
  "  local z = seed * 0x9E3779B97F4A7C15 + n * 0xBF58476D1CE4E5B9\n"
  "  z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9\n"
  "  z = (z ~ (z >> 27)) * 0x94D049BB133111EB\n"
  "  z = z ~ (z >> 31)\n"
  "  return (z >> 11) / 9007199254740992.0\n"
  "end\n"
  "local function seconds (t, k)\n"
  "  local v = t[k]\n"
  "  if v == nil then return 0 end\n"
  "  if math.type(v) == nil or v ~= v or v < 0 or v > 3600 then\n"
  "    error('latency: ' .. k .. ' must be seconds from 0 to 3600', 3)\n"
  "  end\n"
  "  return v\n"
  "end\n"
  "function latency (t)\n"
  "  if type(t) ~= 'table' or t[1] == nil then\n"
  "    error('latency: expects a table {answer, base =, slow =, every = | fraction =}', 2)\n"
  "  end\n"
  "  local x, base, slow = t[1], seconds(t, 'base'), seconds(t, 'slow')\n"
  "  local every, fraction, seed = t.every, t.fraction, t.seed or 1\n"
  "  if every ~= nil and fraction ~= nil then\n"
  "    error('latency: every and fraction exclude each other', 2)\n"
  "  end\n"
  "  if every ~= nil and (math.type(every) ~= 'integer' or every < 1) then\n"
  "    error('latency: every must be a whole number from 1', 2)\n"
  "  end\n"
  "  if fraction ~= nil and (math.type(fraction) == nil or not (fraction >= 0 and fraction <= 1)) "
  "then\n"
  "    error('latency: fraction must be a number from 0 to 1', 2)\n"
  "  end\n"
  "  if math.type(seed) ~= 'integer' then error('latency: seed must be an integer', 2) end\n"
  "  return function (req)\n"
  "    local r, d = answer(x, req), base\n"
  "    if (every and req.count % every == 0) or\n"
  "       (fraction and unit(seed, req.count) < fraction) then d = slow end\n"
  "    if type(r) == 'number' then r = {status = r}\n"
  "    elseif type(r) == 'string' then r = {body = r}\n"
  "    elseif type(r) == 'table' then\n"
  "      local c = {}\n"
  "      for k, v in pairs(r) do c[k] = v end\n"
  "      r = c\n"
  "    else return r end\n"
  "    r.delay = (r.delay or 0) + d\n"
  "    return r\n"
  "  end\n"
  "end\n";

/* ------------------------------------------------------------ the script */

enum { A_SEND, A_RESET, A_HANG, A_STREAM };

typedef struct exchange {
  lr_faults *f;
  conn *c;
  int action;
  double delay;
} exchange;

static void push_request(lua_State *L, exchange *x) {
  const lr_http_req *r = &x->c->req;
  lua_createtable(L, 0, 10);
  lua_pushstring(L, r->method);
  lua_setfield(L, -2, "method");
  lua_pushstring(L, r->path);
  lua_setfield(L, -2, "path");
  lua_pushstring(L, r->query);
  lua_setfield(L, -2, "query");
  lua_pushlstring(L, x->c->in + r->head_len, r->body_len);
  lua_setfield(L, -2, "body");
  lua_pushinteger(L, (lua_Integer)(r->body_len + r->dropped));
  lua_setfield(L, -2, "body_len");
  lua_pushinteger(L, x->f->total);
  lua_setfield(L, -2, "total");
  lua_pushnumber(L, x->c->head_time);
  lua_setfield(L, -2, "time");
  lua_createtable(L, 0, (int)r->nheaders);
  for (size_t i = 0; i < r->nheaders; i++) {
    const char *name = r->headers[i].name;
    if (lua_getfield(L, -1, name) == LUA_TNIL)
      lua_pushstring(L, r->headers[i].value);
    else
      lua_pushfstring(L, "%s, %s", lua_tostring(L, -1), r->headers[i].value);
    lua_setfield(L, -3, name);
    lua_pop(L, 1);
  }
  lua_setfield(L, -2, "headers");
  /* the per-path entry */
  lua_rawgeti(L, LUA_REGISTRYINDEX, x->f->paths_ref);
  if (lua_getfield(L, -1, r->path) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, 0);
    lua_setfield(L, -2, "count");
    lua_newtable(L);
    lua_setfield(L, -2, "state");
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, r->path);
  }
  lua_getfield(L, -1, "count");
  lua_pushinteger(L, lua_tointeger(L, -1) + 1);
  lua_remove(L, -2);
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, "count");
  lua_setfield(L, -4, "count");
  lua_getfield(L, -1, "state");
  lua_setfield(L, -4, "state");
  lua_pop(L, 2);
}

/* name may be "file.size": the field is the part after the dot, the
   message names the whole. */
static lua_Integer int_field(lua_State *L, int t, const char *name, lua_Integer def, lua_Integer lo,
                             lua_Integer hi) {
  int isint;
  lua_Integer v;
  const char *dot = strchr(name, '.');
  if (lua_getfield(L, t, dot ? dot + 1 : name) == LUA_TNIL) {
    lua_pop(L, 1);
    return def;
  }
  v = lua_tointegerx(L, -1, &isint);
  if (!isint || v < lo || v > hi)
    luaL_error(L, "respond: '%s' must be an integer in %I..%I", name, lo, hi);
  lua_pop(L, 1);
  return v;
}

/* A header name or value from the script, checked so it cannot break the
   framing; `what` names it in a refusal ("header value", "'reason'"). */
static const char *head_text(lua_State *L, int idx, int is_name, const char *what) {
  size_t len, i;
  const char *s;
  int t = lua_type(L, idx);
  if (t != LUA_TSTRING && t != LUA_TNUMBER)
    luaL_error(L, "respond: %s must be a string, got %s", what, luaL_typename(L, idx));
  s = lua_tolstring(L, idx, &len);
  for (i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '\r' || ch == '\n' || ch == '\0' ||
        (is_name && (ch <= ' ' || ch == ':' || ch >= 0x7f)))
      luaL_error(L, "respond: bad character in %s '%s'", what, s);
  }
  if (is_name && len == 0) luaL_error(L, "respond: empty header name");
  return s;
}

static const char *header_text(lua_State *L, int idx, int is_name) {
  return head_text(L, idx, is_name, is_name ? "header name" : "header value");
}

/* Does a Connection value at idx say close?  (Other types are refused
   where the header is written.) */
static int says_close(lua_State *L, int idx) {
  return lua_type(L, idx) == LUA_TSTRING && strcasestr(lua_tostring(L, idx), "close") != NULL;
}

/* Does the headers table t have a Connection header that says close? */
static int headers_say_close(lua_State *L, int t) {
  int found = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) == LUA_TSTRING && strcasecmp(lua_tostring(L, -2), "connection") == 0) {
      if (lua_istable(L, -1)) {
        lua_Integer n = luaL_len(L, -1);
        for (lua_Integer i = 1; i <= n && !found; i++) {
          lua_geti(L, -1, i);
          found = says_close(L, -1);
          lua_pop(L, 1);
        }
      } else
        found = found || says_close(L, -1);
    }
    lua_pop(L, 1);
  }
  return found;
}

/* Write the headers of table `t` into the response.  A Connection header
 * that says close closes the connection; once it is to be closed (by
 * the caller's close_after too) a Connection header that does not say so
 * is left out, for the response must not promise what the server will not
 * do.  *said_close: a close was written, the caller need not add one. */
static void put_headers(lua_State *L, int t, conn *c, int *said_close) {
  if (headers_say_close(L, t)) c->close_after = 1;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    const char *name;
    if (lua_type(L, -2) != LUA_TSTRING) luaL_error(L, "respond: header names must be strings");
    name = header_text(L, -2, 1);
    if (strcasecmp(name, "content-length") != 0 && strcasecmp(name, "transfer-encoding") != 0) {
      int list = lua_istable(L, -1);
      lua_Integer n = list ? luaL_len(L, -1) : 1;
      for (lua_Integer i = 1; i <= n; i++) {
        const char *value;
        if (list) lua_geti(L, -1, i);
        value = header_text(L, -1, 0);
        if (strcasecmp(name, "connection") == 0 && strcasestr(value, "close"))
          *said_close = 1;
        else if (strcasecmp(name, "connection") == 0 && c->close_after)
          value = NULL;
        if (value) {
          sb_str(&c->out, name);
          sb_str(&c->out, ": ");
          sb_str(&c->out, value);
          sb_str(&c->out, "\r\n");
        }
        if (list) lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
}

/* `stream = {data = S, count = N, interval = T}` of the answer at t:
   after the head, S is sent N times (no count: for ever), T seconds apart,
   then the connection closes.  1 when there is one. */
static int get_stream(lua_State *L, int t, conn *c) {
  size_t len;
  const char *data;
  if (lua_getfield(L, t, "stream") == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  if (!lua_istable(L, -1)) luaL_error(L, "respond: 'stream' must be a table");
  int s = lua_gettop(L);
  fault_stream_free(c);
  lua_getfield(L, s, "data");
  if (!lua_isstring(L, -1)) luaL_error(L, "respond: 'stream.data' must be a string");
  data = lua_tolstring(L, -1, &len);
  if (len == 0) luaL_error(L, "respond: 'stream.data' must not be empty");
  c->stream_left = int_field(L, s, "stream.count", -1, 0, LUA_MAXINTEGER);
  c->stream_every = 0;
  if (lua_getfield(L, s, "interval") != LUA_TNIL) {
    int isnum;
    c->stream_every = lua_tonumberx(L, -1, &isnum);
    if (!isnum || !(c->stream_every >= 0) || c->stream_every > 3600)
      luaL_error(L, "respond: 'stream.interval' must be seconds from 0 to 3600");
  }
  if ((c->stream = malloc(len)) == NULL) luaL_error(L, "respond: out of memory");
  memcpy(c->stream, data, len);
  c->stream_len = len;
  lua_settop(L, s - 1);
  return 1;
}

/* A string field of the file table t ("file.etag"), or NULL; checked as a
   header value. */
static const char *str_field(lua_State *L, int t, const char *name) {
  char what[40];
  if (lua_getfield(L, t, strchr(name, '.') + 1) == LUA_TNIL) {
    lua_pop(L, 1);
    return NULL;
  }
  snprintf(what, sizeof what, "'%s'", name);
  const char *v = head_text(L, -1, 0, what);
  lua_pop(L, 1); /* the table still holds it */
  return v;
}

/* The request's "bytes=FIRST-[LAST]" within size: 1 and the range, 0 for
   none (no Range, or If-Range naming another version: the whole file), -1
   for a range that is not satisfiable. */
static int file_range(const conn *c, const char *etag, const char *lm, unsigned long long size,
                      unsigned long long *first, unsigned long long *end) {
  const char *range = lr_http_header_get(&c->req, "range");
  const char *if_range = lr_http_header_get(&c->req, "if-range");
  unsigned long long a, b;
  int n;
  if (range == NULL) return 0;
  if (if_range && !(etag && strcmp(if_range, etag) == 0) && !(lm && strcmp(if_range, lm) == 0))
    return 0;
  /* several ranges would need a multipart answer: the whole file, as
     RFC 9110 lets a server answer any Range */
  if (strchr(range, ',')) return 0;
  if (strncmp(range, "bytes=-", 7) == 0) { /* the last N bytes */
    if (sscanf(range + 7, "%llu", &b) != 1 || !isdigit((unsigned char)range[7])) return 0;
    if (b == 0 || size == 0) return -1;
    *first = b < size ? size - b : 0;
    *end = size;
    return 1;
  }
  /* %llu would take "-5" for a huge number */
  if (strncmp(range, "bytes=", 6) != 0 || !isdigit((unsigned char)range[6])) return 0;
  n = sscanf(range, "bytes=%llu-%llu", &a, &b);
  if (n < 1) return 0;
  if (a >= size || (n == 2 && b < a)) return -1;
  *first = a;
  *end = n == 2 && b + 1 < size ? b + 1 : size;
  return 1;
}

/* `file = {size =, etag =, last_modified =, ranges = true, reset_after =,
   seed =}`: a resource of `size` generated bytes (fault_file_byte), with
   Range and If-Range honoured (206, 416) unless ranges = false, and the
   connection reset after `reset_after` body bytes of this answer.  The
   head is made here, the script's headers and status (for the whole file)
   included.  1 when there is one. */
static int get_file(lua_State *L, int t, exchange *x, int status) {
  conn *c = x->c;
  unsigned long long size, first = 0, end, cut;
  int ranges, said_close = 0, r;
  const char *etag, *lm;
  if (lua_getfield(L, t, "file") == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  if (!lua_istable(L, -1)) luaL_error(L, "respond: 'file' must be a table");
  int ft = lua_gettop(L);
  size = (unsigned long long)int_field(L, ft, "file.size", 0, 0, (lua_Integer)1 << 40);
  cut = (unsigned long long)int_field(L, ft, "file.reset_after", -1, -1, LUA_MAXINTEGER);
  c->file_seed = (unsigned)int_field(L, ft, "file.seed", 0, 0, 1000000);
  etag = str_field(L, ft, "file.etag");
  lm = str_field(L, ft, "file.last_modified");
  lua_getfield(L, ft, "ranges");
  ranges = lua_isnil(L, -1) || lua_toboolean(L, -1);
  lua_pop(L, 1);
  end = size;
  r = ranges ? file_range(c, etag, lm, size, &first, &end) : 0;
  if (r != 0) status = r > 0 ? 206 : 416;
  sb_fmt(&c->out, "HTTP/1.1 %d %s\r\n", status, lr_http_reason(status));
  if (lua_getfield(L, t, "headers") == LUA_TTABLE) put_headers(L, lua_gettop(L), c, &said_close);
  if (ranges) sb_str(&c->out, "Accept-Ranges: bytes\r\n");
  if (etag) sb_fmt(&c->out, "ETag: %s\r\n", etag);
  if (lm) sb_fmt(&c->out, "Last-Modified: %s\r\n", lm);
  if (r > 0) sb_fmt(&c->out, "Content-Range: bytes %llu-%llu/%llu\r\n", first, end - 1, size);
  if (r < 0) {
    sb_fmt(&c->out, "Content-Range: bytes */%llu\r\n", size);
    first = end = 0;
  }
  sb_fmt(&c->out, "Content-Length: %llu\r\n", end - first);
  if (c->close_after && !said_close) sb_str(&c->out, "Connection: close\r\n");
  sb_str(&c->out, "\r\n");
  fault_stream_free(c);
  if (strcmp(c->req.method, "HEAD") == 0) first = end;
  c->file_on = 1;
  c->file_pos = first;
  c->file_end = end;
  c->file_cut = cut == (unsigned long long)-1 ? (unsigned long long)-1 : first + cut;
  x->action = A_STREAM;
  lua_settop(L, ft - 1);
  return 1;
}

/* The fields that make the answer something else than a made response:
   then_reset, hang, reset, a stream, raw bytes.  1 when nothing more is
   to be made. */
static int special_answer(lua_State *L, int t, exchange *x) {
  conn *c = x->c;
  if (lua_getfield(L, t, "then_reset") != LUA_TNIL && lua_toboolean(L, -1))
    c->reset_at_end = c->close_after = 1;
  if (lua_getfield(L, t, "hang") != LUA_TNIL && lua_toboolean(L, -1)) {
    x->action = A_HANG;
    return 1;
  }
  if (lua_getfield(L, t, "reset") != LUA_TNIL && lua_toboolean(L, -1)) {
    x->action = A_RESET;
    return 1;
  }
  if (get_file(L, t, x, (int)int_field(L, t, "status", 200, 100, 999))) return 1;
  if (get_stream(L, t, c)) x->action = A_STREAM;
  if (lua_getfield(L, t, "raw") != LUA_TNIL) { /* the bytes, as they are */
    size_t n;
    if (!lua_isstring(L, -1))
      luaL_error(L, "respond: 'raw' must be a string, got %s", luaL_typename(L, -1));
    const char *raw = lua_tolstring(L, -1, &n);
    sb_add(&c->out, raw, n);
    c->close_after = 1;
    return 1;
  }
  return 0;
}

/* Turn the script's answer (at the top of the stack) into a response. */
static void put_answer(lua_State *L, exchange *x) {
  conn *c = x->c;
  int t = lua_gettop(L), status = 200, said_close = 0;
  int head_only = strcmp(c->req.method, "HEAD") == 0;
  const char *reason = NULL, *body = "";
  size_t len = 0, sent;
  lua_Integer truncate = -1;
  switch (lua_type(L, t)) {
  case LUA_TNUMBER:
    lua_createtable(L, 0, 1);
    lua_pushvalue(L, t);
    lua_setfield(L, -2, "status");
    lua_replace(L, t);
    break;
  case LUA_TSTRING: body = lua_tolstring(L, t, &len); break;
  case LUA_TTABLE: break;
  default:
    luaL_error(L,
               "respond returned %s (expected a table, a status number"
               " or a body string)",
               luaL_typename(L, t));
  }
  if (lua_istable(L, t)) {
    status = (int)int_field(L, t, "status", 200, 100, 999);
    if (lua_getfield(L, t, "reason") != LUA_TNIL) reason = head_text(L, -1, 0, "'reason'");
    if (lua_getfield(L, t, "body") != LUA_TNIL) {
      if (!lua_isstring(L, -1))
        luaL_error(L, "respond: 'body' must be a string, got %s", luaL_typename(L, -1));
      body = lua_tolstring(L, -1, &len);
    }
    if (lua_getfield(L, t, "delay") != LUA_TNIL) {
      int isnum;
      x->delay = lua_tonumberx(L, -1, &isnum);
      if (!isnum || !(x->delay >= 0) || isinf(x->delay))
        luaL_error(L, "respond: 'delay' must be a number of seconds >= 0");
    }
    truncate = int_field(L, t, "truncate", -1, 0, LUA_MAXINTEGER);
    if (special_answer(L, t, x)) return;
  }
  if (reason == NULL) reason = lr_http_reason(status);
  sb_fmt(&c->out, "HTTP/1.1 %d ", status);
  sb_str(&c->out, reason);
  sb_str(&c->out, "\r\n");
  /* a stream ends with the connection: no length to announce */
  if (x->action == A_STREAM) c->close_after = 1;
  if (lua_istable(L, t) && lua_getfield(L, t, "headers") != LUA_TNIL) {
    if (!lua_istable(L, -1))
      luaL_error(L, "respond: 'headers' must be a table, got %s", luaL_typename(L, -1));
    put_headers(L, lua_gettop(L), c, &said_close);
  }
  if (x->action != A_STREAM) sb_fmt(&c->out, "Content-Length: %zu\r\n", len);
  if (c->close_after && !said_close) sb_str(&c->out, "Connection: close\r\n");
  sb_str(&c->out, "\r\n");
  sent = truncate >= 0 && (size_t)truncate < len ? (size_t)truncate : len;
  if (!head_only) sb_add(&c->out, body, sent);
  /* a made head's stream is its body, which a HEAD leaves out (raw bytes
   * and what streams after them are the script's, sent as they are) */
  if (head_only && x->action == A_STREAM) x->action = A_SEND;
  if (truncate >= 0) c->close_after = 1; /* unannounced, like a real cut */
}

static int run_script(lua_State *L) {
  exchange *x = (exchange *)lua_touserdata(L, 1);
  luaL_checkstack(L, 24, NULL); /* put_answer keeps its fields on the stack */
  if (lua_getglobal(L, "respond") == LUA_TFUNCTION) {
    push_request(L, x);
    lua_call(L, 1, 1);
  } else { /* a fixed answer; still count the request */
    push_request(L, x);
    lua_pop(L, 1);
  }
  put_answer(L, x);
  return 0;
}

int fault_reset_paths(lua_State *L) {
  lr_faults *f = (lr_faults *)lua_touserdata(L, 1);
  lua_newtable(L);
  lua_rawseti(L, LUA_REGISTRYINDEX, f->paths_ref);
  return 0;
}

void fault_answer_script(lr_faults *f, conn *c) {
  exchange x = { f, c, A_SEND, 0 };
  size_t mark = c->out.len;
  int close_after = c->close_after; /* the client's wish, before the script's answer */
  c->reset_at_end = 0;
  f->total++;
  fault_log_entry(f, c);
  char msg[512];
  if (lr_sandbox_call(f->sb, run_script, &x, 0, LUARETRY_E_POLICY, msg, sizeof msg) !=
      LUARETRY_OK) {
    /* drop a half-written answer and what its fields had set (then_reset,
     * a Connection header): the 500 is the server's own */
    c->out.len = mark;
    c->reset_at_end = 0;
    c->close_after = close_after;
    x.action = A_SEND;
    x.delay = 0;
    fault_put_simple(c, 500, "text/plain", msg, strlen(msg));
  }
  if (x.action == A_HANG) {
    c->state = C_HANG;
    return;
  }
  if (x.action != A_STREAM) fault_stream_free(c);
  if (x.delay > 0) {
    c->state = C_DELAY;
    c->due = fault_elapsed(f) + x.delay;
    c->hold = mark;
    c->reset_when_due = x.action == A_RESET;
  } else if (x.action == A_RESET)
    fault_conn_close(f, c, 1);
  else {
    c->state = c->stream || c->file_on ? C_STREAM : C_WRITE;
    c->due = 0; /* a stream's first piece goes once the head is out */
  }
}

/* The fault server's script is a test fixture, but one that may arrive
 * from anywhere: it runs in the library's sandbox (core/sandbox/) with the
 * fault server's allow-list, bounded memory, no time limit (a respond()
 * may take what it takes) but stopped by lr_faults_stop() even in an
 * endless loop; print() goes to standard error. */
#define MEMORY_LIMIT ((size_t)256 * 1024 * 1024)

static void print_to_stderr(void *ud, const char *line) {
  (void)ud;
  fprintf(stderr, "faults: %s\n", line);
}

static const lr_log_target print_target = { print_to_stderr, NULL };

static lua_State *fault_sandbox_new(lr_faults *f, const char *path, char *err, size_t errlen) {
  lr_limits limits = { MEMORY_LIMIT, 0, 0 };
  f->sb = lr_sandbox_new(&limits, path, &print_target, lr_sandbox_open_faults_libs);
  if (f->sb == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  lr_sandbox_stop_on(f->sb, &f->stopping);
  return f->L = f->sb->L;
}

/* Loads and runs a chunk (the prelude, the script) under the sandbox's
 * protection: 0, or -1 with the message in err. */
static int run_chunk(lr_faults *f, int loaded, char *err, size_t errlen) {
  if (loaded != LUA_OK) {
    const char *msg = lua_tostring(f->L, -1);
    snprintf(err, errlen, "%s", msg ? msg : "error object is not a string");
    lua_pop(f->L, 1);
    return -1;
  }
  return lr_sandbox_pcall(f->sb, 0, 0, LUARETRY_E_POLICY, err, errlen) == LUARETRY_OK ? 0 : -1;
}

int fault_load_script(lr_faults *f, const char *path, const char *chunkname, const char *source,
                      char *err, size_t errlen) {
  const char *name = path ? path : chunkname;
  lua_State *L = fault_sandbox_new(f, path, err, errlen);
  if (L == NULL) return -1;
  if (run_chunk(f, luaL_loadbufferx(L, prelude, sizeof prelude - 1, "=faults prelude", "t"), err,
                errlen) != 0)
    return -1;
  lua_newtable(L);
  f->paths_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  int st;
  if (path)
    st = luaL_loadfilex(L, path, "t");
  else { /* "@name" so messages read "name:line: ..." */
    lua_pushfstring(L, "%s%s", strchr("@=", chunkname[0]) ? "" : "@", chunkname);
    st = luaL_loadbufferx(L, source, strlen(source), lua_tostring(L, -1), "t");
    lua_remove(L, -2);
  }
  /* Lua's refusal of a binary chunk names no chunk: say which script */
  if (st != LUA_OK && lua_isstring(L, -1) && !strstr(lua_tostring(L, -1), name)) {
    lua_pushfstring(L, "%s: %s", name, lua_tostring(L, -1));
    lua_remove(L, -2);
  }
  if (run_chunk(f, st, err, errlen) != 0) return -1;
  if (lua_getglobal(L, "respond") == LUA_TNIL) {
    snprintf(err, errlen, "%s: the script defines no global 'respond'", name);
    return -1;
  }
  lua_pop(L, 1);
  return 0;
}
