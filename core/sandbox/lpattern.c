/* lpattern.c: Lua 5.4 pattern matching (reference manual section 6.4.1)
 * whose every step is paid for from the sandbox's budget: its instruction
 * limit when the host set one, else steps between two looks at the clock.
 *
 * Ported from Lua 5.4.4's lstrlib.c (Debian's liblua5.4-dev): the functions
 * keep lstrlib.c's names (MatchState, classEnd, singlematch, max_expand,
 * min_expand, matchbalance, match_capture, start_capture, end_capture,
 * str_find_aux, gmatch_aux, add_s, add_value, str_gsub...), so a fix
 * upstream can be found with a diff.
 *
 * The matcher backtracks like Lua's own: an item is tried, then what follows
 * it, and a failure undoes the last choice.  Errors in the pattern are found
 * where the matcher reaches them, as in Lua, so a pattern that is malformed
 * after a part that never matches is not an error.
 *
 * The price, in instructions: 1 per call of match() (so per backtracking
 * step and per start position tried), 1 per character an item takes, 1 per
 * BULK bytes of memchr/memcmp work and of [set] scanned, 1 per 4 bytes a %b
 * scans.  When sb->remaining runs out the sandbox is killed (lr_sandbox_refuel)
 * exactly as a hook would do it: sticky, with the script's file and line. */
#include <ctype.h>
#include <lauxlib.h>
#include <string.h>

#include "engine/engine.h"
#include "lpattern.h"
#include "sandbox.h"

#define MAX_CAPTURES 32   /* LUA_MAXCAPTURES */
#define MAX_DEPTH    200  /* nested match() calls: "pattern too complex" */
#define CAP_OPEN     (-1) /* capture length while it is still open */
#define CAP_POSITION (-2) /* a () capture */
#define BULK         16   /* bytes of bulk work per unit */

#define uc(c) ((unsigned char)(c))

typedef struct {
  const char *s0, *s_end; /* the subject */
  const char *p_end;      /* the end of the pattern */
  lua_State *L;
  lr_sandbox *sb;
  long fuel; /* sb->remaining, held here while matching */
  int depth; /* match() calls left before "too complex" */
  int ncap;
  struct {
    const char *at;
    ptrdiff_t len;
  } cap[MAX_CAPTURES];
} MatchState;

/* ---- the budget: the sandbox's instructions, or steps between two looks
 * at the clock (lr_sandbox_refuel decides which) */

static lr_sandbox *enter(lua_State *L) {
  lr_sandbox *sb = lr_sandbox_of(L);
  if (sb->killed) lr_sandbox_kill(L, sb, sb->killed);
  if (sb->remaining <= 0) lr_sandbox_refuel(L, sb);
  return sb;
}

static void sync_out(MatchState *m);

static void out_of_fuel(MatchState *m) {
  sync_out(m);
  lr_sandbox_refuel(m->L, m->sb);
  m->fuel = m->sb->remaining;
}

#define CHARGE(m, n)                                   \
  do {                                                 \
    if (((m)->fuel -= (long)(n)) <= 0) out_of_fuel(m); \
  } while (0)
/* Pattern errors hand the fuel back first. */
#define FAIL(m, ...) (sync_out(m), luaL_error((m)->L, __VA_ARGS__))

static void sync_out(MatchState *m) { m->sb->remaining = m->fuel > 0 ? m->fuel : 0; }

/* ---- single characters and classes */

/* %a, %d, ... and their upper-case complements; any other x is itself. */
static int match_class(int c, int cl) {
  int r;
  switch (tolower(cl)) {
  case 'a': r = isalpha(c); break;
  case 'c': r = iscntrl(c); break;
  case 'd': r = isdigit(c); break;
  case 'g': r = isgraph(c); break;
  case 'l': r = islower(c); break;
  case 'p': r = ispunct(c); break;
  case 's': r = isspace(c); break;
  case 'u': r = isupper(c); break;
  case 'w': r = isalnum(c); break;
  case 'x': r = isxdigit(c); break;
  case 'z': r = c == 0; break; /* deprecated in the manual, still there */
  default: return cl == c;
  }
  return isupper(cl) ? !r : r != 0;
}

