/* policy_arg.c: a policy as the commands load it: NAME=VALUE overrides first
 * (--set), then the file, warnings on standard error; and library messages
 * retold with "--set" before the lines about an override. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

int cli_split_set(const char *set, char name[CLI_SET_NAME], const char **value) {
  const char *eq = strchr(set, '=');
  if (!eq || eq == set || (size_t)(eq - set) >= CLI_SET_NAME) return -1;
  memcpy(name, set, (size_t)(eq - set));
  name[eq - set] = '\0';
  *value = eq + 1;
  return 0;
}

/* A message of the library that may quote the script (its error, its
 * source): control bytes and bytes that are not UTF-8 as \xHH, lines kept. */
static void print_message(const char *prefix, const char *msg) {
  fprintf(stderr, "luaretry: %s", prefix);
  cli_text_block(stderr, msg, strlen(msg));
  fputc('\n', stderr);
}

/* A warning about a field a --set gave says so, as check's do. */
static void print_warnings(const luaretry_policy *p, char **sets, int nsets) {
  for (size_t i = 0; i < luaretry_policy_warning_count(p); i++) {
    char *msg = cli_policy_message(luaretry_policy_warning(p, i), sets, nsets);
    print_message("warning: ", msg ? msg : luaretry_policy_warning(p, i));
    free(msg);
  }
}

/* Whether `line` speaks of the field set by one of the NAME=VALUE sets. */
static int about_a_set(const char *line, size_t len, char **sets, int nsets) {
  for (int i = 0; i < nsets; i++) {
    const char *eq = strchr(sets[i], '=');
    size_t n = eq ? (size_t)(eq - sets[i]) : strlen(sets[i]);
    if (n < len && memcmp(line, sets[i], n) == 0 && line[n] == ':') return 1;
  }
  return 0;
}

char *cli_policy_message(const char *msg, char **sets, int nsets) {
  size_t lines = 1;
  for (const char *c = msg; *c; c++) lines += *c == '\n';
  char *out = malloc(strlen(msg) + lines * 6 + 1);
  if (!out) return NULL;
  char *o = out;
  for (const char *line = msg; *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    if (about_a_set(line, len, sets, nsets)) o += sprintf(o, "--set ");
    memcpy(o, line, len);
    o += len;
    if (end) *o++ = '\n';
    line += len + (end != NULL);
  }
  *o = '\0';
  return out;
}

static void print_policy_error(const luaretry_policy *p, char **sets, int nsets) {
  char *msg = cli_policy_message(luaretry_policy_errmsg(p), sets, nsets);
  print_message("", msg ? msg : luaretry_policy_errmsg(p));
  free(msg);
}

int cli_policy_is_file(const char *policy) {
  size_t len = strlen(policy);
  return strchr(policy, '/') != NULL || (len >= 4 && strcmp(policy + len - 4, ".lua") == 0);
}

/* "no such file, nor NAME or NAME.lua in DIR, DIR, DIR": every folder, so
 * a user sees at once where to put the file. */
static void print_not_found(const char *policy) {
  struct stat st;
  if (cli_policy_is_file(policy) && stat(policy, &st) == 0) {
    fprintf(stderr, "luaretry: policy %s: not a regular file\n", policy);
    return;
  }
  fprintf(stderr, "luaretry: policy %s: no such file", policy);
  if (cli_policy_is_file(policy)) {
    fputc('\n', stderr);
    return;
  }
  /* a bare name is never a file of the current folder: say so when it is
   * there, the one place a user might expect it */
  fprintf(stderr, ", nor %s(.lua) in ", policy);
  char dir[4096];
  luaretry_code rc;
  int shown = 0; /* a folder too long to open (E_IO) is skipped */
  for (size_t i = 0; (rc = luaretry_policy_dir(i, dir, sizeof dir)) != LUARETRY_E_ARG; i++)
    if (rc == LUARETRY_OK) fprintf(stderr, "%s%s", shown++ ? ", " : "", dir);
  fputs(" (see luaretry list)\n", stderr);
  if (stat(policy, &st) == 0)
    fprintf(stderr,
            "luaretry: a bare name is never looked up in the current folder: "
            "run ./%s to use the file there\n",
            policy);
}

int cli_find_policy(const char *policy, char path[CLI_PATH_MAX]) {
  if (!policy[0]) {
    fprintf(stderr, "luaretry: POLICY '': expected a policy's name (luaretry list) or file\n");
    return -1;
  }
  luaretry_code rc = luaretry_policy_find(policy, path, CLI_PATH_MAX);
  if (rc == LUARETRY_OK) return 0;
  if (rc == LUARETRY_E_IO)
    print_not_found(policy);
  else
    fprintf(stderr, "luaretry: policy %s: %s\n", policy, luaretry_strerror(rc));
  return -1;
}

luaretry_policy *cli_load_policy(const char *policy, char **sets, int nsets, int warn) {
  return cli_load_policy_redis(policy, sets, nsets, warn, NULL, NULL);
}

luaretry_policy *cli_load_policy_redis(const char *policy, char **sets, int nsets, int warn,
                                       const cli_store *store, int *status) {
  if (status) *status = EXIT_POLICY;
  char path[CLI_PATH_MAX];
  if (cli_find_policy(policy, path) != 0) return NULL;
  luaretry_policy *p;
  if (luaretry_policy_new(&p) != LUARETRY_OK) {
    fprintf(stderr, "luaretry: out of memory\n");
    return NULL;
  }
  /* the library's message names the field and never the URL's password */
  if (store && store->field && luaretry_policy_set(p, store->field, store->value) != LUARETRY_OK) {
    const char *msg = luaretry_policy_errmsg(p);
    size_t n = strlen(store->field);
    if (strncmp(msg, store->field, n) == 0 && strncmp(msg + n, ": ", 2) == 0) msg += n + 2;
    fprintf(stderr, "luaretry: %s: %s\n", store->from, msg);
    luaretry_policy_free(p);
    if (status) *status = EXIT_USAGE;
    return NULL;
  }
  for (int i = 0; i < nsets; i++) {
    char name[CLI_SET_NAME];
    const char *value;
    /* a usage error, as check's and simulate's parsers say it: run's and
     * fleet's --set words come here as typed */
    if (cli_split_set(sets[i], name, &value) != 0) {
      cli_usage("--set %s: expected NAME=VALUE", sets[i]);
      luaretry_policy_free(p);
      if (status) *status = EXIT_USAGE;
      return NULL;
    }
    if (luaretry_policy_set(p, name, value) != LUARETRY_OK) {
      print_policy_error(p, sets + i, 1);
      luaretry_policy_free(p);
      return NULL;
    }
  }
  if (luaretry_policy_load_file(p, path) != LUARETRY_OK) {
    print_policy_error(p, sets, nsets);
    luaretry_policy_free(p);
    return NULL;
  }
  if (warn) print_warnings(p, sets, nsets);
  return p;
}
