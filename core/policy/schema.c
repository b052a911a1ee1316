/* schema.c: the table of fields (schema.h) and everything read from it:
 * type and range checks with the file and line of each mistake (all of a
 * file's at once), overrides, the effective tuning and its rules, values
 * spelled for luaretry_policy_get, and the public field list. */
#include <lua.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "luaretry_tool.h"
#include "schema.h"

#define LR_FIELD_ROW(id, name, type, lo, hi, flags, def, tuning, doc) \
  [F_##id] = { name, type, lo, hi, flags, def, tuning, doc },
const lr_field_spec lr_fields[F_COUNT] = { LR_FIELDS(LR_FIELD_ROW) };
#undef LR_FIELD_ROW

/* ---- names */

int lr_field_index(const char *name) {
  for (int i = 0; i < F_COUNT; i++)
    if (strcmp(lr_fields[i].name, name) == 0) return i;
  return -1;
}

/* Names that changed before 1.0: the old one is read as the new one. */
static const struct {
  const char *old, *now;
} renamed[] = {
  { "throttle", "admission" },
  { "throttle.k", "admission.k" },
  { "throttle.window", "admission.window" },
  { "breaker.half_open_calls", "breaker.probes" },
  /* http's and command's own option once; now every policy's */
  { "options.retry_all_errors", "retry_all_errors" },
};

int lr_field_renamed(const char *name) {
  for (size_t k = 0; k < sizeof renamed / sizeof renamed[0]; k++)
    if (strcmp(renamed[k].old, name) == 0) return lr_field_index(renamed[k].now);
  return -1;
}

void lr_renamed_note(char *buf, size_t size, const char *name) {
  int i = lr_field_renamed(name);
  lr_fmt(buf, size, "%s: renamed %s (the old name is read until 1.0)", name,
         i >= 0 ? lr_fields[i].name : "?");
}

int lr_field_guard(int i) {
  return i == F_BUDGET || i == F_BREAKER || i == F_ADMISSION || i == F_RATE || i == F_HEDGE;
}

int lr_field_in(int i, int parent) {
  const char *p = lr_fields[parent].name;
  size_t n = strlen(p);
  return strncmp(lr_fields[i].name, p, n) == 0 && lr_fields[i].name[n] == '.';
}

static size_t edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), row[64];
  if (la >= 63 || lb >= 63) return 99;
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      if (up + 1 < best) best = up + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

const char *lr_closest_field(const char *name, const char *prefix) {
  const char *best = NULL;
  size_t best_d = 3;
  size_t plen = strlen(prefix);
  for (int i = 0; i < F_COUNT; i++) {
    const char *f = lr_fields[i].name;
    if (strncmp(f, prefix, plen) != 0 || (!plen && strchr(f, '.'))) continue;
    size_t d = edit_distance(name, f + plen);
    if (d < best_d && d * 3 <= strlen(f + plen) + 1) best = f, best_d = d;
  }
  return best;
}

void lr_unknown_field(char *buf, size_t size, const char *name) {
  char prefix[32] = "";
  const char *dot = strchr(name, '.');
  if (dot && (size_t)(dot - name) < sizeof prefix - 1) {
    memcpy(prefix, name, (size_t)(dot - name) + 1);
    prefix[dot - name + 1] = '\0';
  }
  const char *near = lr_closest_field(dot ? dot + 1 : name, prefix);
  lr_fmt(buf, size, "%s: unknown name%s%s%s", name, near ? ", did you mean " : "", near ? near : "",
         near ? "?" : "");
}

/* ---- values from text */

void lr_field_set_string(lr_field *f, const char *s, size_t len) {
  size_t size = sizeof f->str, n = strnlen(s, len); /* C reads up to a NUL */
  f->len = len;
  f->nul = n < len;
  if (n < size) {
    memcpy(f->str, s, n);
    f->str[n] = '\0';
    return;
  }
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
  size_t head = size - 18; /* '~', 16 hex digits, NUL */
  memcpy(f->str, s, head);
  lr_fmt(f->str + head, 18, "~%016llx", (unsigned long long)h);
}

static size_t digits(const char *s) {
  size_t n = 0;
  while (s[n] >= '0' && s[n] <= '9') n++;
  return n;
}

int lr_decimal(const char *s, double *out) {
  const char *c = s + (*s == '-');
  size_t whole = digits(c);
  c += whole;
  size_t fraction = 0;
  if (*c == '.') fraction = digits(++c), c += fraction;
  if (whole + fraction == 0) return 0;
  if (*c == 'e' || *c == 'E') {
    c += 1 + (c[1] == '+' || c[1] == '-');
    size_t e = digits(c);
    if (!e) return 0;
    c += e;
  }
  if (*c) return 0;
  char *end; /* the text is checked: strtod reads all of it (in the C locale) */
  double v = strtod(s, &end);
  if (*end) return 0;
  *out = v;
  return 1;
}

const char *lr_decimal_note(const char *s) {
  char *end;
  double v;
  strtod(s, &end);
  while (end != s && (*end == ' ' || *end == '\t')) end++;
  if (end == s || *end || lr_decimal(s, &v)) return "";
  return " (a decimal number as a policy file writes it: no spaces, '+', hex, inf or nan)";
}

int luaretry_decimal(const char *s, double *out) { return s && out && lr_decimal(s, out); }

const char *luaretry_decimal_note(const char *s) { return s ? lr_decimal_note(s) : ""; }

/* ---- messages */

void lr_add_warning(char **list, size_t *count, const char *fmt, ...) {
  if (*count >= MAX_WARNINGS) return;
  char buf[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  char *copy = strdup(buf);
  if (copy) list[(*count)++] = copy;
}

void lr_free_warnings(char **list, size_t *count) {
  for (size_t i = 0; i < *count; i++) free(list[i]);
  *count = 0;
}

static void add_error(char *buf, size_t size, const char *fmt, ...)
  __attribute__((format(printf, 3, 4)));
static void add_error(char *buf, size_t size, const char *fmt, ...) {
  size_t len = strlen(buf);
  if (len + 2 >= size) return;
  if (len) buf[len++] = '\n', buf[len] = '\0';
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, size - len, fmt, ap);
  va_end(ap);
}

