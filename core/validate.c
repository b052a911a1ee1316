/* validate.c: the fields a policy script may set, and their checks.  Plain
 * C over the values the loader read: every mistake of a file is reported
 * at once, with its line, and every value the engine clamps is said. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

const lr_field_spec lr_fields[F_COUNT] = {  [F_NAME] = { "name", K_STRING },
  [F_MAX_ATTEMPTS] = { "max_attempts", K_COUNT },
  [F_DEADLINE] = { "deadline", K_SECONDS },
  [F_ATTEMPT_TIMEOUT] = { "attempt_timeout", K_SECONDS },
  [F_RETRY_AFTER] = { "retry_after", K_BOOL },
  [F_MAX_RETRY_AFTER] = { "max_retry_after", K_SECONDS0 },
  [F_BODY_LIMIT] = { "body_limit", K_BYTES },
  [F_BACKOFF] = { "backoff", K_BACKOFF },
  [F_IS_TRANSIENT] = { "is_transient", K_FUNCTION },
  [F_IS_SUCCESS] = { "is_success", K_FUNCTION },
  [F_IS_IDEMPOTENT] = { "is_idempotent", K_FUNCTION },
  [F_PREPARE] = { "prepare", K_FUNCTION },
  [F_ON_RETRY] = { "on_retry", K_FUNCTION },
  [F_RUN] = { "run", K_FUNCTION },
  [F_BUDGET] = { "budget", K_GUARD },
  [F_BREAKER] = { "breaker", K_GUARD },
  [F_OPTIONS] = { "options", K_OPTIONS },
  [F_ON_BREAKER] = { "on_breaker", K_FUNCTION },
  [F_INSTRUCTION_LIMIT] = { "instruction_limit", K_HOST },
  [F_MEMORY_LIMIT] = { "memory_limit", K_HOST },
  [F_B_KIND] = { "backoff.kind", K_KIND },
  [F_B_INITIAL] = { "backoff.initial", K_SECONDS0 },
  [F_B_MULTIPLIER] = { "backoff.multiplier", K_MULTIPLIER },
  [F_B_MAX] = { "backoff.max", K_SECONDS },
  [F_B_STEP] = { "backoff.step", K_SECONDS0 },
  [F_B_JITTER] = { "backoff.jitter", K_JITTER },
  [F_B_JITTER_MAX] = { "backoff.jitter_max", K_SECONDS0 },
  [F_B_CAP_JITTER] = { "backoff.cap_jitter", K_BOOL },
  [F_G_MAX_TOKENS] = { "budget.max_tokens", K_TOKENS },
  [F_G_TOKEN_RATIO] = { "budget.token_ratio", K_TOKENS },
  [F_K_FAILURES] = { "breaker.failures", K_COUNT },
  [F_K_OPEN_SECONDS] = { "breaker.open_seconds", K_SECONDS },
  [F_K_PROBES] = { "breaker.probes", K_COUNT },
};

static const char *const KIND_NAMES[] = { "exponential", "constant", "linear", NULL };
static const char *const JITTER_NAMES[] = { "none", "additive", "full", "equal",
                                            "decorrelated", NULL };

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

/* Appends a line to an error text. */
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

/* The known name closest to `name` (within `prefix`), or NULL. */
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

int lr_field_index(const char *name) {
  for (int i = 0; i < F_COUNT; i++)
    if (strcmp(lr_fields[i].name, name) == 0) return i;
  return -1;
}

/* ---- validation, in plain C */