/* [set]: `open` at '[', `close` at its ']'. */
static int matchbracketclass(int c, const char *open, const char *close) {
  const char *q = open + 1;
  int hit = 1;
  if (*q == '^') {
    hit = 0;
    q++;
  }
  while (q < close) {
    if (*q == '%') {
      if (match_class(c, uc(q[1]))) return hit;
      q += 2;
    } else if (q[1] == '-' && q + 2 < close) {
      if (uc(q[0]) <= c && c <= uc(q[2])) return hit;
      q += 3;
    } else {
      if (uc(*q) == c) return hit;
      q++;
    }
  }
  return !hit;
}

/* One past the single-character class at p (x, %x, [set], .). */
static const char *classEnd(MatchState *m, const char *p) {
  if (*p == '%') {
    if (p + 1 >= m->p_end) FAIL(m, "malformed pattern (ends with '%%')");
    return p + 2;
  }
  if (*p != '[') return p + 1;
  const char *q = p + 1;
  if (q < m->p_end && *q == '^') q++;
  do { /* the first member may be ']' itself */
    if (q >= m->p_end) FAIL(m, "malformed pattern (missing ']')");
    if (*q++ == '%' && q < m->p_end) q++;
  } while (q >= m->p_end || *q != ']');
  CHARGE(m, (q - p) / BULK);
  return q + 1;
}

/* Does the class p..ep take the subject byte at s (s inside the subject)? */
static int singlematch(MatchState *m, const char *s, const char *p, const char *ep) {
  int c = uc(*s);
  switch (*p) {
  case '.': return 1;
  case '%': return match_class(c, uc(p[1]));
  case '[': CHARGE(m, (ep - p) / BULK); return matchbracketclass(c, p, ep - 1);
  default: return uc(*p) == c;
  }
}

/* ---- the MatchState */

static const char *match(MatchState *m, const char *s, const char *p);

/* x*: take as many as possible, then give back one at a time. */
static const char *max_expand(MatchState *m, const char *s, const char *p, const char *ep) {
  ptrdiff_t n = 0;
  while (s + n < m->s_end && singlematch(m, s + n, p, ep)) n++;
  CHARGE(m, n);
  for (;; n--) {
    const char *r = match(m, s + n, ep + 1);
    if (r || n == 0) return r;
  }
}

/* x-: take as few as possible, one more at a time. */
static const char *min_expand(MatchState *m, const char *s, const char *p, const char *ep) {
  for (;;) {
    const char *r = match(m, s, ep + 1);
    if (r) return r;
    if (s >= m->s_end || !singlematch(m, s, p, ep)) return NULL;
    s++;
  }
}

/* %bxy at p (p at x). */
static const char *matchbalance(MatchState *m, const char *s, const char *p) {
  if (p + 1 >= m->p_end) FAIL(m, "malformed pattern (missing arguments to '%%b')");
  if (s >= m->s_end || *s != *p) return NULL;
  char open = p[0], close = p[1];
  int depth = 1;
  const char *t = s + 1;
  for (; t < m->s_end; t++) {
    if (*t == close) {
      if (--depth == 0) break;
    } else if (*t == open) {
      depth++;
    }
  }
  CHARGE(m, 1 + (t - s) / 4);
  return t < m->s_end ? t + 1 : NULL;
}

/* %1 .. %9 (d is the digit). */
static const char *match_capture(MatchState *m, const char *s, int d) {
  int i = d - '1';
  if (i < 0 || i >= m->ncap || m->cap[i].len == CAP_OPEN)
    FAIL(m, "invalid capture index %%%d", i + 1);
  ptrdiff_t len = m->cap[i].len; /* a position capture never matches */
  if (len < 0 || m->s_end - s < len) return NULL;
  CHARGE(m, len / BULK);
  return memcmp(m->cap[i].at, s, (size_t)len) == 0 ? s + len : NULL;
}