static const char *lua_type_name(int t) {
  switch (t) {
  case LUA_TNIL: return "nil";
  case LUA_TNUMBER: return "number";
  case LUA_TBOOLEAN: return "boolean";
  case LUA_TSTRING: return "string";
  case LUA_TTABLE: return "table";
  case LUA_TFUNCTION: return "function";
  default: return "value of another type";
  }
}

static void shortest(char *buf, size_t size, double v);

/* s in quotes, its control bytes as \xNN: a message is one line, and a
 * script's CR or ESC must not write on the reader's terminal. */
static void quoted(char *buf, size_t size, const char *s) {
  if (size < 8) { /* no room for a quoted byte: nothing */
    if (size) buf[0] = '\0';
    return;
  }
  buf[0] = '"';
  lr_escape_controls(buf + 1, size - 2, s);
  size_t n = 1 + strlen(buf + 1);
  buf[n++] = '"';
  buf[n] = '\0';
}

static void describe(const lr_field *f, char *buf, size_t size) {
  if (f->type == LUA_TNUMBER && f->from_set && f->len < sizeof f->str) /* as typed */
    lr_fmt(buf, size, "%s", f->str);
  else if (f->type == LUA_TNUMBER) /* 1000000001 as written, not 1e+09 */
    shortest(buf, size, f->num);
  else if (f->type == LUA_TSTRING)
    quoted(buf, size, f->str);
  else if (f->type == LUA_TBOOLEAN)
    lr_fmt(buf, size, "%s", f->boolean ? "true" : "false");
  else
    lr_fmt(buf, size, "a %s", lua_type_name(f->type));
}

/* "a whole number from 1 to 1000000000", "a finite number of seconds above 0"... */
static void expectation(const lr_field_spec *s, char *buf, size_t size) {
  int whole = s->type == T_COUNT || s->type == T_BYTES;
  const char *unit = s->type == T_SECONDS ? " of seconds" : s->type == T_BYTES ? " of bytes" : "";
  const char *what = whole ? "a whole number" : isinf(s->hi) ? "a finite number" : "a number";
  char lo[32], hi[32];
  shortest(lo, sizeof lo, s->lo);
  shortest(hi, sizeof hi, s->hi);
  if (isinf(s->hi) && (s->flags & OPEN))
    lr_fmt(buf, size, "%s%s above %s", what, unit, lo);
  else if (isinf(s->hi))
    lr_fmt(buf, size, "%s%s, %s or more", what, unit, lo);
  else if (s->flags & OPEN)
    lr_fmt(buf, size, "%s%s above %s and at most %s", what, unit, lo, hi);
  else
    lr_fmt(buf, size, "%s%s from %s to %s", what, unit, lo, hi);
}

static const char *enum_name(lr_type type, int v) {
  return type == T_KIND ? luaretry_backoff_kind_name((luaretry_backoff_kind)v)
                        : luaretry_jitter_name((luaretry_jitter)v);
}

/* The value of an enum field's name; -1 when none has it. */
static int enum_value(lr_type type, const char *s) {
  int last = type == T_KIND ? LUARETRY_BACKOFF_LINEAR : LUARETRY_JITTER_DECORRELATED;
  for (int v = 0; v <= last; v++)
    if (strcmp(enum_name(type, v), s) == 0) return v;
  return -1;
}

/* "\"a\", \"b\" or \"c\"" */
static void enum_choices(lr_type type, char *buf, size_t size) {
  int last = type == T_KIND ? LUARETRY_BACKOFF_LINEAR : LUARETRY_JITTER_DECORRELATED;
  buf[0] = '\0';
  for (int v = 0; v <= last; v++) {
    size_t len = strlen(buf);
    lr_fmt(buf + len, size - len, "%s\"%s\"",
           v == 0      ? ""
           : v == last ? " or "
                       : ", ",
           enum_name(type, v));
  }
}

/* ---- validation */

typedef struct {
  const char *chunk;
  lr_field *fields;
  char *errors;
  size_t errors_size;
  char **warnings;
  size_t *warning_count;
} lr_check;

/* An override speaks of its field alone; the host names the switch. */
static void where(const lr_check *ck, int i, char *buf, size_t size) {
  const lr_field *f = &ck->fields[i];
  if (f->from_set)
    lr_fmt(buf, size, "%s", lr_fields[i].name);
  else if (f->line)
    lr_fmt(buf, size, "%s:%d: %s", ck->chunk, f->line, lr_fields[i].name);
  else
    lr_fmt(buf, size, "%s: %s", ck->chunk, lr_fields[i].name);
}

static void bad(lr_check *ck, int i, const char *expected) {
  char w[1200], got[96];
  const lr_field *f = &ck->fields[i];
  where(ck, i, w, sizeof w);
  describe(f, got, sizeof got);
  /* " 3" or "0x3" given for a number: the rule is the news */
  lr_type type = lr_fields[i].type;
  int numeric =
    type == T_COUNT || type == T_BYTES || type == T_SECONDS || type == T_NUMBER || type == T_DELAY;
  int notation = numeric && f->from_set && f->type == LUA_TSTRING;
  add_error(ck->errors, ck->errors_size, "%s: expected %s, got %s%s", w, expected, got,
            notation ? lr_decimal_note(f->str) : "");
}

static void warn_at(lr_check *ck, int i, const char *what) {
  char w[1200];
  where(ck, i, w, sizeof w);
  lr_add_warning(ck->warnings, ck->warning_count, "%s: %s", w, what);
}

/* An error of field i beyond its type and range (bad() says those), such
 * as a rule between fields: named with its file and line all the same. */
static void error_at(lr_check *ck, int i, const char *fmt, ...)
  __attribute__((format(printf, 3, 4)));
