/* cli.h: what the CLI's files share. */
#ifndef LUARETRY_CLI_H
#define LUARETRY_CLI_H

#include <stdio.h>

#include "luaretry.h"

enum {
  EXIT_OK = 0, EXIT_FINAL = 1, EXIT_USAGE = 2, EXIT_POLICY = 3,
  EXIT_EXHAUSTED = 4, EXIT_DEADLINE = 5, EXIT_REFUSED = 6, EXIT_INTERRUPTED = 130
};

/* Prints "luaretry: " + fmt (with arg) and the usage; returns EXIT_USAGE. */
int cli_usage(const char *fmt, const char *arg);
/* Loads POLICY with NAME=VALUE overrides; NULL after printing why. */
luaretry_policy *cli_load_policy(const char *path, char **sets, int nsets, int warn);
int cli_exit_status(luaretry_reason r);
/* A library message with "--set " before each line about one of the
 * NAME=VALUE sets (the library speaks of the field only); malloc'ed. */
char *cli_policy_message(const char *msg, char **sets, int nsets);
void cli_json_string(FILE *f, const char *s);
/* One JSON log line; status < 0 prints null. */
void cli_json_decision(FILE *f, const luaretry_decision *d, int status,
                       const char *error, const char *target);

int cli_run(int argc, char **argv);       /* run.c */
/* SIGINT and SIGTERM call `handler`; SIGPIPE is ignored. */
void cli_on_stop_signals(void (*handler)(int));
int cli_check(int argc, char **argv);     /* cli_check.c */
int cli_simulate(int argc, char **argv);  /* cli_simulate.c */

#endif
