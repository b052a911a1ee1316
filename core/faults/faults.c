/*
 * faults.c: a fault-injecting HTTP/1.1 server driven by a Lua script, so
 * retry policies can be tested against real sockets.  One thread, one
 * poll(2) loop, any number of connections; request parsing lives in
 * faults_http.c.
 *
 * The script API (also in policies/faults/README.md)
 * --------------------------------------------------
 * The script is ordinary Lua 5.4 with the standard libraries.  It defines
 * a global `respond(req)`, called once per request, where
 *   req.method   "GET", "POST", ...
 *   req.path     the path, without the query ("/a/b")
 *   req.query    the raw query string ("" if none)
 *   req.headers  name -> value; names are lower-case, repeats are joined
 *                with ", "
 *   req.body     the request body ("" if none; chunked bodies decoded)
 *   req.count    requests seen on this path so far, this one included
 *   req.total    requests seen on all paths so far, this one included
 *   req.state    a table kept per path across requests, for the script
 *   req.time     seconds since the server started (monotonic, a float)
 * and returns a table with any of
 *   status   (200)  the status code, 100..999
 *   reason          the reason phrase (default: the usual one)
 *   headers         name -> string, or name -> list of strings to repeat
 *                   it; Content-Length and Transfer-Encoding are the
 *                   server's own and ignored here
 *   body     ("")   the body
 *   delay    (0)    seconds to wait before answering; other connections
 *                   are served meanwhile
 *   reset    = true close at once with a TCP reset (SO_LINGER 0), sending
 *                   nothing: the client sees "connection reset"
 *   hang     = true never answer; the connection stays open until the
 *                   client goes away or the server stops
 *   truncate = N    send the head with the full Content-Length but only N
 *                   bytes of the body, then close
 * `delay` also postpones `reset` and `truncate`.  Instead of a table,
 * respond may return a status number or a body string, and `respond`
 * itself may be such a value instead of a function, answered every time.
 * A response carries "Connection: close" (and the connection is closed)
 * when the client asked for it or the script set that header.
 *
 * Helpers defined before the script runs:
 *   sequence{a, b, c}  answers entry req.count of the list; the last
 *                      entry repeats forever
 *   cycle{a, b}        the same, but starts over after the last entry
 *   routes{["/a"] = x, default = y}  dispatches on req.path (404 when
 *                      nothing matches and there is no default)
 * Their entries may be status numbers, body strings, response tables or
 * respond-like functions: `respond = sequence{503, 503, 200}`.
 *
 * A script error while answering gives a 500 with the error message as
 * its body; the server goes on serving.
 *
 * Built in, and not seen by the script nor counted:
 *   GET /_faults/requests  a JSON array of the requests seen, oldest first
 *     (the last 100000): {"n","method","path","query","time","body_len",
 *     "body_hash" (FNV-1a 64, hex),"headers"}; time is taken when the
 *     request's head had arrived
 *   POST /_faults/reset    forgets the log, the counts and the states
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "faults.h"

#define LOG_MAX    100000
#define READ_MIN   16384
#define IN_MAX     (LR_HTTP_MAX_HEAD + LR_HTTP_MAX_BODY + 65536)
#define BUILTIN    "/_faults/"

static const char prelude[] =
  "local type, min = type, math.min\n"
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
  "end\n";


/* ------------------------------------------------------------ buffers */

typedef struct sbuf { char *p; size_t len, cap; int oom; } sbuf;

static void sb_add (sbuf *b, const void *s, size_t n) {
  if (b->oom) return;
  if (b->cap - b->len < n) {
    size_t cap = b->cap ? b->cap : 256;
    char *p;
    while (cap - b->len < n) cap *= 2;
    if ((p = realloc(b->p, cap)) == NULL) { b->oom = 1; return; }
    b->p = p;
    b->cap = cap;
  }
  if (n > 0) memcpy(b->p + b->len, s, n);
  b->len += n;
}

