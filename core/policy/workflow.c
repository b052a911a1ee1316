/* workflow.c: a policy's run(http, args).  The script makes its requests
 * through http.get/put/post/request, each one attempt through the host's
 * transport (libcurl in the CLI); the status and body run() returns are
 * judged like a response, and a transient verdict re-runs the whole
 * workflow: that is how a read-modify-write (IAM's 409 ABORTED) is retried
 * as a whole.  No HTTP library here: the transport is a callback. */
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "policy.h"

#define MAX_REQUEST_HEADERS 64

typedef struct {
  lr_script *s;
  const char *const *args;
  int nargs;
  luaretry_transport_fn transport;
  void *ud;
  double timeout;             /* for the whole run: its requests share it */
  double started;             /* monotonic seconds */
  luaretry_code transport_rc; /* a transport that gave up ends the run */
  int status;
  int time_up; /* a request found the attempt's time used up */
} workflow;

/* The string at idx, whole: one with a NUL byte is refused (the request
 * would be cut at it, a header's value without a word). */
static const char *whole(lua_State *L, int idx, const char *what) {
  size_t len;
  const char *s = lua_tolstring(L, idx, &len);
  if (s && memchr(s, '\0', len)) luaL_error(L, "http: %s holds a NUL byte", what);
  return s;
}

/* Reads request.headers (a table at idx) into h.  The strings are the
 * table's; a number's, made here, is kept in a table left on the stack
 * (popped, nothing would hold it while the request goes). */
static size_t read_headers(lua_State *L, int idx, luaretry_header *h) {
  size_t n = 0;
  if (lua_isnoneornil(L, idx)) return 0;
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_newtable(L);
  int made = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (n == MAX_REQUEST_HEADERS) luaL_error(L, "http: more than %d headers", MAX_REQUEST_HEADERS);
    if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
      luaL_error(L, "http: headers must map names to strings");
    int number = lua_type(L, -1) == LUA_TNUMBER; /* made a string below */
    h[n].name = whole(L, -2, "a header name");
    h[n].value = whole(L, -1, "a header value");
    if (number)
      lua_rawseti(L, made, (lua_Integer)n + 1); /* kept, and popped */
    else
      lua_pop(L, 1);
    n++;
  }
  return n;
}

/* A script reaches http and https only, and cannot split a request. */
static void check_request(lua_State *L, const luaretry_request *req) {
  if (strncasecmp(req->url, "http://", 7) != 0 && strncasecmp(req->url, "https://", 8) != 0)
    luaL_error(L, "http: only http and https URLs can be requested, not \"%s\"",
               lr_quote_clip(L, req->url));
  const char *texts[2] = { req->url, req->method };
  for (int i = 0; i < 2; i++)
    if (texts[i] && strpbrk(texts[i], "\r\n"))
      luaL_error(L, "http: the %s holds a line break", i ? "method" : "URL");
  if (!lr_header_name_ok(req->method, strlen(req->method))) /* RFC 9110's token, as a name's */
    luaL_error(L, "http: the method \"%s\" is not a method (%s)", lr_quote_clip(L, req->method),
               LR_HEADER_NAME_RULE);
  for (size_t i = 0; i < req->header_count; i++) /* prepare's rule for a name (RFC 9110) */
    if (!lr_header_name_ok(req->headers[i].name, strlen(req->headers[i].name)) ||
        strpbrk(req->headers[i].value, "\r\n"))
      luaL_error(L, "http: header \"%s\" holds a line break or is not a name (%s)",
                 lr_quote_clip(L, req->headers[i].name), LR_HEADER_NAME_RULE);
}

