/* main.c: the `luaretry` command, a thin user of the public API: picks the
 * subcommand, and holds the two that are only a few lines (faults, demo). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "output.h"
#include "faults/faults.h"

#ifndef LUARETRY_DATADIR
#define LUARETRY_DATADIR "/usr/local/share/luaretry"
#endif

/* ---- faults: the fault server in the foreground */

static lr_faults *volatile serving;
static volatile sig_atomic_t stop_requests;

/* The first stop signal stops the server (and a script that loops, while
 * it loads too); a second one ends the process at once, whatever runs. */
static void stop_serving(int sig) {
  (void)sig;
  lr_faults *f = serving;
  if (++stop_requests >= 2) _exit(EXIT_INTERRUPTED);
  if (f) lr_faults_stop(f);
}

static int cmd_faults(int argc, char **argv) {
  const char *listen = NULL, *script = NULL;
  int any = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--listen") == 0) {
      if (i + 1 >= argc) return cli_usage("faults: --listen needs an address", NULL);
      listen = argv[++i];
    } else if (strcmp(argv[i], "--listen-any") == 0) {
      any = 1;
    } else if (argv[i][0] == '-') {
      return cli_usage("faults: unknown option %s", argv[i]);
    } else if (!script) {
      script = argv[i];
    } else {
      return cli_usage("faults: unexpected argument %s", argv[i]);
    }
  }
  if (!script) return cli_usage("faults: which SCRIPT?", NULL);
  if (listen && !lr_faults_listen_ok(listen))
    return cli_usage("faults: --listen %s: not HOST:PORT, [V6]:PORT or PORT (a port up to 65535)",
                     listen);
  char err[1024];
  cli_on_stop_signals(stop_serving);
  /* the server exists before its script loads, so that a signal can stop
   * a script that loops at load */
  lr_faults *f = lr_faults_new(err, sizeof err);
  if (!f) {
    fprintf(stderr, "luaretry: faults: %s\n", err);
    return EXIT_POLICY;
  }
  serving = f;
  if (stop_requests) lr_faults_stop(f); /* a signal before `serving` was set */
  if (lr_faults_load(f, script, listen, any, err, sizeof err) != 0) {
    serving = NULL;
    lr_faults_free(f);
    fprintf(stderr, "luaretry: faults: %s\n", err);
    return stop_requests ? EXIT_INTERRUPTED : EXIT_POLICY;
  }
  if (!lr_faults_is_loopback(f))
    fprintf(stderr,
            "luaretry: faults: warning: listening on %s, not a loopback address: "
            "anyone who can reach it can drive %s\n",
            lr_faults_address(f), script);
  printf("listening on %s\n", lr_faults_address(f));
  cli_out_flush();
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
  char *args[] = { policy, url, "--set", "backoff.initial=0.2", "--set", "backoff.jitter_max=0.1",
                   NULL };
  int status = cli_run(6, args);
  lr_faults_free(f);
  fprintf(stderr, "\nluaretry demo: exit status %d\n", status);
  return status;
}

/* COMMAND --help (or -h) anywhere before a "--" that starts a command. */
static int wants_help(int argc, char **argv) {
  for (int i = 2; i < argc && strcmp(argv[i], "--") != 0; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
  return 0;
}

/* A standard stream closed at start (>&-) would lend its number to the
 * next file opened: a --log-json file got the body.  /dev/null, opened
 * read-only, holds the number, and a write to it fails as to a closed one. */
static void hold_closed_streams(void) {
  for (int fd = 0; fd <= 2; fd++)
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      int held = open("/dev/null", O_RDONLY);
      if (held > fd) close(held); /* never: fd is the lowest one free */
    }
}

static int command(int argc, char **argv) {
  if (argc < 2) {
    fputs(CLI_USAGE, stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) return cli_help(NULL);
  if (strcmp(cmd, "help") == 0)
    return argc > 3 ? cli_usage("help takes one COMMAND%s", "")
                    : cli_help(argc == 3 ? argv[2] : NULL);
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) return cli_version();
  if (wants_help(argc, argv)) return cli_help(cmd);
  cli_usage_command(cmd);
  if (strcmp(cmd, "simulate") == 0) return cli_simulate(argc - 2, argv + 2);
  if (strcmp(cmd, "check") == 0) return cli_check(argc - 2, argv + 2);
  if (strcmp(cmd, "run") == 0) return cli_run(argc - 2, argv + 2);
  if (strcmp(cmd, "list") == 0) return cli_list(argc - 2, argv + 2);
  if (strcmp(cmd, "fleet") == 0) return cli_fleet(argc - 2, argv + 2);
  if (strcmp(cmd, "faults") == 0) return cmd_faults(argc - 2, argv + 2);
  if (strcmp(cmd, "demo") == 0)
    return argc == 2 ? cmd_demo() : cli_usage("demo takes no arguments", NULL);
  return cli_usage("unknown command %s", cmd);
}

int main(int argc, char **argv) {
  hold_closed_streams();
  /* SIGCONT blocked in every thread (those made later inherit it): it
   * still continues a stopped process, and stays pending, for `run --
   * COMMAND` to learn that its own job was continued (foreground.c) however
   * short the stop; a command's child unblocks it (command.c) */
  sigset_t cont;
  sigemptyset(&cont);
  sigaddset(&cont, SIGCONT);
  sigprocmask(SIG_BLOCK, &cont, NULL);
  /* every command's standard output, checked once at its end */
  return cli_out_done(command(argc, argv));
}