static void sb_str (sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_fmt (sbuf *b, const char *fmt, ...) {
  char tmp[256];  /* only ever short lines */
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) sb_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void sb_free (sbuf *b) { free(b->p); memset(b, 0, sizeof *b); }


/* ------------------------------------------------------------ state */

enum { C_READ, C_WRITE, C_DELAY, C_HANG, C_DEAD };

typedef struct conn {
  int fd, state;
  int eof;             /* the client will send no more */
  int close_after;     /* close once the response is out */
  int reset_when_due;  /* the delayed action is a reset, not an answer */
  int head_seen;
  double head_time, due;
  char *in;
  size_t inlen, incap;
  sbuf out;
  size_t outoff, hold;  /* in C_DELAY, bytes past `hold` wait for `due` */
  lr_http_req req;
} conn;

struct lr_faults {
  lua_State *L;
  int paths_ref;      /* registry: path -> {count = n, state = {}} */
  int listen_fd, wake_fd, port;
  int accept_paused;  /* out of descriptors: retry soon */
  int threaded;
  pthread_t thread;
  struct timespec t0;
  char address[80];
  conn **conns;
  size_t nconns, capconns;
  struct pollfd *pfds;
  size_t cappfds;
  char **log;         /* ring of rendered JSON entries */
  size_t log_first, log_count;
  long long total;
};

static double elapsed (const lr_faults *f) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - f->t0.tv_sec) + (t.tv_nsec - f->t0.tv_nsec) / 1e9;
}


/* ------------------------------------------------------------ JSON log */

/* Length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_len (const unsigned char *s) {
  unsigned long cp;
  size_t n, i;
  if (s[0] >= 0xc2 && s[0] <= 0xdf) { n = 2; cp = s[0] & 0x1f; }
  else if (s[0] >= 0xe0 && s[0] <= 0xef) { n = 3; cp = s[0] & 0x0f; }
  else if (s[0] >= 0xf0 && s[0] <= 0xf4) { n = 4; cp = s[0] & 0x07; }
  else return 0;
  for (i = 1; i < n; i++) {  /* stops at a NUL: it is no continuation */
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
      (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

/* A JSON string; bytes that are not UTF-8 are taken as Latin-1 so the
   output always parses. */
static void sb_json (sbuf *b, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  sb_add(b, "\"", 1);
  while (*p) {
    size_t n;
    if (*p == '"' || *p == '\\') { sb_add(b, "\\", 1); sb_add(b, p++, 1); }
    else if (*p >= 0x20 && *p < 0x7f) sb_add(b, p++, 1);
    else if (*p >= 0x80 && (n = utf8_len(p)) > 0) { sb_add(b, p, n); p += n; }
    else sb_fmt(b, "\\u%04x", *p++);
  }
  sb_add(b, "\"", 1);
}

static uint64_t fnv1a (const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325u;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 0x100000001b3u;
  }
  return h;
}

static void log_entry (lr_faults *f, conn *c) {
  const lr_http_req *r = &c->req;
  const char *body = c->in + r->head_len;
  sbuf b = {0};
  int first = 1;
  sb_fmt(&b, "{\"n\":%lld,\"method\":", f->total);
  sb_json(&b, r->method);
  sb_str(&b, ",\"path\":");
  sb_json(&b, r->path);
  sb_str(&b, ",\"query\":");
  sb_json(&b, r->query);
  sb_fmt(&b, ",\"time\":%.6f,\"body_len\":%zu,\"body_hash\":\"%016llx\","
         "\"headers\":{", c->head_time, r->body_len,
         (unsigned long long)fnv1a(body, r->body_len));
  for (size_t i = 0; i < r->nheaders; i++) {  /* one key per name */
    const char *name = r->headers[i].name;
    size_t j, k;
    for (j = 0; j < i && strcmp(r->headers[j].name, name) != 0; j++) {}
    if (j < i) continue;
    if (!first) sb_add(&b, ",", 1);
    first = 0;
    sb_json(&b, name);
    sb_add(&b, ":", 1);
    if (b.oom) break;
    /* join repeats as req.headers does: render, then splice the values */
    {
      sbuf v = {0};
      for (k = i; k < r->nheaders; k++)
        if (strcmp(r->headers[k].name, name) == 0) {
          if (v.len > 0) sb_str(&v, ", ");
          sb_str(&v, r->headers[k].value);
        }
      sb_add(&v, "", 1);
      if (!v.oom) sb_json(&b, v.p);
      sb_free(&v);
    }
  }
  sb_str(&b, "}}");
  sb_add(&b, "", 1);
  if (b.oom) { sb_free(&b); return; }  /* the log is best effort */
  if (f->log == NULL && (f->log = calloc(LOG_MAX, sizeof *f->log)) == NULL) {
    sb_free(&b);
    return;
  }
  if (f->log_count == LOG_MAX) {  /* drop the oldest */
    free(f->log[f->log_first]);
    f->log[f->log_first] = b.p;
    f->log_first = (f->log_first + 1) % LOG_MAX;
  }
  else f->log[(f->log_first + f->log_count++) % LOG_MAX] = b.p;
}