static void error_at(lr_check *ck, int i, const char *fmt, ...) {
  char w[1200], what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  where(ck, i, w, sizeof w);
  add_error(ck->errors, ck->errors_size, "%s: %s", w, what);
}

/* A rule between fields i and j, said at i; when j came from --set and i
 * did not, that is said too: i's line is not where the change was made. */
static void error_pair(lr_check *ck, int i, int j, const char *fmt, ...)
  __attribute__((format(printf, 4, 5)));
static void error_pair(lr_check *ck, int i, int j, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (ck->fields[j].from_set && !ck->fields[i].from_set)
    error_at(ck, i, "%s (%s from --set)", what, lr_fields[j].name);
  else
    error_at(ck, i, "%s", what);
}

/* A value of field i the engine changes because of field j, said at i as
 * error_pair says a rule: with the --set that made it so. */
static void warn_pair(lr_check *ck, int i, int j, const char *fmt, ...)
  __attribute__((format(printf, 4, 5)));
static void warn_pair(lr_check *ck, int i, int j, const char *fmt, ...) {
  char what[512], with[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (ck->fields[j].from_set && !ck->fields[i].from_set)
    lr_fmt(with, sizeof with, "%s (%s from --set)", what, lr_fields[j].name);
  else
    lr_fmt(with, sizeof with, "%s", what);
  warn_at(ck, i, with);
}

static int number_ok(const lr_field_spec *s, double v) {
  if (!isfinite(v) || v < s->lo || v > s->hi) return 0;
  if ((s->flags & OPEN) && v == s->lo) return 0;
  return !(s->type == T_COUNT || s->type == T_BYTES) || v == floor(v);
}

/* "p95" -> 95, "p99.9" -> 99.9; 0 when not a percentile above 0 and
 * below 100. */
static double percentile_of(const char *s) {
  double v;
  if (s[0] != 'p' || !(s[1] >= '0' && s[1] <= '9') || !lr_decimal(s + 1, &v)) return 0;
  return v > 0 && v < 100 ? v : 0;
}

/* A table of fields has names for keys: {0.1, 2} set nothing, and its
 * defaults were taken in silence.  1 when every key is a name. */
static int named(lr_check *ck, int i) {
  int key = ck->fields[i].unnamed;
  if (key == LUA_TNIL) return 1;
  char names[400] = "";
  size_t plen = strlen(lr_fields[i].name) + 1;
  for (int j = 0; j < F_COUNT; j++) {
    if (!lr_field_in(j, i) || strchr(lr_fields[j].name + plen, '.') || (lr_fields[j].flags & HOST))
      continue;
    size_t n = strlen(names);
    lr_fmt(names + n, sizeof names - n, "%s%s = ...", n ? ", " : "", lr_fields[j].name + plen);
  }
  if (key == LUA_TNUMBER)
    error_at(ck, i, "expected named fields (%s), got a positional value", names);
  else
    error_at(ck, i, "expected named fields (%s), got a %s as a key", names, lua_type_name(key));
  return -1;
}

/* Checks field i against its row; 1 when set and valid, 0 when unset,
 * -1 when invalid (reported).  Longer than most: one switch over the
 * row's type, each case a few lines, read best as one table. */
static int check_field(lr_check *ck, int i) {
  const lr_field_spec *s = &lr_fields[i];
  lr_field *f = &ck->fields[i];
  if (f->type == LUA_TNIL) return 0;
  char expected[160];
  if (s->flags & HOST) {
    if (i == F_FL_LOCAL)
      error_at(ck, i,
               "the host says whether this machine's processes share the guards "
               "(luaretry_policy_set, --set, --fleet local, LUARETRY_FLEET), not the script");
    else if (lr_field_in(i, F_FLEET))
      error_at(ck, i,
               "the host says where Redis is and how long to wait for it (luaretry_policy_set, "
               "--set%s), not the script",
               i == F_FL_REDIS ? ", --redis, LUARETRY_REDIS" : "");
    else
      error_at(
        ck, i,
        "a sandbox limit is set by the host (luaretry_policy_set, --set), not by the script");
    return -1;
  }
  if (f->type == LUA_TSTRING && f->nul) { /* C reads it only up to the NUL: another name */
    bad(ck, i, "a string without a NUL byte");
    return -1;
  }
  /* a header name or a fleet key cut (or abbreviated) would be another
   * one; only the policy's name is abbreviated, as its logs show it */
  if (s->type == T_STRING && f->type == LUA_TSTRING && i != F_NAME && f->len >= sizeof f->str) {
    error_at(ck, i, "expected at most %zu bytes, got %zu", sizeof f->str - 1, f->len);
    return -1;
  }
  switch (s->type) {
  case T_STRING:
    if (f->type == LUA_TSTRING) return 1;
    bad(ck, i, "a string");
    return -1;
  case T_COUNT:
  case T_BYTES:
  case T_SECONDS:
  case T_NUMBER:
    if (f->type == LUA_TNUMBER && number_ok(s, f->num)) return 1;
    expectation(s, expected, sizeof expected);
    bad(ck, i, expected);
    return -1;
  case T_BOOL:
    if (f->type == LUA_TBOOLEAN) return 1;
    bad(ck, i, "true or false");
    return -1;
  case T_KIND:
  case T_JITTER:
    if (f->type == LUA_TSTRING && enum_value(s->type, f->str) >= 0) return 1;
    enum_choices(s->type, expected, sizeof expected);
    bad(ck, i, expected);
    return -1;
  case T_FUNCTION:
    if (f->type == LUA_TFUNCTION) return 1;
    bad(ck, i, "a function");
    return -1;
  case T_BACKOFF:
    if (f->type == LUA_TTABLE) return named(ck, i);
    if (f->type == LUA_TFUNCTION) return 1;
    bad(ck, i, "a table or a function backoff(n, previous)");
    return -1;
  case T_DELAY:
    if ((f->type == LUA_TNUMBER && number_ok(s, f->num)) ||
        (f->type == LUA_TSTRING && percentile_of(f->str) > 0))
      return 1;
    bad(ck, i, "a number of seconds above 0, or a percentile \"pNN\" (\"p95\", \"p99.9\")");
    return -1;
  case T_TABLE:
    if (f->type == LUA_TTABLE) return named(ck, i);
    bad(ck, i,
        i == F_BUDGET             ? "a table {max_tokens =, token_ratio =}"
        : i == F_HEDGE            ? "a table {delay =, max =}"
        : i == F_BREAKER          ? "a table {failures =, open_seconds =, probes =}"
        : i == F_FLEET            ? "a table {key =, sync =}"
        : i == F_THROTTLE_BACKOFF ? "a table {initial =, multiplier =, max =, jitter =}"
        : i == F_K_SLOW_CALL      ? "a table {seconds =, rate =}"
        : i == F_ADMISSION        ? "a table {k =, window =}"
        : i == F_RATE             ? "a table {limit =, burst =, adaptive =, headers =}"
        : i == F_PROPAGATE        ? "a table {deadline =, retries =} (header names)"
                                  : "a table of the script's own settings");
    return -1;
  }
  return -1;
}

/* Stores field i (its valid value, else its default) into the tuning. */
static void store(lr_tuning *t, int i, const lr_field *f, int ok) {
  const lr_field_spec *s = &lr_fields[i];
  if (s->tuning == NOTUNE) return;
  char *at = (char *)t + s->tuning;
  double v = ok > 0 ? f->num : isnan(s->def) ? 0 : s->def;
  switch (s->type) {
  case T_STRING: lr_strlcpy(at, ok > 0 ? f->str : "", sizeof f->str); break;
  case T_COUNT: *(long *)at = (long)v; break;
  case T_BYTES: *(size_t *)at = (size_t)v; break;
  case T_SECONDS:
  case T_NUMBER: *(double *)at = v; break;
  case T_DELAY: *(double *)at = ok > 0 && f->type == LUA_TNUMBER ? v : 0; break;
  case T_BOOL: *(int *)at = ok > 0 ? f->boolean : (int)v; break;
  case T_KIND: *(luaretry_backoff_kind *)at = ok > 0 ? enum_value(T_KIND, f->str) : (int)v; break;
  case T_JITTER: *(luaretry_jitter *)at = ok > 0 ? enum_value(T_JITTER, f->str) : (int)v; break;
  default: break;
  }
}

/* Whether the script declares table `parent` or an override sets one of
 * its fields: that turns a guard on. */
static int declared(const lr_field *f, const int *ok, int parent) {
  if (f[parent].from_set) return 0; /* --set GUARD=none: off, whatever the script says */
  if (f[parent].type == LUA_TTABLE) return 1;
  for (int i = 0; i < F_COUNT; i++)
    if (lr_field_in(i, parent) && ok[i] > 0) return 1;
  return 0;
}

/* A backoff function replaces the table: its fields cannot be set. */
static void script_backoff(lr_check *ck, luaretry_tuning *t) {
  for (int i = 0; i < F_COUNT; i++) {
    if (!lr_field_in(i, F_BACKOFF) || ck->fields[i].type == LUA_TNIL) continue;
    error_at(ck, i, "backoff is a function in this script; its fields cannot be set");
  }
  t->kind = LUARETRY_BACKOFF_SCRIPT;
  t->initial = t->multiplier = t->max = t->step = t->jitter_max = 0;
  t->jitter = LUARETRY_JITTER_NONE;
  t->cap_jitter = 0;
}

/* The rules between backoff fields, and what has no effect. */
static void check_backoff(lr_check *ck, const int *ok, luaretry_tuning *t) {
  lr_field *f = ck->fields;
  if (ok[F_B_MAX] <= 0) t->max = t->initial > 32 ? t->initial : 32;
  if (ok[F_B_STEP] <= 0) t->step = t->initial;
  if (ok[F_B_MAX] > 0 && ok[F_B_INITIAL] >= 0 && t->max < t->initial)
    error_pair(ck, F_B_MAX, F_B_INITIAL, "%g is below backoff.initial (%g)", t->max, t->initial);
  if (t->kind == LUARETRY_BACKOFF_EXPONENTIAL && t->multiplier < 1 && ok[F_B_MULTIPLIER] > 0) {
    warn_at(ck, F_B_MULTIPLIER,
            "below 1 would shrink the waits; clamped to 1 "
            "(a backoff function can return any schedule)");
    t->multiplier = 1;
  }
  if (t->jitter == LUARETRY_JITTER_DECORRELATED && t->initial <= 0)
    add_error(ck->errors, ck->errors_size,
              "%s: backoff.initial: decorrelated jitter needs initial above 0", ck->chunk);
  /* "no effect" is news only when the script itself says both; an
   * override that changes kind or jitter means it. */
  int kind_set = f[F_B_KIND].from_set, jitter_set = f[F_B_JITTER].from_set;
  if (ok[F_B_MULTIPLIER] > 0 && t->kind != LUARETRY_BACKOFF_EXPONENTIAL && !kind_set)
    warn_at(ck, F_B_MULTIPLIER, "has no effect unless kind is \"exponential\"");
  if (ok[F_B_STEP] > 0 && t->kind != LUARETRY_BACKOFF_LINEAR && !kind_set)
    warn_at(ck, F_B_STEP, "has no effect unless kind is \"linear\"");
  /* jitter_max also spreads a server's Retry-After, for every kind but none */
  if (ok[F_B_JITTER_MAX] > 0 && t->jitter == LUARETRY_JITTER_NONE && !jitter_set)
    warn_at(ck, F_B_JITTER_MAX, "has no effect when jitter is \"none\"");
  if (ok[F_B_CAP_JITTER] > 0 && t->jitter != LUARETRY_JITTER_ADDITIVE && !jitter_set)
    warn_at(ck, F_B_CAP_JITTER, "has no effect unless jitter is \"additive\"");
}

/* fleet.key names a Redis key the fleet's processes share: the fleet
 * puts it in braces, so it may hold none, nor spaces. */
static void check_fleet_key(lr_check *ck, const lr_field *f) {
  int ok = f->str[0] != '\0';
  for (const char *c = f->str; ok && *c; c++)
    ok = (unsigned char)*c > 0x20 && *c != 0x7f && *c != '{' && *c != '}';
  if (!ok) bad(ck, F_FL_KEY, "1 to 63 printable characters without spaces, '{' or '}'");
}

/* The hedge's rules between fields: a delay is needed, and a fixed one
 * (or a percentile's bounds) must come before the attempt's timeout,
 * else the hedge could never go. */
static void check_hedge(lr_check *ck, const int *ok, lr_tuning *x) {
  lr_field *f = ck->fields;
  if (!declared(f, ok, F_HEDGE)) {
    x->hedge_max = 0;
    return;
  }
  if (ok[F_H_DELAY] == 0) error_at(ck, F_HEDGE, "hedge.delay must be set (seconds, or \"p95\")");
  if (ok[F_H_DELAY] > 0 && f[F_H_DELAY].type == LUA_TSTRING)
    x->hedge_percentile = percentile_of(f[F_H_DELAY].str);
  if (ok[F_H_CEILING] <= 0) x->hedge_ceiling = 1;
  double timeout = x->pub.attempt_timeout;
  if (timeout > 0 && ok[F_H_DELAY] > 0 && !x->hedge_percentile && x->hedge_delay >= timeout)
    error_pair(ck, F_H_DELAY, F_ATTEMPT_TIMEOUT,
               "%g s is not below attempt_timeout (%g s): no hedge could ever go", x->hedge_delay,
               timeout);
  /* both given and at odds: an error, never also the clamp below (which
   * would not take effect) */
  int at_odds = ok[F_H_CEILING] > 0 && ok[F_H_FLOOR] >= 0 && x->hedge_ceiling < x->hedge_floor;
  if (at_odds)
    error_pair(ck, F_H_CEILING, F_H_FLOOR, "%g is below hedge.floor (%g)", x->hedge_ceiling,
               x->hedge_floor);
  /* a percentile's bounds the engine uses; a value the policy gave that
   * changes is said (check reports every value the engine clamps) */
  if (timeout > 0 && x->hedge_ceiling >= timeout) {
    if (ok[F_H_CEILING] > 0)
      warn_pair(ck, F_H_CEILING, F_ATTEMPT_TIMEOUT,
                "%g s is not below attempt_timeout (%g s): clamped to %g s, half of it",
                x->hedge_ceiling, timeout, timeout / 2);
    x->hedge_ceiling = timeout / 2;
  }
  if (x->hedge_floor > x->hedge_ceiling) {
    if (ok[F_H_FLOOR] > 0 && !at_odds)
      warn_pair(ck, F_H_FLOOR, ok[F_H_CEILING] > 0 ? F_H_CEILING : F_ATTEMPT_TIMEOUT,
                "%g s is above hedge.ceiling (%g s%s): clamped to %g s", x->hedge_floor,
                x->hedge_ceiling,
                ok[F_H_CEILING] <= 0 && x->hedge_ceiling == 1    ? ", its default"
                : timeout > 0 && x->hedge_ceiling == timeout / 2 ? ", half of attempt_timeout"
                                                                 : "",
                x->hedge_ceiling);
    x->hedge_floor = x->hedge_ceiling;
  }
  /* moot, not wrong (--set max_attempts=1 makes it so): hedges are
   * attempts, so at most max_attempts - 1 of them beside the first */
  long most = x->pub.max_attempts;
  if (most > 0 && x->hedge_max >= most) {
    char what[160];
    snprintf(what, sizeof what,
             "%ld is moot beside max_attempts (%ld): hedges are attempts; clamped to %ld",
             x->hedge_max, most, most - 1);
    warn_at(ck, F_H_MAX, what);
    x->hedge_max = most - 1;
  }
}

int lr_header_name_ok(const char *name, size_t len) {
  static const char tchar[] = "!#$%&'*+-.^_`|~";
  int ok = len > 0;
  for (size_t i = 0; ok && i < len; i++) {
    char c = name[i];
    ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c && strchr(tchar, c) != NULL);
  }
  return ok;
}