static int perform(lua_State *L, luaretry_request *req) {
  workflow *w = lua_touserdata(L, lua_upvalueindex(1));
  check_request(L, req);
  /* one attempt's time for the whole run: each request gets what is left;
   * with none left the round ends here, a timed-out attempt (run_in) */
  double timeout = w->timeout;
  if (timeout > 0) {
    timeout -= lr_monotonic_now() - w->started;
    if (timeout <= 0) {
      char secs[32]; /* lua_pushfstring knows no precision */
      lr_fmt(secs, sizeof secs, "%.3f", w->timeout);
      w->time_up = 1;
      return luaL_error(L, "http: %s %s: the attempt's time (%s s) is used up", req->method,
                        req->url, secs);
    }
  }
  luaretry_response resp;
  memset(&resp, 0, sizeof resp);
  /* the request's time is not the script's; the script's own, before and
   * after it, adds up over the run() call (a loop of requests still
   * reaches time_limit on its own time) */
  long paused_at = lr_watchdog_tick();
  lr_sandbox_pause(w->s->sb);
  luaretry_code rc = w->transport(w->ud, req, timeout, &resp);
  lr_sandbox_resume_from(w->s->sb, paused_at);
  if (rc != LUARETRY_OK) {
    w->transport_rc = rc;
    return luaL_error(L, "http: %s %s: %s", req->method, req->url, luaretry_strerror(rc));
  }
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, resp.status);
  lua_setfield(L, -2, "status");
  lua_pushlstring(L, resp.body ? resp.body : "", resp.body ? resp.body_len : 0);
  lua_setfield(L, -2, "body");
  if (resp.error) {
    lua_pushstring(L, resp.error);
    lua_setfield(L, -2, "error");
  }
  if (resp.error_detail) {
    lua_pushstring(L, resp.error_detail);
    lua_setfield(L, -2, "error_detail");
  }
  /* a transport's slip is named, never read through */
  if (resp.header_count && !resp.headers)
    return luaL_error(L,
                      "http: %s %s: the transport's response has %d headers and no array of them",
                      req->method, req->url, (int)resp.header_count);
  lua_createtable(L, 0, (int)resp.header_count);
  for (size_t i = 0; i < resp.header_count; i++) {
    if (!resp.headers[i].name)
      return luaL_error(L, "http: %s %s: the transport's response header %d of %d has a NULL name",
                        req->method, req->url, (int)i + 1, (int)resp.header_count);
    /* a name said twice keeps its first value, as info.headers does */
    if (lua_getfield(L, -1, resp.headers[i].name) == LUA_TNIL) {
      lua_pushstring(L, resp.headers[i].value);
      lua_setfield(L, -3, resp.headers[i].name);
    }
    lua_pop(L, 1);
  }
  lua_setfield(L, -2, "headers");
  return 1;
}

/* http.get(url [, headers]) */
static int http_get(lua_State *L) {
  luaretry_header h[MAX_REQUEST_HEADERS];
  luaretry_request req = { .method = "GET", .url = luaL_checkstring(L, 1), .headers = h };
  whole(L, 1, "the URL");
  req.header_count = read_headers(L, 2, h);
  return perform(L, &req);
}

/* http.put / http.post (url, body [, headers]) */
static int send_body(lua_State *L, const char *method) {
  luaretry_header h[MAX_REQUEST_HEADERS];
  luaretry_request req = { .method = method, .url = luaL_checkstring(L, 1), .headers = h };
  whole(L, 1, "the URL");
  req.body = luaL_checklstring(L, 2, &req.body_len);
  req.header_count = read_headers(L, 3, h);
  return perform(L, &req);
}

static int http_put(lua_State *L) { return send_body(L, "PUT"); }
static int http_post(lua_State *L) { return send_body(L, "POST"); }

/* http.request{method =, url =, headers =, body =} */
static int http_request(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaretry_header h[MAX_REQUEST_HEADERS];
  luaretry_request req = { .headers = h };
  lua_settop(L, 1);
  lua_getfield(L, 1, "method");
  req.method = luaL_optstring(L, 2, "GET");
  if (!lua_isnil(L, 2)) whole(L, 2, "the method");
  lua_getfield(L, 1, "url");
  if (!lua_isstring(L, 3)) return luaL_error(L, "http.request: url must be a string");
  req.url = whole(L, 3, "the URL");
  lua_getfield(L, 1, "body");
  if (!lua_isnil(L, 4)) req.body = luaL_checklstring(L, 4, &req.body_len);
  lua_getfield(L, 1, "headers");
  req.header_count = read_headers(L, 5, h);
  return perform(L, &req);
}