static void log_clear (lr_faults *f) {
  for (size_t i = 0; i < f->log_count; i++)
    free(f->log[(f->log_first + i) % LOG_MAX]);
  f->log_first = f->log_count = 0;
}


/* ------------------------------------------------------------ connections */

static void conn_close (lr_faults *f, conn *c, int hard) {
  if (c->state == C_DEAD) return;
  if (hard) {  /* the peer gets an RST instead of a FIN */
    struct linger lg = {1, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  }
  else {  /* unread input would turn our FIN into an RST: read it first */
    char tmp[4096];
    for (int i = 0; i < 64 && recv(c->fd, tmp, sizeof tmp, 0) > 0; i++) {}
  }
  close(c->fd);
  c->fd = -1;
  c->state = C_DEAD;
  free(c->in);
  c->in = NULL;
  sb_free(&c->out);
  f->accept_paused = 0;
}

/* Send what may be sent now; 0 if the connection died. */
static int conn_flush (lr_faults *f, conn *c) {
  size_t limit = c->state == C_DELAY ? c->hold : c->out.len;
  if (c->out.oom) { conn_close(f, c, 0); return 0; }
  while (c->outoff < limit) {
    ssize_t n = send(c->fd, c->out.p + c->outoff, limit - c->outoff,
                     MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 1;
      conn_close(f, c, 0);
      return 0;
    }
    c->outoff += (size_t)n;
  }
  if (c->outoff == c->out.len) c->outoff = c->out.len = c->hold = 0;
  return 1;
}

/* With `to` NULL, stores in offs where each pointer of r lies in the
 * buffer `from` (SIZE_MAX: elsewhere, e.g. the static ""); with `to`, points
 * them into `to` at the same offsets. */
static void rebase (lr_http_req *r, const char *from, size_t cap, size_t *offs,
                    char *to) {
  const char **ptrs[3 + 2 * LR_HTTP_MAX_HEADERS];
  size_t n = 0;
  ptrs[n++] = &r->method;
  ptrs[n++] = &r->path;
  ptrs[n++] = &r->query;
  for (size_t i = 0; i < r->nheaders; i++) {
    ptrs[n++] = (const char **)&r->headers[i].name;
    ptrs[n++] = (const char **)&r->headers[i].value;
  }
  for (size_t i = 0; i < n; i++) {
    if (!to) {
      uintptr_t at = (uintptr_t)*ptrs[i], base = (uintptr_t)from;
      offs[i] = *ptrs[i] && from && at >= base && at < base + cap ? at - base : SIZE_MAX;
    } else if (offs[i] != SIZE_MAX) {
      *ptrs[i] = to + offs[i];
    }
  }
}

static void conn_read (lr_faults *f, conn *c) {
  ssize_t n;
  if (c->incap - c->inlen < READ_MIN && c->incap < IN_MAX) {
    size_t cap = c->incap ? c->incap * 2 : READ_MIN * 2;
    char *p;
    if (cap > IN_MAX) cap = IN_MAX;
    /* The request parsed so far points into c->in: keep those pointers
     * as offsets across the realloc, which may move the buffer. */
    size_t offsets[3 + 2 * LR_HTTP_MAX_HEADERS];
    rebase(&c->req, c->in, c->incap, offsets, NULL);
    if ((p = realloc(c->in, cap)) == NULL) { conn_close(f, c, 0); return; }
    rebase(&c->req, NULL, cap, offsets, p);
    c->in = p;
    c->incap = cap;
  }
  if (c->inlen == c->incap) { conn_close(f, c, 0); return; }  /* cannot be */
  n = recv(c->fd, c->in + c->inlen, c->incap - c->inlen, 0);
  if (n > 0) c->inlen += (size_t)n;
  else if (n == 0) c->eof = 1;
  else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    conn_close(f, c, 0);
}

/* A response of the server's own (errors, the built-in paths). */
static void put_simple (conn *c, int status, const char *ctype,
                        const char *body, size_t len) {
  sb_fmt(&c->out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
         "Content-Length: %zu\r\n%s\r\n", status, lr_http_reason(status),
         ctype, len, c->close_after ? "Connection: close\r\n" : "");
  if (!(c->req.method && strcmp(c->req.method, "HEAD") == 0))
    sb_add(&c->out, body, len);
  c->state = C_WRITE;
}


/* ------------------------------------------------------------ the script */

enum { A_SEND, A_RESET, A_HANG };

typedef struct exchange {
  lr_faults *f;
  conn *c;
  int action;
  double delay;
} exchange;

static void push_request (lua_State *L, exchange *x) {
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

static lua_Integer int_field (lua_State *L, int t, const char *name,
                              lua_Integer def, lua_Integer lo, lua_Integer hi) {
  int isint;
  lua_Integer v;
  if (lua_getfield(L, t, name) == LUA_TNIL) { lua_pop(L, 1); return def; }
  v = lua_tointegerx(L, -1, &isint);
  if (!isint || v < lo || v > hi)
    luaL_error(L, "respond: '%s' must be an integer in %I..%I", name, lo, hi);
  lua_pop(L, 1);
  return v;
}

/* A header name or value from the script, checked so it cannot break the
   framing. */
static const char *header_text (lua_State *L, int idx, int is_name) {
  size_t len, i;
  const char *s;
  int t = lua_type(L, idx);
  if (t != LUA_TSTRING && t != LUA_TNUMBER)
    luaL_error(L, "respond: header %s must be a string, got %s",
               is_name ? "name" : "value", luaL_typename(L, idx));
  s = lua_tolstring(L, idx, &len);
  for (i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '\r' || ch == '\n' || ch == '\0' ||
        (is_name && (ch <= ' ' || ch == ':' || ch >= 0x7f)))
      luaL_error(L, "respond: bad character in header %s '%s'",
                 is_name ? "name" : "value", s);
  }
  if (is_name && len == 0) luaL_error(L, "respond: empty header name");
  return s;
}

/* Write the headers of table `t` into the response. */
static void put_headers (lua_State *L, int t, conn *c, int *has_connection) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    const char *name;
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "respond: header names must be strings");
    name = header_text(L, -2, 1);
    if (strcasecmp(name, "content-length") != 0 &&
        strcasecmp(name, "transfer-encoding") != 0) {
      int list = lua_istable(L, -1);
      lua_Integer n = list ? luaL_len(L, -1) : 1;
      for (lua_Integer i = 1; i <= n; i++) {
        const char *value;
        if (list) lua_geti(L, -1, i);
        value = header_text(L, -1, 0);
        if (strcasecmp(name, "connection") == 0) {
          *has_connection = 1;
          if (strcasestr(value, "close")) c->close_after = 1;
        }
        sb_str(&c->out, name);
        sb_str(&c->out, ": ");
        sb_str(&c->out, value);
        sb_str(&c->out, "\r\n");
        if (list) lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
}

/* Turn the script's answer (at the top of the stack) into a response. */
static void put_answer (lua_State *L, exchange *x) {
  conn *c = x->c;
  int t = lua_gettop(L), status = 200, has_connection = 0;
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
      luaL_error(L, "respond returned %s (expected a table, a status number"
                 " or a body string)", luaL_typename(L, t));
  }
  if (lua_istable(L, t)) {
    status = (int)int_field(L, t, "status", 200, 100, 999);
    if (lua_getfield(L, t, "reason") != LUA_TNIL)
      reason = header_text(L, -1, 0);
    if (lua_getfield(L, t, "body") != LUA_TNIL) {
      if (!lua_isstring(L, -1))
        luaL_error(L, "respond: 'body' must be a string, got %s",
                   luaL_typename(L, -1));
      body = lua_tolstring(L, -1, &len);
    }
    if (lua_getfield(L, t, "delay") != LUA_TNIL) {
      int isnum;
      x->delay = lua_tonumberx(L, -1, &isnum);
      if (!isnum || !(x->delay >= 0) || isinf(x->delay))
        luaL_error(L, "respond: 'delay' must be a number of seconds >= 0");
    }
    truncate = int_field(L, t, "truncate", -1, 0, LUA_MAXINTEGER);
    if (lua_getfield(L, t, "hang") != LUA_TNIL && lua_toboolean(L, -1)) {
      x->action = A_HANG;
      return;
    }
    if (lua_getfield(L, t, "reset") != LUA_TNIL && lua_toboolean(L, -1)) {
      x->action = A_RESET;
      return;
    }
  }
  if (reason == NULL) reason = lr_http_reason(status);
  sb_fmt(&c->out, "HTTP/1.1 %d ", status);
  sb_str(&c->out, reason);
  sb_str(&c->out, "\r\n");
  if (lua_istable(L, t) && lua_getfield(L, t, "headers") != LUA_TNIL) {
    if (!lua_istable(L, -1))
      luaL_error(L, "respond: 'headers' must be a table, got %s",
                 luaL_typename(L, -1));
    put_headers(L, lua_gettop(L), c, &has_connection);
  }
  sb_fmt(&c->out, "Content-Length: %zu\r\n", len);
  if (c->close_after && !has_connection)
    sb_str(&c->out, "Connection: close\r\n");
  sb_str(&c->out, "\r\n");
  sent = truncate >= 0 && (size_t)truncate < len ? (size_t)truncate : len;
  if (!head_only) sb_add(&c->out, body, sent);
  if (truncate >= 0) c->close_after = 1;  /* unannounced, like a real cut */
}