/* attempt_header names a header: an HTTP token (RFC 9110), nothing that
 * could end the line or the name. */
static void check_header_name(lr_check *ck, int i) {
  const char *name = ck->fields[i].str;
  if (name[0] == '\0' && i != F_ATTEMPT_HEADER) return; /* propagate's "" sends none */
  if (!lr_header_name_ok(name, strlen(name))) bad(ck, i, "a header name (" LR_HEADER_NAME_RULE ")");
}

/* propagate: on when its table (or a field of it) is set; a name left
 * unset is the default one. */
static void check_propagate(lr_check *ck, const int *ok, lr_tuning *x) {
  x->propagate = declared(ck->fields, ok, F_PROPAGATE);
  if (!x->propagate) {
    x->propagate_deadline[0] = x->propagate_retries[0] = '\0';
    return;
  }
  if (ok[F_P_DEADLINE] > 0)
    check_header_name(ck, F_P_DEADLINE);
  else
    lr_strlcpy(x->propagate_deadline, LR_PROPAGATE_DEADLINE, sizeof x->propagate_deadline);
  if (ok[F_P_RETRIES] > 0)
    check_header_name(ck, F_P_RETRIES);
  else
    lr_strlcpy(x->propagate_retries, LR_PROPAGATE_RETRIES, sizeof x->propagate_retries);
}

