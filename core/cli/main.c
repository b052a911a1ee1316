/* cli.c: the `luaretry` command, a thin user of the public API. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "cli.h"
#include "faults/faults.h"

#ifndef LUARETRY_DATADIR
#define LUARETRY_DATADIR "/usr/local/share/luaretry"
#endif

static const char USAGE[] =
  "usage: luaretry run POLICY URL [-X METHOD] [-H 'Name: value']... [-d DATA | -d @FILE] [-o FILE]\n"
  "       luaretry run POLICY URL... | --urls FILE [--parallel N] [--output-dir DIR] [options]\n"
  "       luaretry run POLICY -- COMMAND [ARG]...\n"
  "       luaretry check POLICY... [--set NAME=VALUE]...\n"
  "       luaretry simulate POLICY [--attempts N] [--seed N] [--json] [--set NAME=VALUE]...\n"
  "                [--clients N [--outage SECONDS] [--svg FILE]]\n"
  "       luaretry faults [--listen 127.0.0.1:PORT] SCRIPT\n"
  "       luaretry demo\n"
  "       luaretry --help | --version\n";

static const char HELP[] =
  "luaretry: a retry policy engine; C owns time, Lua policies own judgement.\n"
  "\n"
  "  luaretry run POLICY URL [options]    perform an HTTP request, retried by POLICY\n"
  "      -X METHOD        request method (default GET, or POST with -d)\n"
  "      -H 'Name: value' a request header (repeatable)\n"
  "      -d DATA | -d @FILE | -d @-   request body, sent whole on every attempt\n"
  "      -o FILE          write the body to FILE, only on success (atomic rename)\n"
  "  luaretry run POLICY URL URL... [options]   several URLs (or --urls): each its own\n"
  "                       retried call; all share the policy's budget, breaker and\n"
  "                       counters; attempt lines start with the URL's number [i],\n"
  "                       and each URL ends with a summary line on standard error\n"
  "                       ([i] URL: verdict, attempts, last status, seconds, exit)\n"
  "      --urls FILE      more URLs, one a line (- for standard input; blank lines\n"
  "                       and # comments skipped), after those on the command line\n"
  "      --parallel N     at most N transfers at once, 1 to 1000 (default 1); a call\n"
  "                       waiting for its backoff holds no transfer\n"
  "      --output-dir DIR each body, on success only, to DIR/NAME (the URL's last\n"
  "                       path segment, sanitized, \"index\" if empty; NAME.1, NAME.2\n"
  "                       for repeats), through a temporary renamed into place;\n"
  "                       without it the bodies go to standard output, each whole,\n"
  "                       as the calls end.  -o takes one URL only.\n"
  "                       Exit status: the worst of the calls' (0 < 1 < 4 < 5 < 6\n"
  "                       < 3 < 130); --seed N gives URL i the seed N+i-1\n"
  "  luaretry run POLICY -- COMMAND [ARG]...   run a command, retried by POLICY;\n"
  "                       status = exit status, body = tail of its standard error\n"
  "      --seed N         fixed jitter seed      --set NAME=VALUE  override a value\n"
  "      -v | -q          also the script's print() output | no attempt lines\n"
  "      --stats          the policy's counters at the end, on standard error\n"
  "      --log-json FILE  one JSON object per attempt (- for standard error)\n"
  "\n"
  "  luaretry simulate POLICY [options]   print the wait schedule of POLICY when\n"
  "                                       every attempt fails transiently\n"
  "      --attempts N     simulate N attempts (default: the policy's max_attempts)\n"
  "      --seed N         jitter seed (default 1); the same seed, the same waits\n"
  "      --json           one JSON object per attempt instead of text (with\n"
  "                       --clients: {client, attempt, time, status, verdict, wait})\n"
  "      --set NAME=VALUE override a tuning value (max_attempts=3, backoff.initial=0.1)\n"
  "      --clients N      N clients fail together at t=0 against an outage: each is\n"
  "                       its own call (seed + client index); attempts before the\n"
  "                       outage ends get 503, later ones 200; prints the attempts,\n"
  "                       who succeeded or gave up, and the peak per 100 ms\n"
  "      --outage SECONDS the outage's length (default 30)\n"
  "      --svg FILE       also draw a histogram of attempts over time (SVG)\n"
  "  luaretry check POLICY... [--set NAME=VALUE]   load each policy, report every\n"
  "                       problem (errors, unknown names, clamped values), print\n"
  "                       its tuning and its verdicts on probe outcomes; exit 0\n"
  "                       when all are clean, 3 otherwise\n"
  "  luaretry faults [--listen 127.0.0.1:PORT] SCRIPT   a fault-injecting HTTP\n"
  "                       server scripted in Lua (port 0: any free port)\n"
  "  luaretry demo        runs policies/http.lua against the built-in fault server\n"
  "  luaretry --help | --version\n"
  "\n"
  "Exit status: 0 success; 1 a response the policy judged final; 2 usage error;\n"
  "3 policy error; 4 attempts exhausted; 5 deadline; 6 refused (budget, circuit);\n"
  "130 interrupted (SIGINT, SIGTERM).\n";

int cli_usage(const char *fmt, const char *arg) {
  fprintf(stderr, "luaretry: ");
  fprintf(stderr, fmt, arg ? arg : "");
  fprintf(stderr, "\n%s", USAGE);
  return EXIT_USAGE;
}

static void print_warnings(const luaretry_policy *p) {
  for (size_t i = 0; i < luaretry_policy_warning_count(p); i++)
    fprintf(stderr, "luaretry: warning: %s\n", luaretry_policy_warning(p, i));
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
  fprintf(stderr, "luaretry: %s\n", msg ? msg : luaretry_policy_errmsg(p));
  free(msg);
}

luaretry_policy *cli_load_policy(const char *path, char **sets, int nsets, int warn) {
  luaretry_policy *p;
  if (luaretry_policy_new(&p) != LUARETRY_OK) {
    fprintf(stderr, "luaretry: out of memory\n");
    return NULL;
  }
  for (int i = 0; i < nsets; i++) {
    const char *eq = strchr(sets[i], '=');
    char name[64];
    if (!eq || eq == sets[i] || (size_t)(eq - sets[i]) >= sizeof name) {
      fprintf(stderr, "luaretry: --set %s: expected NAME=VALUE\n", sets[i]);
      luaretry_policy_free(p);
      return NULL;
    }
    memcpy(name, sets[i], (size_t)(eq - sets[i]));
    name[eq - sets[i]] = '\0';
    if (luaretry_policy_set(p, name, eq + 1) != LUARETRY_OK) {
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
  if (warn) print_warnings(p);
  return p;
}

/* ---- faults: the fault server in the foreground */