static int run_script (lua_State *L) {
  exchange *x = (exchange *)lua_touserdata(L, 1);
  luaL_checkstack(L, 24, NULL);  /* put_answer keeps its fields on the stack */
  if (lua_getglobal(L, "respond") == LUA_TFUNCTION) {
    push_request(L, x);
    lua_call(L, 1, 1);
  }
  else {  /* a fixed answer; still count the request */
    push_request(L, x);
    lua_pop(L, 1);
  }
  put_answer(L, x);
  return 0;
}

static int reset_paths (lua_State *L) {
  lr_faults *f = (lr_faults *)lua_touserdata(L, 1);
  lua_newtable(L);
  lua_rawseti(L, LUA_REGISTRYINDEX, f->paths_ref);
  return 0;
}

static void answer_script (lr_faults *f, conn *c) {
  lua_State *L = f->L;
  exchange x = {f, c, A_SEND, 0};
  size_t mark = c->out.len;
  f->total++;
  log_entry(f, c);
  lua_pushcfunction(L, run_script);
  lua_pushlightuserdata(L, &x);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    if (msg == NULL) msg = "(error object is not a string)", len = strlen(msg);
    c->out.len = mark;  /* drop a half-written answer */
    x.action = A_SEND;
    x.delay = 0;
    put_simple(c, 500, "text/plain", msg, len);
    lua_pop(L, 1);
  }
  if (x.action == A_HANG) { c->state = C_HANG; return; }
  if (x.delay > 0) {
    c->state = C_DELAY;
    c->due = elapsed(f) + x.delay;
    c->hold = mark;
    c->reset_when_due = x.action == A_RESET;
  }
  else if (x.action == A_RESET) conn_close(f, c, 1);
  else c->state = C_WRITE;
}