static const char *start_capture(MatchState *m, const char *s, const char *p, ptrdiff_t kind) {
  if (m->ncap >= MAX_CAPTURES) FAIL(m, "too many captures");
  m->cap[m->ncap].at = s;
  m->cap[m->ncap].len = kind;
  m->ncap++;
  const char *r = match(m, s, p);
  if (!r) m->ncap--;
  return r;
}

static const char *end_capture(MatchState *m, const char *s, const char *p) {
  int i = m->ncap - 1;
  while (i >= 0 && m->cap[i].len != CAP_OPEN) i--;
  if (i < 0) FAIL(m, "invalid pattern capture");
  m->cap[i].len = s - m->cap[i].at;
  const char *r = match(m, s, p);
  if (!r) m->cap[i].len = CAP_OPEN;
  return r;
}

/* The end of a match of pattern p at s, or NULL.  Longer than our other
 * functions on purpose: it is one dispatch over the pattern's items, kept
 * in the shape of Lua's own lstrlib.c match() so the two can be compared
 * case by case (spec/pattern_spec.lua does so against stock Lua). */
static const char *match(MatchState *m, const char *s, const char *p) {
  if (m->depth-- == 0) FAIL(m, "pattern too complex");
  CHARGE(m, 1);
  while (p < m->p_end) {
    switch (*p) {
    case '(':
      if (p + 1 < m->p_end && p[1] == ')')
        s = start_capture(m, s, p + 2, CAP_POSITION);
      else
        s = start_capture(m, s, p + 1, CAP_OPEN);
      goto out;
    case ')': s = end_capture(m, s, p + 1); goto out;
    case '$':
      if (p + 1 == m->p_end) { /* only last is '$' an anchor */
        if (s != m->s_end) s = NULL;
        goto out;
      }
      break;
    case '%':
      if (p + 1 == m->p_end) break; /* classEnd reports it */
      if (p[1] == 'b') {
        s = matchbalance(m, s, p + 2);
        if (!s) goto out;
        p += 4;
        continue;
      }
      if (p[1] == 'f') {
        p += 2;
        if (p >= m->p_end || *p != '[') FAIL(m, "missing '[' after '%%f' in pattern");
        const char *ep = classEnd(m, p);
        int before = s == m->s0 ? 0 : uc(s[-1]);
        int here = s < m->s_end ? uc(*s) : 0;
        if (matchbracketclass(before, p, ep - 1) || !matchbracketclass(here, p, ep - 1)) {
          s = NULL;
          goto out;
        }
        p = ep;
        continue;
      }
      if (isdigit(uc(p[1]))) {
        s = match_capture(m, s, uc(p[1]));
        if (!s) goto out;
        p += 2;
        continue;
      }
      break;
    default: break;
    }
    /* a single-character class and what may follow it */
    const char *ep = classEnd(m, p);
    int q = ep < m->p_end ? *ep : 0;
    if (s >= m->s_end || !singlematch(m, s, p, ep)) {
      if (q == '*' || q == '?' || q == '-') { /* zero of them is fine */
        p = ep + 1;
        continue;
      }
      s = NULL;
      goto out;
    }
    CHARGE(m, 1);
    if (q == '?') {
      const char *r = match(m, s + 1, ep + 1);
      if (r) {
        s = r;
        goto out;
      }
      p = ep + 1;
      continue;
    }
    if (q == '+') {
      s = max_expand(m, s + 1, p, ep);
      goto out;
    }
    if (q == '*') {
      s = max_expand(m, s, p, ep);
      goto out;
    }
    if (q == '-') {
      s = min_expand(m, s, p, ep);
      goto out;
    }
    s++;
    p = ep;
  }
out:
  m->depth++;
  return s;
}

/* ---- the library functions */