/* The breaker's rate rules: what they need and what cannot work. */
static void check_breaker_rates(lr_check *ck, const int *ok, lr_tuning *x) {
  luaretry_tuning *t = &x->pub;
  /* a window refused (said already) is not compared: x->window is then the
   * default, not the value written */
  if (ok[F_K_MIN_CALLS] <= 0)
    x->min_calls = x->window;
  else if (ok[F_K_WINDOW] >= 0 && x->min_calls > x->window)
    error_pair(ck, F_K_MIN_CALLS, F_K_WINDOW, "%ld is above breaker.window (%ld)", x->min_calls,
               x->window);
  if (ok[F_K_SLOW_RATE] > 0 && ok[F_K_SLOW_SECONDS] <= 0)
    error_at(ck, F_K_SLOW_RATE, "needs breaker.slow_call.seconds (what a slow attempt is)");
  double longest = t->attempt_timeout > 0 ? t->attempt_timeout : t->deadline;
  if (ok[F_K_SLOW_SECONDS] > 0 && longest > 0 && x->slow_seconds > longest)
    error_pair(ck, F_K_SLOW_SECONDS, t->attempt_timeout > 0 ? F_ATTEMPT_TIMEOUT : F_DEADLINE,
               "%g s is above %s (%g s): no attempt can be that slow", x->slow_seconds,
               t->attempt_timeout > 0 ? "attempt_timeout" : "deadline", longest);
  int rated = ok[F_K_FAILURE_RATE] > 0 || ok[F_K_SLOW_SECONDS] > 0;
  if (!rated && (ok[F_K_WINDOW] > 0 || ok[F_K_MIN_CALLS] > 0) && !ck->fields[F_K_WINDOW].from_set &&
      !ck->fields[F_K_MIN_CALLS].from_set)
    warn_at(ck, ok[F_K_WINDOW] > 0 ? F_K_WINDOW : F_K_MIN_CALLS,
            "has no effect without failure_rate or slow_call");
}