static lr_faults *serving;

static void stop_serving(int sig) {
  (void)sig;
  if (serving) lr_faults_stop(serving);
}

static int cmd_faults(int argc, char **argv) {
  const char *listen = NULL, *script = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--listen") == 0) {
      if (i + 1 >= argc) return cli_usage("faults: --listen needs an address", NULL);
      listen = argv[++i];
    } else if (argv[i][0] == '-') {
      return cli_usage("faults: unknown option %s", argv[i]);
    } else if (!script) {
      script = argv[i];
    } else {
      return cli_usage("faults: unexpected argument %s", argv[i]);
    }
  }
  if (!script) return cli_usage("faults: which SCRIPT?", NULL);
  char err[1024];
  lr_faults *f = lr_faults_open(script, listen, err, sizeof err);
  if (!f) {
    fprintf(stderr, "luaretry: faults: %s\n", err);
    return EXIT_POLICY;
  }
  serving = f;
  cli_on_stop_signals(stop_serving);
  printf("listening on %s\n", lr_faults_address(f));
  fflush(stdout);
  int rc = lr_faults_serve(f);
  serving = NULL;
  lr_faults_free(f);
  return rc == 0 ? EXIT_OK : EXIT_POLICY;
}

/* ---- demo: policies/http.lua against the fault server, in-process */

static const char DEMO_SCRIPT[] =
  "respond = sequence {\n"
  "  { status = 503, headers = { Connection = 'close' }, body = 'busy, try again\\n' },\n"
  "  { reset = true },\n"
  "  { status = 429, headers = { ['Retry-After'] = '1' }, body = 'slow down\\n' },\n"
  "  { status = 200, body = 'hello from the fault server, on the fourth attempt\\n' },\n"
  "}\n";

static int cmd_demo(void) {
  char err[1024];
  lr_faults *f = lr_faults_start_string("=demo", DEMO_SCRIPT, "127.0.0.1:0", err, sizeof err);
  if (!f) {
    fprintf(stderr, "luaretry: demo: %s\n", err);
    return EXIT_POLICY;
  }
  char url[128], policy[4200];
  snprintf(url, sizeof url, "http://%s/demo", lr_faults_address(f));
  const char *datadir = getenv("LUARETRY_DATADIR");
  snprintf(policy, sizeof policy, "%s/policies/http.lua",
           datadir && *datadir ? datadir : LUARETRY_DATADIR);
  fprintf(stderr,
          "luaretry demo: a fault server on %s answers 503, then resets the connection,\n"
          "then 429 with Retry-After: 1, then 200. %s retries each, with its\n"
          "waits shortened through the same overrides as --set:\n"
          "  luaretry run %s %s --set backoff.initial=0.2 --set backoff.jitter_max=0.1\n\n",
          lr_faults_address(f), policy, policy, url);
  char *args[] = { policy, url, "--set", "backoff.initial=0.2", "--set",
                   "backoff.jitter_max=0.1", NULL };
  int status = cli_run(6, args);
  lr_faults_free(f);
  fprintf(stderr, "\nluaretry demo: exit status %d\n", status);
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
  if (strcmp(cmd, "simulate") == 0) return cli_simulate(argc - 2, argv + 2);
  if (strcmp(cmd, "check") == 0) return cli_check(argc - 2, argv + 2);
  if (strcmp(cmd, "run") == 0) return cli_run(argc - 2, argv + 2);
  if (strcmp(cmd, "faults") == 0) return cmd_faults(argc - 2, argv + 2);
  if (strcmp(cmd, "demo") == 0) return argc == 2 ? cmd_demo() : cli_usage("demo takes no arguments", NULL);
  return cli_usage("unknown command %s", cmd);
}