static void prepstate(MatchState *m, lua_State *L, lr_sandbox *sb, const char *s, size_t ls,
                      const char *p, size_t lp) {
  m->L = L;
  m->sb = sb;
  m->s0 = s;
  m->s_end = s + ls;
  m->p_end = p + lp;
  m->ncap = 0;
}

/* One attempt at s: the fuel is held only while matching, so what a gsub
 * callback spends in between is never handed back. */
static const char *attempt(MatchState *m, const char *s, const char *p) {
  m->fuel = m->sb->remaining;
  m->ncap = 0;
  m->depth = MAX_DEPTH;
  const char *r = match(m, s, p);
  m->sb->remaining = m->fuel;
  return r;
}

/* When the pattern starts with a plain character that must be there, the
 * first byte it can match at; positions skipped are ones where the match
 * fails at its first step, so skipping them changes nothing. */
static int first_literal(const char *p, const char *p_end) {
  if (p >= p_end || strchr("()%[.", *p) || *p == '\0') return -1;
  if (*p == '$' && p + 1 == p_end) return -1;
  if (p + 1 < p_end && (p[1] == '*' || p[1] == '?' || p[1] == '-')) return -1;
  return uc(*p);
}

/* The next position at or after s where a match can start (s_end included
 * when lit < 0), or NULL; charges the bytes skipped. */
static const char *next_start(MatchState *m, const char *s, int lit) {
  if (lit < 0 || s >= m->s_end || uc(*s) == lit) return s;
  const char *hit = memchr(s, lit, (size_t)(m->s_end - s));
  lr_sandbox_pay(m->L, m->sb, (size_t)((hit ? hit : m->s_end) - s) / BULK);
  return hit;
}

static void push_onecapture(MatchState *m, int i, const char *s, const char *e) {
  lua_State *L = m->L;
  if (i >= m->ncap) {
    if (i != 0) luaL_error(L, "invalid capture index %%%d", i + 1);
    lua_pushlstring(L, s, (size_t)(e - s));
  } else if (m->cap[i].len == CAP_OPEN) {
    luaL_error(L, "unfinished capture");
  } else if (m->cap[i].len == CAP_POSITION) {
    lua_pushinteger(L, (lua_Integer)(m->cap[i].at - m->s0) + 1);
  } else {
    lua_pushlstring(L, m->cap[i].at, (size_t)m->cap[i].len);
  }
}

/* The captures, or the whole match s..e when there are none (s non-NULL). */
static int push_captures(MatchState *m, const char *s, const char *e) {
  int n = m->ncap == 0 && s ? 1 : m->ncap;
  luaL_checkstack(m->L, n, "too many captures");
  for (int i = 0; i < n; i++) push_onecapture(m, i, s, e);
  return n;
}

static size_t posrelatI(lua_Integer pos, size_t len) {
  if (pos > 0) return (size_t)pos;
  if (pos == 0 || pos < -(lua_Integer)len) return 1;
  return len + (size_t)pos + 1;
}

static int has_specials(const char *p, size_t lp) {
  for (size_t i = 0; i < lp; i++)
    if (p[i] && strchr("^$*+?.([%-", p[i])) return 1;
  return 0;
}

/* The first occurrence of p (lp > 0) in s..s+ls: memchr for its first
 * byte, then the rest compared, each candidate paid for as it is tried. */
static const char *plain_find(lua_State *L, lr_sandbox *sb, const char *s, size_t ls, const char *p,
                              size_t lp) {
  if (lp > ls) return NULL;
  const char *at = s, *last = s + (ls - lp); /* the last possible start */
  long left = sb->remaining;
  while (at <= last) {
    const char *c = memchr(at, p[0], (size_t)(last - at) + 1);
    if (!c) break;
    left -= 1 + (long)((size_t)(c - at) / BULK + lp / BULK);
    if (left <= 0) {
      sb->remaining = 0;
      lr_sandbox_refuel(L, sb); /* kills, or looks at the clock and refills */
      left = sb->remaining;
    }
    if (memcmp(c + 1, p + 1, lp - 1) == 0) {
      sb->remaining = left;
      return c;
    }
    at = c + 1;
  }
  sb->remaining = left;
  lr_sandbox_pay(L, sb, (size_t)(last + 1 - at) / BULK);
  return NULL;
}