static void answer_builtin (lr_faults *f, conn *c) {
  const char *what = c->req.path + strlen(BUILTIN), *m = c->req.method;
  if (strcmp(what, "requests") == 0 &&
      (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0)) {
    sbuf b = {0};
    sb_add(&b, "[", 1);
    for (size_t i = 0; i < f->log_count; i++) {
      if (i > 0) sb_add(&b, ",\n", 2);
      sb_str(&b, f->log[(f->log_first + i) % LOG_MAX]);
    }
    sb_add(&b, "]\n", 2);
    if (b.oom) put_simple(c, 500, "text/plain", "out of memory\n", 14);
    else put_simple(c, 200, "application/json", b.p, b.len);
    sb_free(&b);
  }
  else if (strcmp(what, "reset") == 0 && strcmp(m, "POST") == 0) {
    log_clear(f);
    f->total = 0;
    lua_pushcfunction(f->L, reset_paths);
    lua_pushlightuserdata(f->L, f);
    if (lua_pcall(f->L, 1, 0, 0) != LUA_OK) {
      lua_pop(f->L, 1);
      put_simple(c, 500, "text/plain", "out of memory\n", 14);
    }
    else put_simple(c, 200, "application/json", "{\"ok\":true}\n", 12);
  }
  else if (strcmp(what, "requests") == 0 || strcmp(what, "reset") == 0)
    put_simple(c, 405, "text/plain", "method not allowed\n", 19);
  else put_simple(c, 404, "text/plain", "not found\n", 10);
}

static void answer (lr_faults *f, conn *c) {
  lr_http_req *r = &c->req;
  c->close_after = !r->keep_alive || c->eof;
  if (strncmp(r->path, BUILTIN, strlen(BUILTIN)) == 0) answer_builtin(f, c);
  else answer_script(f, c);
  if (c->state == C_DEAD) return;
  /* the request is done with: keep only what follows it */
  memmove(c->in, c->in + r->end, c->inlen - r->end);
  c->inlen -= r->end;
  memset(r, 0, sizeof *r);
  c->head_seen = 0;
  if (c->incap > 4 * READ_MIN && c->inlen < READ_MIN) {  /* after a big body */
    char *p = realloc(c->in, 2 * READ_MIN);
    if (p) { c->in = p; c->incap = 2 * READ_MIN; }
  }
}

