/* cli.c: the `luaretry` command, a thin user of the public API. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "luaretry.h"

enum {
  EXIT_OK = 0, EXIT_FINAL = 1, EXIT_USAGE = 2, EXIT_POLICY = 3,
  EXIT_EXHAUSTED = 4, EXIT_DEADLINE = 5, EXIT_REFUSED = 6, EXIT_INTERRUPTED = 130
};

static const char USAGE[] =
  "usage: luaretry simulate POLICY [--attempts N] [--seed N] [--json] [--set NAME=VALUE]...\n"
  "       luaretry --help | --version\n";

static const char HELP[] =
  "luaretry: a retry policy engine; C owns time, Lua policies own judgement.\n"
  "\n"
  "  luaretry simulate POLICY [options]   print the wait schedule of POLICY when\n"
  "                                       every attempt fails transiently\n"
  "      --attempts N     simulate N attempts (default: the policy's max_attempts)\n"
  "      --seed N         jitter seed (default 1); the same seed, the same waits\n"
  "      --json           one JSON object per attempt instead of text\n"
  "      --set NAME=VALUE override a tuning value (max_attempts=3, backoff.initial=0.1)\n"
  "  luaretry --help | --version\n"
  "\n"
  "Exit status: 0 success, 2 usage error, 3 policy error.\n";

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "luaretry: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n%s", USAGE);
  return EXIT_USAGE;
}

/* Parses a whole non-negative integer; -1 when it is not one. */
static long long parse_count(const char *s) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end || errno || v < 0) return -1;
  return v;
}

static void print_warnings(const luaretry_policy *p) {
  for (size_t i = 0; i < luaretry_policy_warning_count(p); i++)
    fprintf(stderr, "luaretry: warning: %s\n", luaretry_policy_warning(p, i));
}

/* Loads POLICY with the --set overrides in argv; NULL after reporting. */
static luaretry_policy *load_policy(const char *path, char **sets, int nsets) {
  luaretry_policy *p;
  if (luaretry_policy_new(&p) != LUARETRY_OK) {
    fprintf(stderr, "luaretry: out of memory\n");
    return NULL;
  }
  for (int i = 0; i < nsets; i++) {
    char *eq = strchr(sets[i], '=');
    if (!eq) {
      fprintf(stderr, "luaretry: --set %s: expected NAME=VALUE\n", sets[i]);
      luaretry_policy_free(p);
      return NULL;
    }
    *eq = '\0';
    luaretry_code rc = luaretry_policy_set(p, sets[i], eq + 1);
    *eq = '=';
    if (rc != LUARETRY_OK) {
      fprintf(stderr, "luaretry: %s\n", luaretry_policy_errmsg(p));
      luaretry_policy_free(p);
      return NULL;
    }
  }
  if (luaretry_policy_load_file(p, path) != LUARETRY_OK) {
    fprintf(stderr, "luaretry: %s\n", luaretry_policy_errmsg(p));
    luaretry_policy_free(p);
    return NULL;
  }
  print_warnings(p);
  return p;
}

static void json_string(FILE *f, const char *s) {
  if (!s) { fputs("null", f); return; }
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

typedef struct { int json; long long max; } simulate_out;

static int print_decision(void *ud, const luaretry_decision *d) {
  const simulate_out *out = ud;
  const char *verdict = luaretry_reason_name(d->reason);
  if (out->json) {
    printf("{\"attempt\":%d,\"status\":null,\"error\":null,\"verdict\":", d->attempt);
    json_string(stdout, verdict);
    printf(",\"wait\":%.6f,\"elapsed\":%.6f,\"next_timeout\":%.6f,\"rule\":",
           d->wait, d->elapsed, d->next_timeout);
    json_string(stdout, d->rule);
    printf(",\"wait_source\":");
    json_string(stdout, d->retry ? luaretry_wait_source_name(d->wait_source) : NULL);
    printf(",\"message\":");
    json_string(stdout, d->message);
    printf("}\n");
  } else if (d->retry) {
    printf("attempt %d: retry in %.3f s (%s), elapsed %.3f s\n", d->attempt, d->wait,
           luaretry_wait_source_name(d->wait_source), d->elapsed);
  } else {
    printf("attempt %d: %s at %.3f s (%s)\n", d->attempt, verdict, d->elapsed, d->rule);
  }
  return 0;
}

static int cmd_simulate(int argc, char **argv) {
  const char *path = NULL;
  long long attempts = 0, seed = 1;
  simulate_out out = { 0, 0 };
  char *sets[64];
  int nsets = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--json") == 0) out.json = 1;
    else if (strcmp(a, "--attempts") == 0 || strcmp(a, "--seed") == 0 ||
             strcmp(a, "--set") == 0) {
      if (i + 1 >= argc) return usage_error("%s needs a value", a);
      const char *v = argv[++i];
      if (strcmp(a, "--set") == 0) {
        if (nsets == 64) return usage_error("%s: too many", a);
        sets[nsets++] = argv[i];
        continue;
      }
      long long n = parse_count(v);
      if (n < 0 || (a[2] == 'a' && (n < 1 || n > 1000000)))
        return usage_error(a[2] == 'a' ? "--attempts %s: expected a whole number from 1 to 1000000"
                                       : "--seed %s: expected a whole number, 0 or more", v);
      if (a[2] == 'a') attempts = n;
      else seed = n;
    } else if (a[0] == '-' && a[1]) {
      return usage_error("simulate: unknown option %s", a);
    } else if (!path) {
      path = a;
    } else {
      return usage_error("simulate: unexpected argument %s", a);
    }
  }
  if (!path) return usage_error("simulate: %s", "which POLICY?");
  luaretry_policy *p = load_policy(path, sets, nsets);
  if (!p) return EXIT_POLICY;
  luaretry_code rc = luaretry_simulate(p, (uint64_t)seed, (long)attempts, print_decision, &out);
  int status = EXIT_OK;
  if (rc != LUARETRY_OK) {
    fprintf(stderr, "luaretry: simulate: %s\n", luaretry_strerror(rc));
    status = EXIT_POLICY;
  }
  if (fflush(stdout) != 0) status = EXIT_POLICY;
  luaretry_policy_free(p);
  return status;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(USAGE, stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
    fputs(HELP, stdout);
    return EXIT_OK;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("luaretry %s\n", LUARETRY_VERSION);
    return EXIT_OK;
  }
  if (strcmp(cmd, "simulate") == 0) return cmd_simulate(argc - 2, argv + 2);
  return usage_error("unknown command %s", cmd);
}
