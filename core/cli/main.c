/* main.c: the `luaretry` command, a thin user of the public API: picks the
 * subcommand, and holds the two that are only a few lines (faults, demo). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "faults/faults.h"

#ifndef LUARETRY_DATADIR
#define LUARETRY_DATADIR "/usr/local/share/luaretry"
#endif

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
    fputs(CLI_USAGE, stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
    fputs(CLI_HELP, stdout);
    return EXIT_OK;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("luaretry %s\n", LUARETRY_VERSION);
    return EXIT_OK;
  }
  if (strcmp(cmd, "simulate") == 0) return cli_simulate(argc - 2, argv + 2);
  if (strcmp(cmd, "check") == 0) return cli_check(argc - 2, argv + 2);
  if (strcmp(cmd, "run") == 0) return cli_run(argc - 2, argv + 2);
  if (strcmp(cmd, "fleet") == 0) return cli_fleet(argc - 2, argv + 2);
  if (strcmp(cmd, "faults") == 0) return cmd_faults(argc - 2, argv + 2);
  if (strcmp(cmd, "demo") == 0) return argc == 2 ? cmd_demo() : cli_usage("demo takes no arguments", NULL);
  return cli_usage("unknown command %s", cmd);
}