/* A rate needs something to pace by.  A --set of one of its fields turns
 * it on (as budget.max_tokens=20 turns the budget on), so --set
 * rate.burst=3 alone is the error rate = { burst = 3 } is in a script, as
 * hedge.max=3 alone is: it was dropped in silence. */
static void check_rate(lr_check *ck, const int *ok, lr_tuning *x) {
  const lr_field *f = ck->fields;
  x->rate = declared(f, ok, F_RATE);
  if (!x->rate || ok[F_R_LIMIT] > 0 || x->rate_adaptive || x->rate_headers) return;
  int by = -1; /* the --set that left the rate without a pace, if one did */
  for (int i = 0; i < F_COUNT && by < 0; i++)
    if (lr_field_in(i, F_RATE) && f[i].from_set && ok[i] >= 0) by = i;
  if (f[F_RATE].type == LUA_TTABLE && by < 0)
    error_at(ck, F_RATE, "needs limit (attempts per second), adaptive = true or headers = true");
  else if (f[F_RATE].type == LUA_TTABLE)
    error_at(ck, F_RATE,
             "needs limit (attempts per second), adaptive = true or headers = true (%s from --set)",
             lr_fields[by].name);
  else
    error_at(ck, by >= 0 ? by : F_RATE,
             "the policy has no rate limiter to set; one needs rate.limit (attempts per "
             "second), rate.adaptive=true or rate.headers=true");
  x->rate = 0;
}

/* Validates the fields into the tuning; 0 when valid. */
static int validate(lr_check *ck, lr_tuning *x) {
  lr_field *f = ck->fields;
  luaretry_tuning *t = &x->pub;
  int ok[F_COUNT];
  for (int i = 0; i < F_COUNT; i++) {
    ok[i] = check_field(ck, i);
    store(x, i, &f[i], ok[i]);
  }
  if (ok[F_FL_KEY] > 0) check_fleet_key(ck, &f[F_FL_KEY]);
  if (ok[F_ATTEMPT_HEADER] > 0) check_header_name(ck, F_ATTEMPT_HEADER);
  check_propagate(ck, ok, x);
  if (ok[F_MAX_ATTEMPTS] == 0 && ok[F_DEADLINE] == 0)
    add_error(ck->errors, ck->errors_size,
              "%s: neither max_attempts nor deadline is set: the policy could "
              "retry forever",
              ck->chunk);
  if (ok[F_ATTEMPT_TIMEOUT] == 0 && ok[F_DEADLINE] == 0)
    lr_add_warning(ck->warnings, ck->warning_count,
                   "%s: neither attempt_timeout nor deadline is set: one attempt could "
                   "last for ever (a server that accepts and never answers)",
                   ck->chunk);
  if (f[F_BACKOFF].type == LUA_TFUNCTION)
    script_backoff(ck, t);
  else
    check_backoff(ck, ok, t);
  t->budget = declared(f, ok, F_BUDGET);
  t->breaker = declared(f, ok, F_BREAKER);
  /* as backoff's: an explicit cap below the first wait is a mistake (it
   * was raised to initial in silence); the default cap is raised still */
  if (ok[F_TB_MAX] > 0 && ok[F_TB_INITIAL] >= 0 && x->throttle_max < x->throttle_initial)
    error_pair(ck, F_TB_MAX, F_TB_INITIAL, "%g is below throttle_backoff.initial (%g)",
               x->throttle_max, x->throttle_initial);
  /* the default cap: 20, or initial when larger (what the engine uses,
   * rules_more, and what check and luaretry_policy_get show) */
  if (ok[F_TB_MAX] <= 0 && x->throttle_max < x->throttle_initial)
    x->throttle_max = x->throttle_initial;
  check_hedge(ck, ok, x);
  check_breaker_rates(ck, ok, x);
  x->admission = declared(f, ok, F_ADMISSION);
  check_rate(ck, ok, x);
  return ck->errors[0] != '\0';
}

static void rules_of(const luaretry_tuning *t, lr_rules *r) {
  memset(r, 0, sizeof *r);
  r->max_attempts = t->max_attempts;
  r->deadline = t->deadline;
  r->attempt_timeout = t->attempt_timeout;
  r->connect_timeout = t->connect_timeout;
  r->stall_timeout = t->stall_timeout;
  r->stall_speed = t->stall_speed;
  r->retry_after = t->retry_after;
  r->max_retry_after = t->max_retry_after;
  lr_backoff *b = &r->backoff;
  b->kind = t->kind;
  b->initial = t->initial;
  b->multiplier = t->multiplier;
  b->max = t->max;
  b->step = t->step;
  b->jitter = t->jitter;
  b->jitter_max = t->jitter_max;
  b->cap_jitter = t->cap_jitter;
  lr_backoff_prepare(b);
  lr_guards *g = &r->guards;
  g->budget = t->budget;
  g->max_tokens = t->max_tokens;
  g->token_ratio = t->token_ratio;
  g->breaker = t->breaker;
  g->failures = (int)t->failures;
  g->open_seconds = t->open_seconds;
  g->probes = (int)t->probes;
}

