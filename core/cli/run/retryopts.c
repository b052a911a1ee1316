/* retryopts.c: the options that set the policy from the command line
 * without Lua.  curl's retry options become the fields curl's meaning
 * maps to (--retry N: max_attempts N+1; --retry-delay S: every wait S,
 * throttled or not, no jitter); a command's rules become the `command`
 * policy's options (final_exit_codes, retry_exit_codes, final_if_output,
 * retry_if_output), each a --set override in its place among the others,
 * so a later --set still wins.  --exit-status command gives the final
 * attempt's own exit status, as Debian's retry(1) does. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run.h"

/* One more override for args.c to place among the --set ones. */
static int add_set(retry_sets *s, const char *field, const char *value) {
  s->field[s->n] = field;
  s->value[s->n] = value;
  s->n++;
  return 0;
}

static int usage2(const char *opt, const char *v, const char *expected) {
  char what[160];
  snprintf(what, sizeof what, "run: %s %%s: expected %s", opt, expected);
  return cli_usage(what, v);
}

/* Their numbers are read by the one rule of the options' numbers
 * (number.c), which the policy's fields they set follow too. */
int retryopts_curl(retry_sets *a, const char *opt, const char *v) {
  if (strcmp(opt, "--retry") == 0) {
    long long n;
    if (!cli_whole(v, 0, 100000, &n))
      return cli_number_usage("run", opt, v, "a whole number of retries from 0 to 100000");
    snprintf(a->number, sizeof a->number, "%lld", n + 1);
    return add_set(a, "max_attempts", a->number);
  }
  double s;
  if (!cli_decimal(v, &s) || !(s >= 0) || s > 1e6)
    return cli_number_usage("run", opt, v, "seconds from 0 to 1000000");
  /* 0 is curl's default backoff: here, the policy's (curl's manual:
   * "Setting this delay to zero makes curl use the default backoff") */
  if (s == 0) return 0;
  /* curl sleeps S before every retry, whatever failed (a 429 too); only a
   * server's Retry-After asks for longer.  So the wait after throttling is
   * S as well, and each cap is S: a policy's own max below S must not
   * make S an error in its file. */
  const char *sets[][2] = {
    { "backoff.kind", "constant" },
    { "backoff.initial", v },
    { "backoff.jitter", "none" },
    { "throttle_backoff.initial", v },
    { "throttle_backoff.multiplier", "1" },
    { "throttle_backoff.jitter", "none" },
    { "backoff.max", v },
    { "throttle_backoff.max", v },
  };
  for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) add_set(a, sets[k][0], sets[k][1]);
  return 0;
}

int retryopts_all_errors(retry_sets *s) { return add_set(s, "retry_all_errors", "true"); }

/* A number and curl's suffix, k, m or g (1024s, either case). */
int retryopts_size(const char *opt, const char *v, long long *out) {
  static const char UNITS[] = "kKmMgG";
  char number[64];
  size_t n = strlen(v);
  const char *u = n > 1 ? strchr(UNITS, v[n - 1]) : NULL;
  double x = 0, unit = u ? pow(1024, (double)((u - UNITS) / 2 + 1)) : 1;
  if (u) n--;
  snprintf(number, sizeof number, "%.*s", (int)n, v);
  if (n >= sizeof number || !cli_decimal(number, &x) || !(x > 0) || x * unit > 9e18 || x * unit < 1)
    return cli_number_usage("run", opt, v, "bytes above 0 (a k, m or g suffix: 1024s)");
  *out = (long long)(x * unit);
  return 0;
}

/* "75, 1 2": exit statuses 0 to 255, commas or blanks between them, each
 * marked in `named` (NULL: none); -1 when v is not such a list. */
static int read_exit_list(const char *v, unsigned char named[256]) {
  const char *s = v;
  int n = 0;
  while (*s) {
    s += strspn(s, " ,");
    if (!*s) break;
    size_t len = strcspn(s, " ,");
    char word[32];
    long long code;
    if (len >= sizeof word) return -1;
    snprintf(word, sizeof word, "%.*s", (int)len, s);
    if (!cli_whole(word, 0, 255, &code)) return -1;
    if (named) named[code] = 1;
    s += len, n++;
  }
  return n ? 0 : -1;
}

static int exit_list(const char *opt, const char *v) {
  if (read_exit_list(v, NULL) == 0) return 0;
  return cli_number_usage("run", opt, v, "exit statuses from 0 to 255, separated by commas");
}

/* --retry-on-exit and --final-on-exit that name the same status ask for
 * both: refused, naming both.  The other list in force is compared only
 * when that option wrote it; one a --set wrote is left to the `command`
 * policy's rule: what retry_exit_codes names is retried, final by default
 * or not (130, 143). */