static int str_find_aux(lua_State *L, int find) {
  size_t ls, lp;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  size_t init = posrelatI(luaL_optinteger(L, 3, 1), ls) - 1;
  if (init > ls) {
    luaL_pushfail(L);
    return 1;
  }
  lr_sandbox *sb = enter(L);
  if (find && (lua_toboolean(L, 4) || !has_specials(p, lp))) {
    const char *hit = lp == 0 ? s + init : plain_find(L, sb, s + init, ls - init, p, lp);
    if (!hit) {
      luaL_pushfail(L);
      return 1;
    }
    lua_pushinteger(L, (lua_Integer)(hit - s) + 1);
    lua_pushinteger(L, (lua_Integer)(hit - s) + (lua_Integer)lp);
    return 2;
  }
  MatchState m;
  prepstate(&m, L, sb, s, ls, p, lp);
  int anchored = lp > 0 && *p == '^';
  if (anchored) p++;
  int lit = anchored ? -1 : first_literal(p, m.p_end);
  for (const char *at = s + init; (at = next_start(&m, at, lit)) != NULL; at++) {
    const char *e = attempt(&m, at, p);
    if (e) {
      if (!find) return push_captures(&m, at, e);
      lua_pushinteger(L, (lua_Integer)(at - s) + 1);
      lua_pushinteger(L, (lua_Integer)(e - s));
      return push_captures(&m, NULL, NULL) + 2;
    }
    if (anchored || at >= m.s_end) break;
  }
  luaL_pushfail(L);
  return 1;
}

static int str_find(lua_State *L) { return str_find_aux(L, 1); }
static int str_match(lua_State *L) { return str_find_aux(L, 0); }

/* ---- gmatch */

typedef struct {
  size_t next;     /* where the next search starts */
  size_t last_end; /* end of the previous match, or (size_t)-1 */
} gmatch_state;

static int gmatch_aux(lua_State *L) {
  size_t ls, lp;
  const char *s = lua_tolstring(L, lua_upvalueindex(1), &ls);
  const char *p = lua_tolstring(L, lua_upvalueindex(2), &lp);
  gmatch_state *g = lua_touserdata(L, lua_upvalueindex(3));
  lr_sandbox *sb = enter(L);
  MatchState m;
  prepstate(&m, L, sb, s, ls, p, lp);
  int lit = first_literal(p, m.p_end); /* '^' is no anchor here */
  if (g->next > ls) return 0;
  for (const char *at = s + g->next; (at = next_start(&m, at, lit)) != NULL; at++) {
    const char *e = attempt(&m, at, p);
    if (e && (size_t)(e - s) != g->last_end) {
      g->next = g->last_end = (size_t)(e - s);
      return push_captures(&m, at, e);
    }
    if (at >= m.s_end) break;
  }
  return 0;
}

static int gmatch(lua_State *L) {
  size_t ls;
  luaL_checklstring(L, 1, &ls);
  luaL_checkstring(L, 2);
  size_t init = posrelatI(luaL_optinteger(L, 3, 1), ls) - 1;
  lua_settop(L, 2); /* the strings stay alive as upvalues */
  gmatch_state *g = lua_newuserdatauv(L, sizeof *g, 0);
  g->next = init > ls ? ls + 1 : init;
  g->last_end = (size_t)-1;
  lua_pushcclosure(L, gmatch_aux, 3);
  return 1;
}

/* ---- gsub */