static int run_protected(lua_State *L) {
  workflow *w = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, w->s->ref_run);
  /* where run() is defined: what its answer's errors name (the script's
   * own errors name their line) */
  lua_Debug ar;
  lua_pushvalue(L, -1);
  char where[LUA_IDSIZE + 24] = "run";
  if (lua_getinfo(L, ">S", &ar) && ar.linedefined > 0)
    lr_fmt(where, sizeof where, "%s:%d: run", ar.short_src, ar.linedefined);
  static const luaL_Reg fns[] = { { "get", http_get },
                                  { "put", http_put },
                                  { "post", http_post },
                                  { "request", http_request },
                                  { NULL, NULL } };
  lua_createtable(L, 0, 4);
  lua_pushlightuserdata(L, w);
  luaL_setfuncs(L, fns, 1);
  lua_createtable(L, w->nargs, 0);
  for (int i = 0; i < w->nargs; i++) {
    lua_pushstring(L, w->args[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_call(L, 2, 2);
  lua_Integer status = lua_tointeger(L, -2);
  if (!lua_isinteger(L, -2) || (lua_type(L, -1) != LUA_TSTRING && !lua_isnil(L, -1)))
    return luaL_error(L,
                      "%s must return status, body (an integer and a string), "
                      "not a %s and a %s",
                      where, luaL_typename(L, -2), luaL_typename(L, -1));
  if (status < 0 || status > 999)
    return luaL_error(L, "%s returned status %I: a status is from 0 to 999", where, status);
  w->status = (int)status;
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_pushliteral(L, "");
  }
  return 1;
}

int luaretry_policy_has_workflow(const luaretry_policy *p) {
  lr_gen *g = lr_policy_ok(p) ? lr_policy_current((luaretry_policy *)p) : NULL;
  int has = g && g->has_run;
  lr_gen_unref(g);
  return has;
}

/* A round a request ended when the attempt's time was used up: what a
 * single request's attempt is at its timeout (status 0, error "timeout"),
 * judged as that is; whatever run() did after it (caught the error,
 * returned) is not the round's outcome, its time being over. */
static void timed_out(luaretry_outcome *out) {
  luaretry_outcome_init(out);
  out->workflow = 1;
  out->error = "timeout";
  out->error_detail = "a request of run() found the attempt's time used up";
  out->body = "";
  out->method = "RUN";
}

/* Runs the workflow in state s; its body into p's buffer. */
static luaretry_code run_in(luaretry_policy *p, lr_script *s, workflow *w, luaretry_outcome *out) {
  char err[1024];
  s->cur_call = lr_operation_call;
  luaretry_code rc =
    lr_sandbox_call(s->sb, run_protected, w, 1, LUARETRY_E_POLICY, err, sizeof err);
  s->cur_call = NULL;
  /* a limit the script reached, or a transport that gave up, stays what it is */
  if (w->time_up && w->transport_rc == LUARETRY_OK &&
      (rc == LUARETRY_OK || rc == LUARETRY_E_POLICY)) {
    if (rc == LUARETRY_OK) lua_pop(s->sb->L, 1); /* the body it returned */
    timed_out(out);
    return LUARETRY_OK;
  }
  if (rc != LUARETRY_OK) {
    char msg[sizeof err + 8];
    lr_fmt(msg, sizeof msg, "run: %s", err);
    lr_policy_error(p, msg);
    return w->transport_rc != LUARETRY_OK ? w->transport_rc : rc;
  }
  size_t len;
  const char *body = lua_tolstring(s->sb->L, -1, &len);
  char *copy = malloc(len + 1);
  if (copy) memcpy(copy, body, len + 1);
  lua_pop(s->sb->L, 1);
  if (!copy) return LUARETRY_E_NOMEM;
  free(p->workflow_body);
  p->workflow_body = copy;
  luaretry_outcome_init(out);
  out->workflow = 1;
  out->status = w->status;
  out->body = copy;
  out->body_len = len;
  out->method = "RUN";
  return LUARETRY_OK;
}

luaretry_code luaretry_policy_run_workflow(luaretry_policy *p, const char *const *args, int nargs,
                                           luaretry_transport_fn transport, void *ud,
                                           double timeout, luaretry_outcome *out) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  /* NaN or a negative timeout had been taken for none, the opposite of a bound */
  if (!transport || !out || nargs < 0 || (nargs && !args) || !(timeout >= 0)) {
    char *err = lr_policy_errbuf(p); /* named, not the last failure's */
    if (!transport || !out)
      lr_fmt(err, LR_ERRMSG_SIZE, "luaretry_policy_run_workflow: %s is NULL",
             !transport ? "the transport" : "out");
    else if (!(timeout >= 0))
      lr_fmt(err, LR_ERRMSG_SIZE,
             "luaretry_policy_run_workflow: timeout %g is not a number of seconds (0: none)",
             timeout);
    else if (nargs < 0)
      lr_fmt(err, LR_ERRMSG_SIZE, "luaretry_policy_run_workflow: nargs %d is below 0", nargs);
    else
      lr_fmt(err, LR_ERRMSG_SIZE,
             "luaretry_policy_run_workflow: %d args and no array of them (args NULL)", nargs);
    return LUARETRY_E_ARG;
  }
  lr_gen *g = lr_policy_current(p);
  if (!g) return lr_policy_unloaded(p, "luaretry_policy_run_workflow");
  luaretry_code rc = LUARETRY_E_STATE;
  lr_script *s = NULL;
  char err[256];
  if (!g->has_run) {
    lr_policy_error(p, "the policy defines no run(http, args) workflow");
  } else if (!(s = lr_gen_borrow(g, err, sizeof err))) {
    lr_policy_error(p, err);
    rc = LUARETRY_E_NOMEM;
  }
  if (s) {
    workflow w = { s, args, nargs, transport, ud, timeout, lr_monotonic_now(), LUARETRY_OK, 0, 0 };
    rc = run_in(p, s, &w, out);
    lr_gen_return(s);
  }
  lr_gen_unref(g);
  return rc;
}