/* Do everything that can be done without waiting. */
static void conn_advance (lr_faults *f, conn *c) {
  while (c->state != C_DEAD) {
    int st;
    if (!conn_flush(f, c)) return;
    if (c->state == C_WRITE) {
      if (c->out.len > 0) return;  /* the rest when the socket drains */
      if (c->close_after) { conn_close(f, c, 0); return; }
      c->state = C_READ;
    }
    if (c->state != C_READ) return;
    st = lr_http_parse(&c->req, c->in, &c->inlen);
    if (c->req.head_len > 0 && !c->head_seen) {
      c->head_seen = 1;
      c->head_time = elapsed(f);
      /* curl waits up to a second for this before sending the body */
      if (st == LR_HTTP_MORE && c->req.expect_continue &&
          c->req.minor == 1 && !lr_http_body_done(&c->req))
        sb_str(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
    }
    if (st == LR_HTTP_MORE) {
      if (c->eof) conn_close(f, c, 0);
      else if (c->out.len > 0) continue;  /* send the 100 Continue */
      return;
    }
    if (st == LR_HTTP_DONE) answer(f, c);
    else {
      char msg[64];
      int n = snprintf(msg, sizeof msg, "%d %s\n", st, lr_http_reason(st));
      c->close_after = 1;
      put_simple(c, st, "text/plain", msg, (size_t)n);
    }
  }
}

static void conn_event (lr_faults *f, conn *c, short rev) {
  if (rev == 0 || c->state == C_DEAD) return;
  if (rev & POLLNVAL) { conn_close(f, c, 0); return; }
  if (c->state == C_HANG) {  /* read and drop until the client leaves */
    char tmp[4096];
    ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      conn_close(f, c, 0);
    return;
  }
  if (c->state == C_READ && !c->eof && (rev & (POLLIN | POLLHUP | POLLERR)))
    conn_read(f, c);
  else if (rev & (POLLHUP | POLLERR)) { conn_close(f, c, 0); return; }
  conn_advance(f, c);
}

static void accept_all (lr_faults *f) {
  for (;;) {
    int fd = accept4(f->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    int one = 1;
    conn *c;
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) f->accept_paused = 1;
      return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (f->nconns == f->capconns) {
      size_t cap = f->capconns ? f->capconns * 2 : 64;
      conn **p = realloc(f->conns, cap * sizeof *p);
      if (p == NULL) { close(fd); f->accept_paused = 1; return; }
      f->conns = p;
      f->capconns = cap;
    }
    if ((c = calloc(1, sizeof *c)) == NULL) {
      close(fd);
      f->accept_paused = 1;
      return;
    }
    c->fd = fd;
    c->state = C_READ;
    f->conns[f->nconns++] = c;
  }
}

int lr_faults_serve (lr_faults *f) {
  for (;;) {
    size_t n = f->nconns, i, j;
    int timeout = -1, ready;
    double now = elapsed(f);
    if (f->cappfds < n + 2) {
      size_t cap = (n + 2) * 2;
      struct pollfd *p = realloc(f->pfds, cap * sizeof *p);
      if (p == NULL) { errno = ENOMEM; return -1; }
      f->pfds = p;
      f->cappfds = cap;
    }
    f->pfds[0] = (struct pollfd){f->wake_fd, POLLIN, 0};
    f->pfds[1] = (struct pollfd){f->accept_paused ? -1 : f->listen_fd, POLLIN, 0};
    if (f->accept_paused) timeout = 100;
    for (i = 0; i < n; i++) {
      conn *c = f->conns[i];
      short ev = 0;
      switch (c->state) {
        case C_READ:
          ev = (short)((c->eof ? 0 : POLLIN) | (c->out.len ? POLLOUT : 0));
          break;
        case C_WRITE: ev = POLLOUT; break;
        case C_HANG: ev = POLLIN; break;
        case C_DELAY: {
          double ms = (c->due - now) * 1000;
          int wait = ms <= 0 ? 0 : ms > 86400000 ? 86400000
                   : (int)ms + ((double)(int)ms < ms);  /* round up */
          if (c->outoff < c->hold) ev = POLLOUT;
          if (timeout < 0 || wait < timeout) timeout = wait;
          break;
        }
      }
      f->pfds[i + 2] = (struct pollfd){c->fd, ev, 0};
    }
    ready = poll(f->pfds, n + 2, timeout);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (f->pfds[0].revents) return 0;  /* the eventfd stays set: stop sticks */
    f->accept_paused = 0;
    if (f->pfds[1].revents & POLLIN) accept_all(f);
    for (i = 0; i < n; i++) conn_event(f, f->conns[i], f->pfds[i + 2].revents);
    now = elapsed(f);
    for (i = 0; i < f->nconns; i++) {
      conn *c = f->conns[i];
      if (c->state != C_DELAY || c->due > now) continue;
      if (c->reset_when_due) conn_close(f, c, 1);
      else { c->state = C_WRITE; conn_advance(f, c); }
    }
    for (i = j = 0; i < f->nconns; i++) {
      if (f->conns[i]->state == C_DEAD) free(f->conns[i]);
      else f->conns[j++] = f->conns[i];
    }
    f->nconns = j;
  }
}


/* ------------------------------------------------------------ set up */

/* Split "HOST:PORT", "[V6]:PORT", ":PORT", "PORT" or "HOST". */
static int split_listen (const char *addr, char *host, size_t hostlen,
                         char *port, size_t portlen) {
  const char *colon, *h = addr, *p = NULL;
  size_t hl;
  snprintf(port, portlen, "0");
  if (addr[0] == '[') {
    const char *rb = strchr(addr, ']');
    if (rb == NULL || (rb[1] != '\0' && rb[1] != ':')) return -1;
    h = addr + 1;
    hl = (size_t)(rb - h);
    colon = rb[1] ? rb + 1 : NULL;
  }
  else if ((colon = strrchr(addr, ':')) != NULL) {
    if (memchr(addr, ':', (size_t)(colon - addr))) return -1;  /* bare v6 */
    hl = (size_t)(colon - addr);
  }
  else if (addr[strspn(addr, "0123456789")] == '\0') {
    hl = 0;  /* just a port */
    colon = NULL;
    p = addr;
  }
  else hl = strlen(addr);
  if (colon) p = colon + 1;
  if (p) {
    size_t digits = strspn(p, "0123456789");
    if (digits == 0 || digits > 5 || p[digits] != '\0' || atoi(p) > 65535)
      return -1;
    snprintf(port, portlen, "%s", p);
  }
  if (hl == 0) { h = "127.0.0.1"; hl = 9; }  /* never all interfaces by default */
  if (hl >= hostlen) return -1;
  memcpy(host, h, hl);
  host[hl] = '\0';
  return 0;
}

static int bind_listen (lr_faults *f, const char *addr, char *err,
                        size_t errlen) {
  char host[256], port[8];
  struct addrinfo hints, *res = NULL;
  struct sockaddr_storage ss;
  socklen_t sslen = sizeof ss;
  int rc, saved = EADDRNOTAVAIL;
  if (addr == NULL) addr = "127.0.0.1:0";
  if (split_listen(addr, host, sizeof host, port, sizeof port) != 0) {
    snprintf(err, errlen, "bad listen address '%s' (expected HOST:PORT)",
             addr);
    return -1;
  }
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  if ((rc = getaddrinfo(host, port, &hints, &res)) != 0) {
    snprintf(err, errlen, "cannot listen on %s: %s", addr, gai_strerror(rc));
    return -1;
  }
  /* IPv4 first, so "localhost" means 127.0.0.1 where both exist */
  for (int pass = 0; pass < 2 && f->listen_fd < 0; pass++)
    for (struct addrinfo *a = res; a && f->listen_fd < 0; a = a->ai_next) {
      int fd, one = 1;
      if ((a->ai_family == AF_INET) != (pass == 0)) continue;
      fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                  a->ai_protocol);
      if (fd < 0) { saved = errno; continue; }
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 ||
          listen(fd, SOMAXCONN) != 0) {
        saved = errno;
        close(fd);
        continue;
      }
      f->listen_fd = fd;
    }
  freeaddrinfo(res);
  if (f->listen_fd < 0) {
    snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(saved));
    return -1;
  }
  getsockname(f->listen_fd, (struct sockaddr *)&ss, &sslen);
  if (ss.ss_family == AF_INET6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    char a[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof a);
    f->port = ntohs(s6->sin6_port);
    snprintf(f->address, sizeof f->address, "[%s]:%d", a, f->port);
  }
  else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    char a[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &s4->sin_addr, a, sizeof a);
    f->port = ntohs(s4->sin_port);
    snprintf(f->address, sizeof f->address, "%s:%d", a, f->port);
  }
  return 0;
}