/* A string replacement: %0..%9 and %%. */
static void add_s(MatchState *m, luaL_Buffer *b, const char *s, const char *e) {
  lua_State *L = m->L;
  size_t l;
  const char *r = lua_tolstring(L, 3, &l), *r_end = r + l;
  lr_sandbox_pay(L, m->sb, l / BULK);
  for (;;) {
    const char *pct = memchr(r, '%', (size_t)(r_end - r));
    if (!pct) break;
    luaL_addlstring(b, r, (size_t)(pct - r));
    int c = uc(pct[1]); /* the '\0' after the string when '%' is last */
    r = pct + 2;
    if (c == '%') {
      luaL_addchar(b, '%');
    } else if (c == '0') {
      luaL_addlstring(b, s, (size_t)(e - s));
    } else if (isdigit(c)) {
      int i = c - '1';
      if (i < m->ncap && m->cap[i].len >= 0) {
        luaL_addlstring(b, m->cap[i].at, (size_t)m->cap[i].len);
      } else {
        push_onecapture(m, i, s, e);
        luaL_addvalue(b);
      }
    } else {
      luaL_error(L, "invalid use of '%c' in replacement string", '%');
    }
  }
  luaL_addlstring(b, r, (size_t)(r_end - r));
}

/* Adds the replacement of s..e; 1 when it changed the text. */
static int add_value(MatchState *m, luaL_Buffer *b, const char *s, const char *e, int kind) {
  lua_State *L = m->L;
  if (kind == LUA_TFUNCTION) {
    lua_pushvalue(L, 3);
    int n = push_captures(m, s, e);
    lua_call(L, n, 1);
  } else if (kind == LUA_TTABLE) {
    push_onecapture(m, 0, s, e);
    lua_gettable(L, 3);
  } else {
    add_s(m, b, s, e);
    return 1;
  }
  if (!lua_toboolean(L, -1)) { /* false or nil: keep the match */
    lua_pop(L, 1);
    luaL_addlstring(b, s, (size_t)(e - s));
    return 0;
  }
  if (!lua_isstring(L, -1))
    return luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
  luaL_addvalue(b);
  return 1;
}

static int str_gsub(lua_State *L) {
  size_t ls, lp;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  int kind = lua_type(L, 3);
  lua_Integer max_n = luaL_optinteger(L, 4, (lua_Integer)ls + 1);
  luaL_argexpected(
    L, kind == LUA_TNUMBER || kind == LUA_TSTRING || kind == LUA_TFUNCTION || kind == LUA_TTABLE, 3,
    "string/function/table");
  lr_sandbox *sb = enter(L);
  int anchored = lp > 0 && *p == '^';
  if (anchored) {
    p++;
    lp--;
  }
  MatchState m;
  prepstate(&m, L, sb, s, ls, p, lp);
  int lit = anchored ? -1 : first_literal(p, m.p_end);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  const char *at = s, *last_end = NULL;
  lua_Integer n = 0;
  int changed = 0;
  while (n < max_n) {
    const char *next = next_start(&m, at, lit);
    if (!next) break;
    luaL_addlstring(&b, at, (size_t)(next - at));
    at = next;
    const char *e = attempt(&m, at, p);
    if (e && e != last_end) {
      n++;
      changed |= add_value(&m, &b, at, e, kind);
      at = last_end = e;
    } else if (at < m.s_end) {
      luaL_addchar(&b, *at++);
    } else {
      break;
    }
    if (anchored) break;
  }
  if (!changed) {
    lua_pushvalue(L, 1); /* the subject as it came: a number stays one */
  } else {
    luaL_addlstring(&b, at, (size_t)(m.s_end - at));
    luaL_pushresult(&b);
  }
  lua_pushinteger(L, n);
  return 2;
}

void lr_pattern_install(lua_State *L, int idx) {
  static const luaL_Reg fns[] = { { "find", str_find },
                                  { "match", str_match },
                                  { "gmatch", gmatch },
                                  { "gsub", str_gsub },
                                  { NULL, NULL } };
  idx = lua_absindex(L, idx);
  for (const luaL_Reg *f = fns; f->name; f++) {
    lua_pushcfunction(L, f->func);
    lua_setfield(L, idx, f->name);
  }
}