static void hedge_rules_of(const lr_tuning *x, lr_rules *r) {
  r->hedge.max = (int)x->hedge_max;
  r->hedge.delay = x->hedge_delay;
  r->hedge.percentile = x->hedge_percentile;
  r->hedge.floor = x->hedge_floor;
  r->hedge.ceiling = x->hedge_ceiling;
  r->hedge.share = x->hedge_share;
}

/* The rules of the settings beyond the public tuning. */
static void rules_more(const lr_tuning *x, lr_rules *r) {
  lr_backoff *b = &r->throttle_backoff;
  b->kind = LUARETRY_BACKOFF_EXPONENTIAL;
  b->initial = x->throttle_initial;
  b->multiplier = x->throttle_multiplier;
  b->max = x->throttle_max < x->throttle_initial ? x->throttle_initial : x->throttle_max;
  b->step = x->throttle_initial;
  b->jitter = x->throttle_jitter;
  b->jitter_max = x->throttle_jitter_max;
  b->cap_jitter = x->throttle_cap_jitter;
  lr_backoff_prepare(b);
  r->guards.throttle_cost = x->throttle_cost;
  r->guards.reserve = x->pub.budget ? x->budget_reserve : 0;
  lr_guards_prepare(&r->guards); /* rules_of set the budget's, throttle_cost is above */
  lr_strlcpy(r->attempt_header, x->attempt_header, sizeof r->attempt_header);
  lr_strlcpy(r->propagate_deadline, x->propagate_deadline, sizeof r->propagate_deadline);
  lr_strlcpy(r->propagate_retries, x->propagate_retries, sizeof r->propagate_retries);
  lr_guards *g = &r->guards;
  g->failure_rate = x->failure_rate;
  g->slow_seconds = x->slow_seconds;
  g->slow_rate = x->slow_seconds > 0 ? x->slow_rate : 0;
  g->window = (int)x->window;
  g->min_calls = (int)x->min_calls;
  g->throttle_k = x->admission ? x->admission_k : 0;
  g->throttle_window = x->admission_window;
  g->rate = x->rate;
  g->rate_adaptive = x->rate && x->rate_adaptive; /* rate=none: none of it */
  g->rate_limit = x->rate_limit;
  g->rate_burst = x->rate_burst;
  g->rate_headers = x->rate && x->rate_headers;
  g->rate_headers_max_wait = x->pub.max_retry_after;
}

/* Reads an override's text as the value a script could have given. */
static void parse_override(const lr_override *o, int i, lr_field *f) {
  memset(f, 0, sizeof *f);
  f->from_set = 1;
  const char *v = o->value;
  lr_type type = lr_fields[i].type;
  /* "none" unsets a value, except where it is a value: jitter = "none" */
  if (type != T_JITTER && (strcmp(v, "none") == 0 || strcmp(v, "nil") == 0)) {
    f->type = LUA_TNIL;
  } else if (type == T_BOOL && (strcmp(v, "true") == 0 || strcmp(v, "false") == 0)) {
    f->type = LUA_TBOOLEAN;
    f->boolean = v[0] == 't';
  } else {
    /* a number as the file writes it (lr_decimal: " 3", "+3" and "0x3"
     * are refused as "3 " was); its text kept for messages: "1e-400" is
     * no 0.  A long string is abbreviated as the script's (a name). */
    int number = type != T_STRING && type != T_KIND && type != T_JITTER && lr_decimal(v, &f->num);
    f->type = number ? LUA_TNUMBER : LUA_TSTRING;
    lr_field_set_string(f, v, strlen(v));
  }
}

int lr_schema_apply(const lr_field *script_fields, const lr_override *overrides,
                    size_t override_count, const char *chunk, lr_tuning *t, lr_rules *r,
                    char **warnings, size_t *warning_count, char *errors, size_t errors_size) {
  lr_field fields[F_COUNT];
  memcpy(fields, script_fields, sizeof fields);
  errors[0] = '\0';
  for (size_t k = 0; k < override_count; k++) {
    int i = lr_field_index(overrides[k].name);
    if (i < 0 && (i = lr_field_renamed(overrides[k].name)) >= 0) {
      char note[200];
      lr_renamed_note(note, sizeof note, overrides[k].name);
      lr_add_warning(warnings, warning_count, "--set %s", note);
    }
    if (i < 0) continue; /* options.NAME: applied in the script's state */
    lr_type type = lr_fields[i].type;
    if (lr_field_guard(i) && strcmp(overrides[k].value, "none") == 0) {
      memset(&fields[i], 0, sizeof fields[i]); /* off: declared() says so */
      fields[i].from_set = 1;
      continue;
    }
    if (lr_field_guard(i)) {
      add_error(errors, errors_size,
                "%s: expected none (turns it off), got \"%s\"; its settings are set one by one "
                "(%s)",
                overrides[k].name, overrides[k].value,
                i == F_BUDGET      ? "budget.max_tokens=10"
                : i == F_BREAKER   ? "breaker.failures=5"
                : i == F_ADMISSION ? "admission.k=2"
                : i == F_RATE      ? "rate.limit=20 or rate.adaptive=true"
                                   : "hedge.delay=0.05");
      return -1;
    }
    if (type == T_FUNCTION || type == T_TABLE || type == T_BACKOFF) {
      add_error(errors, errors_size,
                "%s: functions and tables can only be set "
                "in the script",
                overrides[k].name);
      return -1;
    }
    parse_override(&overrides[k], i, &fields[i]);
  }
  memset(t, 0, sizeof *t);
  lr_check ck = { chunk, fields, errors, errors_size, warnings, warning_count };
  if (validate(&ck, t) != 0) return -1;
  rules_of(&t->pub, r);
  hedge_rules_of(t, r);
  rules_more(t, r);
  return 0;
}