static int load_script (lr_faults *f, const char *path, const char *chunkname,
                        const char *source, char *err, size_t errlen) {
  lua_State *L = f->L = luaL_newstate();
  const char *name = path ? path : chunkname;
  int st;
  if (L == NULL) { snprintf(err, errlen, "%s: out of memory", name); return -1; }
  luaL_openlibs(L);
  st = luaL_loadbufferx(L, prelude, sizeof prelude - 1, "=faults prelude", "t");
  if (st == LUA_OK) st = lua_pcall(L, 0, 0, 0);
  if (st == LUA_OK) {
    lua_newtable(L);
    f->paths_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    if (path) st = luaL_loadfilex(L, path, "t");
    else {  /* "@name" so messages read "name:line: ..." */
      lua_pushfstring(L, "%s%s", strchr("@=", chunkname[0]) ? "" : "@",
                      chunkname);
      st = luaL_loadbufferx(L, source, strlen(source), lua_tostring(L, -1), "t");
      lua_remove(L, -2);
    }
  }
  if (st == LUA_OK) st = lua_pcall(L, 0, 0, 0);
  if (st != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    snprintf(err, errlen, "%s", msg ? msg : "error object is not a string");
    return -1;
  }
  if (lua_getglobal(L, "respond") == LUA_TNIL) {
    snprintf(err, errlen, "%s: the script defines no global 'respond'", name);
    return -1;
  }
  lua_pop(L, 1);
  return 0;
}