static const char *type_name(int t) {
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

static void describe(const lr_field *f, char *buf, size_t size) {
  if (f->type == LUA_TNUMBER) lr_fmt(buf, size, "%g", f->num);
  else if (f->type == LUA_TSTRING) lr_fmt(buf, size, "\"%s\"", f->str);
  else if (f->type == LUA_TBOOLEAN) lr_fmt(buf, size, "%s", f->boolean ? "true" : "false");
  else lr_fmt(buf, size, "a %s", type_name(f->type));
}

typedef struct {
  luaretry_policy *p;
  const char *chunk;
  lr_field *fields;
  char *errors;
  size_t errors_size;
  char **warnings;
  size_t *warning_count;
} lr_check;

static void where(const lr_check *ck, int i, char *buf, size_t size) {
  const lr_field *f = &ck->fields[i];
  if (f->from_set) lr_fmt(buf, size, "--set %s", lr_fields[i].name);
  else if (f->line) lr_fmt(buf, size, "%s:%d: %s", ck->chunk, f->line, lr_fields[i].name);
  else lr_fmt(buf, size, "%s: %s", ck->chunk, lr_fields[i].name);
}

static void bad(lr_check *ck, int i, const char *expected) {
  char w[1200], got[96];
  where(ck, i, w, sizeof w);
  describe(&ck->fields[i], got, sizeof got);
  add_error(ck->errors, ck->errors_size, "%s: expected %s, got %s", w, expected, got);
}

static int enum_index(const char *const *names, const char *s) {
  for (int i = 0; names[i]; i++)
    if (strcmp(names[i], s) == 0) return i;
  return -1;
}

/* Checks field i against its kind; 1 when set and valid, 0 when unset,
 * -1 when invalid (reported). */
static int check_field(lr_check *ck, int i) {
  lr_field *f = &ck->fields[i];
  if (f->type == LUA_TNIL) return 0;
  int num = f->type == LUA_TNUMBER;
  switch (lr_fields[i].kind) {
  case K_STRING:
    if (f->type == LUA_TSTRING) return 1;
    bad(ck, i, "a string");
    return -1;
  case K_COUNT:
    if (num && isfinite(f->num) && f->num >= 1 && f->num <= 1e9 && f->num == floor(f->num))
      return 1;
    bad(ck, i, "a whole number from 1 to 1e9");
    return -1;
  case K_BYTES:
    if (num && isfinite(f->num) && f->num >= 0 && f->num <= (double)(1 << 30) &&
        f->num == floor(f->num))
      return 1;
    bad(ck, i, "a whole number of bytes from 0 to 2^30");
    return -1;
  case K_SECONDS:
    if (num && isfinite(f->num) && f->num > 0) return 1;
    bad(ck, i, "a finite number of seconds above 0");
    return -1;
  case K_SECONDS0:
    if (num && isfinite(f->num) && f->num >= 0) return 1;
    bad(ck, i, "a finite number of seconds, 0 or more");
    return -1;
  case K_MULTIPLIER:
    if (num && isfinite(f->num) && f->num >= 0) return 1;
    bad(ck, i, "a finite number, 0 or more");
    return -1;
  case K_BOOL:
    if (f->type == LUA_TBOOLEAN) return 1;
    bad(ck, i, "true or false");
    return -1;
  case K_FUNCTION:
    if (f->type == LUA_TFUNCTION) return 1;
    bad(ck, i, "a function");
    return -1;
  case K_BACKOFF:
    if (f->type == LUA_TTABLE || f->type == LUA_TFUNCTION) return 1;
    bad(ck, i, "a table or a function backoff(n, previous)");
    return -1;
  case K_KIND:
    if (f->type == LUA_TSTRING && enum_index(KIND_NAMES, f->str) >= 0) return 1;
    bad(ck, i, "\"exponential\", \"constant\" or \"linear\"");
    return -1;
  case K_JITTER:
    if (f->type == LUA_TSTRING && enum_index(JITTER_NAMES, f->str) >= 0) return 1;
    bad(ck, i, "\"none\", \"additive\", \"full\", \"equal\" or \"decorrelated\"");
    return -1;
  case K_OPTIONS:
    if (f->type == LUA_TTABLE) return 1;
    bad(ck, i, "a table of the script's own settings");
    return -1;
  case K_GUARD:
    if (f->type == LUA_TTABLE) return 1;
    bad(ck, i, i == F_BUDGET ? "a table {max_tokens =, token_ratio =}"
                             : "a table {failures =, open_seconds =, probes =}");
    return -1;
  case K_TOKENS:
    if (num && isfinite(f->num) && f->num > 0 && f->num <= 1000) return 1;
    bad(ck, i, "a number above 0 and at most 1000");
    return -1;
  case K_HOST: {
    char w[1200];
    where(ck, i, w, sizeof w);
    add_error(ck->errors, ck->errors_size,
              "%s: a sandbox limit is set by the host (luaretry_policy_set, "
              "--set), not by the script", w);
    return -1;
  }
  }
  return -1;
}

static void warn_at(lr_check *ck, int i, const char *what) {
  char w[1200];
  where(ck, i, w, sizeof w);
  lr_add_warning(ck->warnings, ck->warning_count, "%s: %s", w, what);
}

/* Validates fields into rules and tuning; 0 when valid. */
static int validate(lr_check *ck, lr_rules *r, luaretry_tuning *t) {
  lr_field *f = ck->fields;
  int ok[F_COUNT];
  for (int i = 0; i < F_COUNT; i++) ok[i] = check_field(ck, i);
  int script_backoff = f[F_BACKOFF].type == LUA_TFUNCTION;

  memset(r, 0, sizeof *r);
  r->max_attempts = ok[F_MAX_ATTEMPTS] > 0 ? (long)f[F_MAX_ATTEMPTS].num : 0;
  r->deadline = ok[F_DEADLINE] > 0 ? f[F_DEADLINE].num : 0;
  r->attempt_timeout = ok[F_ATTEMPT_TIMEOUT] > 0 ? f[F_ATTEMPT_TIMEOUT].num : 0;
  r->retry_after = ok[F_RETRY_AFTER] > 0 ? f[F_RETRY_AFTER].boolean : 1;
  r->max_retry_after = ok[F_MAX_RETRY_AFTER] > 0 ? f[F_MAX_RETRY_AFTER].num
                                                 : DEFAULT_MAX_RETRY_AFTER;
  if (ok[F_MAX_ATTEMPTS] == 0 && ok[F_DEADLINE] == 0 &&
      f[F_MAX_ATTEMPTS].type == LUA_TNIL && f[F_DEADLINE].type == LUA_TNIL)
    add_error(ck->errors, ck->errors_size,
              "%s: neither max_attempts nor deadline is set: the policy could "
              "retry forever", ck->chunk);

  lr_backoff *b = &r->backoff;
  b->kind = ok[F_B_KIND] > 0 ? (luaretry_backoff_kind)enum_index(KIND_NAMES, f[F_B_KIND].str)
                             : LUARETRY_BACKOFF_EXPONENTIAL;
  b->initial = ok[F_B_INITIAL] > 0 ? f[F_B_INITIAL].num : 1;
  b->multiplier = ok[F_B_MULTIPLIER] > 0 ? f[F_B_MULTIPLIER].num : 2;
  b->step = ok[F_B_STEP] > 0 ? f[F_B_STEP].num : b->initial;
  b->jitter = ok[F_B_JITTER] > 0 ? (luaretry_jitter)enum_index(JITTER_NAMES, f[F_B_JITTER].str)
                                 : LUARETRY_JITTER_ADDITIVE;
  b->jitter_max = ok[F_B_JITTER_MAX] > 0 ? f[F_B_JITTER_MAX].num : 1;
  b->cap_jitter = ok[F_B_CAP_JITTER] > 0 ? f[F_B_CAP_JITTER].boolean : 0;
  /* Without an explicit max the cap is 32 s, or initial when larger. */
  b->max = ok[F_B_MAX] > 0 ? f[F_B_MAX].num : (b->initial > 32 ? b->initial : 32);

  if (script_backoff) {
    for (int i = F_FIRST_BACKOFF; i <= F_LAST_BACKOFF; i++)
      if (f[i].type != LUA_TNIL) {
        char w[1200];
        where(ck, i, w, sizeof w);
        add_error(ck->errors, ck->errors_size,
                  "%s: backoff is a function in this script; its fields cannot be set", w);
      }
    memset(b, 0, sizeof *b);
    b->kind = LUARETRY_BACKOFF_SCRIPT;
  } else {
    if (ok[F_B_MAX] > 0 && ok[F_B_INITIAL] >= 0 && b->max < b->initial) {
      char w[1200];
      where(ck, F_B_MAX, w, sizeof w);
      add_error(ck->errors, ck->errors_size,
                "%s: %g is below backoff.initial (%g)", w, b->max, b->initial);
    }
    if (b->kind == LUARETRY_BACKOFF_EXPONENTIAL && b->multiplier < 1 &&
        ok[F_B_MULTIPLIER] > 0) {
      warn_at(ck, F_B_MULTIPLIER, "below 1 would shrink the waits; clamped to 1 "
              "(a backoff function can return any schedule)");
      b->multiplier = 1;
    }
    if (b->jitter == LUARETRY_JITTER_DECORRELATED && b->initial <= 0)
      add_error(ck->errors, ck->errors_size,
                "%s: backoff.initial: decorrelated jitter needs initial above 0",
                ck->chunk);
    /* "no effect" is news only when the script itself says both; an
     * override that changes kind or jitter means it. */
    int kind_set = f[F_B_KIND].from_set, jitter_set = f[F_B_JITTER].from_set;
    if (ok[F_B_MULTIPLIER] > 0 && b->kind != LUARETRY_BACKOFF_EXPONENTIAL && !kind_set)
      warn_at(ck, F_B_MULTIPLIER, "has no effect unless kind is \"exponential\"");
    if (ok[F_B_STEP] > 0 && b->kind != LUARETRY_BACKOFF_LINEAR && !kind_set)
      warn_at(ck, F_B_STEP, "has no effect unless kind is \"linear\"");
    /* jitter_max also spreads a server's Retry-After, for every kind but none */
    if (ok[F_B_JITTER_MAX] > 0 && b->jitter == LUARETRY_JITTER_NONE && !jitter_set)
      warn_at(ck, F_B_JITTER_MAX, "has no effect when jitter is \"none\"");
    if (ok[F_B_CAP_JITTER] > 0 && b->jitter != LUARETRY_JITTER_ADDITIVE && !jitter_set)
      warn_at(ck, F_B_CAP_JITTER, "has no effect unless jitter is \"additive\"");
  }

  lr_backoff_prepare(b);

  /* The guards: on when the script declares the table, or an override
   * sets one of its fields. */
  lr_guards *g = &r->guards;
  memset(g, 0, sizeof *g);
  g->budget = f[F_BUDGET].type == LUA_TTABLE || ok[F_G_MAX_TOKENS] > 0 || ok[F_G_TOKEN_RATIO] > 0;
  g->max_tokens = ok[F_G_MAX_TOKENS] > 0 ? f[F_G_MAX_TOKENS].num : 10;
  g->token_ratio = ok[F_G_TOKEN_RATIO] > 0 ? f[F_G_TOKEN_RATIO].num : 0.1;
  g->breaker = f[F_BREAKER].type == LUA_TTABLE || ok[F_K_FAILURES] > 0 ||
               ok[F_K_OPEN_SECONDS] > 0 || ok[F_K_PROBES] > 0;
  g->failures = ok[F_K_FAILURES] > 0 ? (int)f[F_K_FAILURES].num : 5;
  g->open_seconds = ok[F_K_OPEN_SECONDS] > 0 ? f[F_K_OPEN_SECONDS].num : 30;
  g->probes = ok[F_K_PROBES] > 0 ? (int)f[F_K_PROBES].num : 1;
  t->max_attempts = r->max_attempts;
  t->deadline = r->deadline;
  t->attempt_timeout = r->attempt_timeout;
  t->retry_after = r->retry_after;
  t->max_retry_after = r->max_retry_after;
  t->body_limit = ok[F_BODY_LIMIT] > 0 ? (size_t)f[F_BODY_LIMIT].num : DEFAULT_BODY_LIMIT;
  t->kind = b->kind;
  t->initial = b->initial;
  t->multiplier = b->multiplier;
  t->max = b->max;
  t->step = b->step;
  t->jitter = b->jitter;
  t->jitter_max = b->jitter_max;
  t->cap_jitter = b->cap_jitter;
  return ck->errors[0] != '\0';
}

/* Applies the stored overrides over a copy of the script's fields. */
static int apply_overrides(luaretry_policy *p, lr_field *fields, char *errors,
                           size_t size) {
  for (size_t k = 0; k < p->override_count; k++) {
    const lr_override *o = &p->overrides[k];
    int i = lr_field_index(o->name);
    if (i < 0) continue;  /* options.NAME: applied in the script's state */
    lr_field *f = &fields[i];
    memset(f, 0, sizeof *f);
    f->from_set = 1;
    const char *v = o->value;
    enum kind kind = lr_fields[i].kind;
    char *end;
    /* "none" unsets a value, except where it is a value: jitter = "none" */
    if (kind != K_JITTER && (strcmp(v, "none") == 0 || strcmp(v, "nil") == 0)) {
      f->type = LUA_TNIL;
    } else if (kind == K_BOOL && (strcmp(v, "true") == 0 || strcmp(v, "false") == 0)) {
      f->type = LUA_TBOOLEAN;
      f->boolean = v[0] == 't';
    } else if (kind != K_STRING && kind != K_KIND && kind != K_JITTER &&
               (f->num = strtod(v, &end), end != v && *end == '\0')) {
      f->type = LUA_TNUMBER;
    } else {
      f->type = LUA_TSTRING;
      lr_strlcpy(f->str, v, sizeof f->str);
    }
    if (i == F_BACKOFF || kind == K_FUNCTION) {
      add_error(errors, size, "--set %s: functions and tables can only be set "
                "in the script", o->name);
      return -1;
    }
  }
  return 0;
}

/* Validates `fields` plus overrides; on success installs rules, tuning and
 * warnings into p.  Returns 0, or -1 with p->errmsg set. */
int lr_compose(luaretry_policy *p, const lr_field *script_fields,
                   const char *chunk, char **load_warnings, size_t load_count) {
  lr_field fields[F_COUNT];
  memcpy(fields, script_fields, sizeof fields);
  char errors[sizeof p->errmsg] = "";
  char *warnings[MAX_WARNINGS];
  size_t count = 0;
  for (size_t i = 0; i < load_count; i++) {
    char *copy = strdup(load_warnings[i]);
    if (copy) warnings[count++] = copy;
  }
  lr_rules rules;
  luaretry_tuning tuning;
  int failed = apply_overrides(p, fields, errors, sizeof errors) != 0;
  if (!failed) {
    lr_check ck = { p, chunk, fields, errors, sizeof errors, warnings, &count };
    failed = validate(&ck, &rules, &tuning) != 0;
  }
  if (failed) {
    /* A failed load reports everything at once: the errors, then what
     * would have been warnings (a typo'd name is often the cause). */
    for (size_t i = 0; i < count; i++) add_error(errors, sizeof errors, "%s", warnings[i]);
    lr_free_warnings(warnings, &count);
    lr_strlcpy(p->errmsg, errors, sizeof p->errmsg);
    return -1;
  }
  lr_free_warnings(p->warnings, &p->warning_count);
  memcpy(p->warnings, warnings, count * sizeof *warnings);
  p->warning_count = count;
  p->rules = rules;
  p->tuning = tuning;
  lr_shared_configure(&p->shared, &rules.guards);
  if (fields[F_NAME].type == LUA_TSTRING)
    lr_strlcpy(p->name, fields[F_NAME].str, sizeof p->name);
  return 0;
}