/* ---- values as luaretry_policy_set() spells them */

/* The shortest text that reads back as v: "300", "0.1", "1e+300". */
static void shortest(char *buf, size_t size, double v) {
  if (v == floor(v) && fabs(v) < 1e16) {
    lr_fmt(buf, size, "%.0f", v);
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    lr_fmt(buf, size, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

static int guard_off(const lr_tuning *x, int i) {
  const luaretry_tuning *t = &x->pub;
  return (lr_field_in(i, F_BUDGET) && !t->budget) || (lr_field_in(i, F_BREAKER) && !t->breaker) ||
         (lr_field_in(i, F_ADMISSION) && !x->admission) || (lr_field_in(i, F_RATE) && !x->rate) ||
         (lr_field_in(i, F_BACKOFF) && t->kind == LUARETRY_BACKOFF_SCRIPT);
}

/* The hedge's fields read "none" without a hedge. */
static int hedge_off(const lr_tuning *t, int i) { return lr_field_in(i, F_HEDGE) && !t->hedge_max; }

void lr_schema_format(const lr_tuning *t, int i, char *buf, size_t size) {
  const lr_field_spec *s = &lr_fields[i];
  const char *at = (const char *)t + s->tuning;
  lr_strlcpy(buf, "none", size);
  if (i == F_NAME && t->pub.name) lr_strlcpy(buf, t->pub.name, size);
  if (s->tuning == NOTUNE || guard_off(t, i) || hedge_off(t, i)) return;
  if (i == F_H_DELAY && t->hedge_percentile > 0) {
    char p[32];
    shortest(p, sizeof p, t->hedge_percentile);
    lr_fmt(buf, size, "p%s", p);
    return;
  }
  switch (s->type) {
  case T_STRING:
    if (*at) lr_strlcpy(buf, at, size);
    break;
  case T_COUNT:
    if (*(const long *)at || !(s->flags & OPT)) lr_fmt(buf, size, "%ld", *(const long *)at);
    break;
  case T_BYTES: lr_fmt(buf, size, "%zu", *(const size_t *)at); break;
  case T_SECONDS:
  case T_NUMBER:
  case T_DELAY:
    if (*(const double *)at || !(s->flags & OPT)) shortest(buf, size, *(const double *)at);
    break;
  case T_BOOL: lr_strlcpy(buf, *(const int *)at ? "true" : "false", size); break;
  case T_KIND:
  case T_JITTER: lr_strlcpy(buf, enum_name(s->type, *(const int *)at), size); break;
  default: break;
  }
}

int lr_schema_limit(int i, const char *value, double *out, char *err, size_t errlen) {
  const lr_field_spec *s = &lr_fields[i];
  if ((s->flags & OPT) && strcmp(value, "none") == 0) {
    *out = 0;
    return 0;
  }
  double d;
  if (lr_decimal(value, &d) && number_ok(s, d)) {
    *out = d;
    return 0;
  }
  char expected[160], got[96];
  expectation(s, expected, sizeof expected);
  quoted(got, sizeof got, value);
  lr_fmt(err, errlen, "%s: expected %s%s, got %s%s", s->name, expected,
         (s->flags & OPT) ? " (or none)" : "", got, lr_decimal_note(value));
  return -1;
}

/* ---- the public list */

static luaretry_field public_fields[F_COUNT];
static char public_defaults[F_COUNT][32];
static char public_values[2][96];
static pthread_once_t public_once = PTHREAD_ONCE_INIT;

static const char *type_word(lr_type t) {
  switch (t) {
  case T_STRING: return "string";
  case T_COUNT: return "count";
  case T_BYTES: return "bytes";
  case T_SECONDS: return "seconds";
  case T_NUMBER: return "number";
  case T_BOOL: return "boolean";
  case T_KIND:
  case T_JITTER: return "enum";
  case T_FUNCTION: return "function";
  case T_TABLE: return "table";
  case T_BACKOFF: return "backoff";
  case T_DELAY: return "delay";
  }
  return NULL;
}

/* Written once, read-only after: the table is constant, its text too. */
static void make_public(void) {
  for (int e = 0; e < 2; e++) {
    lr_type type = e ? T_JITTER : T_KIND;
    int last = e ? LUARETRY_JITTER_DECORRELATED : LUARETRY_BACKOFF_LINEAR;
    for (int v = 0; v <= last; v++) {
      size_t len = strlen(public_values[e]);
      lr_fmt(public_values[e] + len, sizeof public_values[e] - len, "%s%s", v ? "|" : "",
             enum_name(type, v));
    }
  }
  for (int i = 0; i < F_COUNT; i++) {
    const lr_field_spec *s = &lr_fields[i];
    luaretry_field *f = &public_fields[i];
    f->name = s->name;
    f->type = type_word(s->type);
    f->values = s->type == T_KIND     ? public_values[0]
                : s->type == T_JITTER ? public_values[1]
                                      : NULL;
    f->doc = s->doc;
    f->host_only = (s->flags & HOST) != 0;
    f->settable = s->type != T_FUNCTION && s->type != T_TABLE && s->type != T_BACKOFF;
    if (isnan(s->def)) continue;
    if (s->type == T_BOOL)
      lr_strlcpy(public_defaults[i], s->def ? "true" : "false", 32);
    else if (s->type == T_KIND || s->type == T_JITTER)
      lr_strlcpy(public_defaults[i], enum_name(s->type, (int)s->def), 32);
    else
      shortest(public_defaults[i], 32, s->def);
    f->default_value = public_defaults[i];
  }
}

size_t luaretry_field_count(void) { return F_COUNT; }

const luaretry_field *luaretry_field_at(size_t i) {
  if (i >= F_COUNT) return NULL;
  pthread_once(&public_once, make_public);
  return &public_fields[i];
}