static int exit_lists_agree(const run_args *a, const char *opt, const char *v) {
  const char *other = opt[2] == 'r' ? "options.final_exit_codes" : "options.retry_exit_codes";
  size_t n = strlen(other);
  int i = a->nsets - 1;
  while (i >= 0 && (strncmp(a->sets[i], other, n) != 0 || a->sets[i][n] != '=')) i--;
  if (i < 0 || !a->set_from[i]) return 0;
  unsigned char mine[256] = { 0 }, theirs[256] = { 0 };
  read_exit_list(v, mine);
  read_exit_list(a->sets[i] + n + 1, theirs);
  for (int code = 0; code < 256; code++) {
    if (!mine[code] || !theirs[code]) continue;
    char msg[8400]; /* two lists of up to 4096 bytes */
    snprintf(msg, sizeof msg, "run: %s %s and %s %s both name %d: retried or final, not both",
             a->set_from[i], a->sets[i] + n + 1, opt, v, code);
    return cli_usage("%s", msg);
  }
  return 0;
}

/* A bracket class from p (after its '['); the byte after its ']', or NULL. */
static const char *class_end(const char *p) {
  if (*p == '^') p++;
  do {
    if (!*p) return NULL;
    if (*p++ == '%' && !*p++) return NULL;
  } while (*p != ']');
  return p + 1;
}

/* Whether p is a Lua pattern that compiles (string.find's errors: a
 * trailing '%', an unclosed '[', %b without two characters, %f without
 * '[', unbalanced captures, a back reference to no closed capture);
 * *why says which. */
static int pattern_ok(const char *p, const char **why) {
  int open[32], depth = 0, captures = 0;
  unsigned closed = 0; /* capture k closed: bit k, up to Lua's 32 */
  if (*p == '^') p++;
  while (*p) {
    if (*p == '(') {
      if (depth == 32 || captures == 32) return *why = "too many captures", 0;
      open[depth++] = captures++;
      p += p[1] == ')' ? 2 : 1; /* () is a position capture */
      if (p[-1] == ')') depth--, closed |= 1u << open[depth];
      continue;
    }
    if (*p == ')') {
      if (!depth) return *why = "invalid pattern capture (a ')' without '(')", 0;
      closed |= 1u << open[--depth];
      p++;
      continue;
    }
    if (*p == '[') {
      if (!(p = class_end(p + 1))) return *why = "malformed pattern (missing ']')", 0;
    } else if (*p == '%') {
      char c = p[1];
      if (!c) return *why = "malformed pattern (ends with '%')", 0;
      if (c == 'b') {
        if (!p[2] || !p[3]) return *why = "missing arguments to '%b'", 0;
        p += 4;
        continue;
      }
      if (c == 'f') {
        if (p[2] != '[') return *why = "missing '[' after '%f' in pattern", 0;
        if (!(p = class_end(p + 3))) return *why = "malformed pattern (missing ']')", 0;
        continue;
      }
      /* %0 names no capture: Lua's captures count from 1 */
      if (c >= '0' && c <= '9' && (c == '0' || !(closed & (1u << (c - '1')))))
        return *why = "invalid capture index", 0;
      p += 2;
    } else {
      p++;
    }
    if (*p == '*' || *p == '+' || *p == '-' || *p == '?') p++;
  }
  if (depth) return *why = "unfinished capture", 0;
  return 1;
}

int retryopts_command(run_args *a, retry_sets *s, const char *opt, char *v) {
  const char *why = NULL;
  if (strcmp(opt, "--retry-on-exit") == 0 || strcmp(opt, "--final-on-exit") == 0) {
    int rc = exit_list(opt, v);
    if (!rc) rc = exit_lists_agree(a, opt, v);
    if (rc) return rc;
    a->command_rules = 1;
    return add_set(s, opt[2] == 'r' ? "options.retry_exit_codes" : "options.final_exit_codes", v);
  }
  if (strcmp(opt, "--retry-if-output") == 0 || strcmp(opt, "--final-if-output") == 0) {
    if (!v[0]) return usage2(opt, v, "a Lua pattern (luaretry-policy(5)), not empty");
    if (!pattern_ok(v, &why)) {
      char what[512];
      snprintf(what, sizeof what, "run: %s '%s': %s", opt, v, why);
      return cli_usage("%s", what);
    }
    a->command_rules = 1;
    return add_set(s, opt[2] == 'r' ? "options.retry_if_output" : "options.final_if_output", v);
  }
  if (strcmp(opt, "--before-retry") == 0) {
    if (!v[0]) return usage2(opt, v, "a command for sh -c");
    a->before_retry = v;
    return 0;
  }
  /* --exit-status */
  if (strcmp(v, "command") != 0 && strcmp(v, "luaretry") != 0)
    return usage2(opt, v, "command (the final attempt's own) or luaretry");
  a->exit_command = strcmp(v, "command") == 0;
  return 0;
}

int retryopts_exit_status(const run_args *a, int status, const luaretry_decision *final,
                          int command_status) {
  if (!a->exit_command || !a->command) return status;
  /* luaretry's own stops win: the deadline, a guard, a policy error, a
   * usage error, an interruption; and a call that never ran the command */
  if (status != EXIT_OK && status != EXIT_FINAL && status != EXIT_EXHAUSTED) return status;
  if (final->attempt == 0) return status;
  /* a final attempt its timeout ended has no status of its own: its time
   * was luaretry's stop, said as the deadline's is */
  return command_status < 0 ? EXIT_DEADLINE : command_status;
}