static lr_faults *open_any (const char *path, const char *chunkname,
                            const char *source, const char *listen,
                            char *err, size_t errlen) {
  lr_faults *f = calloc(1, sizeof *f);
  if (f == NULL) { snprintf(err, errlen, "out of memory"); return NULL; }
  f->listen_fd = -1;
  f->wake_fd = -1;
  clock_gettime(CLOCK_MONOTONIC, &f->t0);
  if (load_script(f, path, chunkname, source, err, errlen) != 0 ||
      bind_listen(f, listen, err, errlen) != 0) {
    lr_faults_free(f);
    return NULL;
  }
  if ((f->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
    snprintf(err, errlen, "eventfd: %s", strerror(errno));
    lr_faults_free(f);
    return NULL;
  }
  return f;
}

lr_faults *lr_faults_open (const char *script_path, const char *listen,
                           char *err, size_t errlen) {
  if (script_path == NULL) { snprintf(err, errlen, "no script"); return NULL; }
  return open_any(script_path, NULL, NULL, listen, err, errlen);
}

lr_faults *lr_faults_open_string (const char *chunkname, const char *source,
                                  const char *listen, char *err,
                                  size_t errlen) {
  if (source == NULL) { snprintf(err, errlen, "no script"); return NULL; }
  if (chunkname == NULL || chunkname[0] == '\0') chunkname = "=script";
  return open_any(NULL, chunkname, source, listen, err, errlen);
}

static void *serve_thread (void *arg) {
  lr_faults_serve((lr_faults *)arg);
  return NULL;
}

static lr_faults *start (lr_faults *f, char *err, size_t errlen) {
  int rc;
  if (f == NULL) return NULL;
  if ((rc = pthread_create(&f->thread, NULL, serve_thread, f)) != 0) {
    snprintf(err, errlen, "cannot start the server thread: %s", strerror(rc));
    lr_faults_free(f);
    return NULL;
  }
  f->threaded = 1;
  return f;
}

lr_faults *lr_faults_start (const char *script_path, const char *listen,
                            char *err, size_t errlen) {
  return start(lr_faults_open(script_path, listen, err, errlen), err, errlen);
}

lr_faults *lr_faults_start_string (const char *chunkname, const char *source,
                                   const char *listen, char *err,
                                   size_t errlen) {
  return start(lr_faults_open_string(chunkname, source, listen, err, errlen),
               err, errlen);
}

int lr_faults_port (const lr_faults *f) { return f ? f->port : 0; }

const char *lr_faults_address (const lr_faults *f) {
  return f ? f->address : "";
}

void lr_faults_stop (lr_faults *f) {
  int saved = errno;  /* may run in a signal handler */
  uint64_t one = 1;
  if (f && f->wake_fd >= 0 && write(f->wake_fd, &one, sizeof one) < 0) {
    /* only fails when the counter is saturated: already stopping */
  }
  errno = saved;
}

void lr_faults_free (lr_faults *f) {
  if (f == NULL) return;
  if (f->threaded) {
    lr_faults_stop(f);
    pthread_join(f->thread, NULL);
  }
  for (size_t i = 0; i < f->nconns; i++) {
    conn *c = f->conns[i];
    if (c->state != C_DEAD) { close(c->fd); free(c->in); sb_free(&c->out); }
    free(c);
  }
  free(f->conns);
  free(f->pfds);
  if (f->log) { log_clear(f); free(f->log); }
  if (f->L) lua_close(f->L);
  if (f->listen_fd >= 0) close(f->listen_fd);
  if (f->wake_fd >= 0) close(f->wake_fd);
  free(f);
}
