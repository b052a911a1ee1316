/* cli.h: what the files of the `luaretry` command share.
 *
 * The command is a user of the public API only (luaretry.h,
 * luaretry_curl.h) and of the fault server's faults/faults.h:
 *   main.c        picks the subcommand; `faults` and `demo`
 *   usage.c       the usage and help texts, --version, the usage error
 *   policy_arg.c  loading a policy with --set overrides, and its messages
 *   fleet_cmd.c   --redis and LUARETRY_REDIS; `fleet`: the fleet's state in Redis
 *   escape.c      text from the network made safe for logs (JSON, terminal)
 *   check.c       `check`
 *   list.c        `list`: the policies on the search path
 *   probe.c       the outcomes of `check --probe` and `simulate --probe`
 *   output.c      standard output's write errors, said at the end
 *   number.c      the numbers of the command's own options: one rule, a policy's
 * run/: `run` and its curl-compatible command line (run/run.h):
 *   run.c         what to run, and one call of it
 *   args.c        its command line (curl's options too) and the request
 *   signals.c     exit statuses; the stop signals cancel what runs
 *   outfile.c     a file replaced whole or not at all (-o, --output-dir, --svg)
 *   upload.c      -d DATA, -d @FILE, -d @-
 *   data.c        the body of -d, --data-binary, --data-raw, joined with &
 *   curlopts.c    curl's options on the handle: TLS, -u, -A, -L, --compressed
 *   response.c    -i, -D, -f around one URL's body; writeout.c: -w
 *   url.c         URLs through curl's parser: valid, redacted, file name
 *   log.c         attempt lines, --log-json, the breaker, --stats
 *   report.c      the end, for machines: --stats=json, --metrics-file, and
 *                 the summary object of --log-json
 *   command.c     run POLICY -- COMMAND; cmdout.c: its output passed on
 *                 without blocking; foreground.c: the terminal it asks for
 *   run_workflow.c  run POLICY [ARGS] for a policy with run()
 *   batch.c       run POLICY URL URL... | --urls FILE
 *   lines.c       a line of -K's file or --urls's list, bounded
 * simulate/: `simulate` (simulate/simulate.h: the herd it measures):
 *   simulate.c    one client's schedule, and the herd
 *   fleet_report.c  simulate --clients N --fleet: own guards next to the fleet's
 *   svg.c         simulate --svg: the herd's histogram
 * No file calls back into one that calls it: main.c calls the subcommands,
 * they call the shared files below them. */
#ifndef LUARETRY_CLI_H
#define LUARETRY_CLI_H

#include <stdio.h>

#include "luaretry.h"
#include "luaretry_tool.h"

enum {
  EXIT_OK = 0,
  EXIT_FINAL = 1,
  EXIT_USAGE = 2,
  EXIT_POLICY = 3,
  EXIT_EXHAUSTED = 4,
  EXIT_DEADLINE = 5,
  EXIT_REFUSED = 6,
  EXIT_INTERRUPTED = 130
};

/* ---- usage.c */
extern const char CLI_USAGE[];
/* Prints "luaretry: " + fmt (with arg) and the synopsis: the command's
 * (cli_usage_command) with where its options are told, else every
 * command's; returns EXIT_USAGE. */
int cli_usage(const char *fmt, const char *arg);
/* The command whose usage errors follow (main.c, before it runs it). */
void cli_usage_command(const char *command);
/* Where the words being read come from ("-K FILE, line N"), named before
 * a usage error's message; NULL: the command line.  Returns the last. */
const char *cli_usage_where(const char *where);
/* `help`: the overview (command NULL) or a command's, on standard output. */
int cli_help(const char *command);
/* --version: luaretry's, libcurl's and Lua's versions, what is built in, and
 * where policies are looked for. */
int cli_version(void);

/* ---- number.c: the one rule of the options' numbers (luaretry(1),
 * NUMBERS), a policy's: decimal, an optional '-', digits with an optional
 * fraction ("3", "0.5", ".5", "5."), an optional exponent ("1e-3"); no
 * spaces, '+', hex, inf or nan. */

/* s by the rule, finite: 1 with *out its value, else 0. */
int cli_decimal(const char *s, double *out);
/* s by the rule, a whole number ("3", "3.0", "3e2") from lo to hi: 1 with
 * *out its value (digits alone read exactly), else 0. */
int cli_whole(const char *s, long long lo, long long hi, long long *out);
/* The same for a seed, 0 to 2^64 - 1. */
int cli_seed(const char *s, uint64_t *out);
/* " (a decimal number as a policy file writes it: ...)" when C's strtod
 * reads s but the rule does not (" 3", "+3", "0x3", "inf"), for the end of
 * the error that refuses it; else "". */
const char *cli_decimal_note(const char *s);
/* The usage error for option `opt` (as typed) of command `cmd` (NULL:
 * none said) given v: "CMD: OPT V: expected EXPECTED", the note above
 * after it; EXIT_USAGE. */
int cli_number_usage(const char *cmd, const char *opt, const char *v, const char *expected);

/* ---- policy_arg.c */
#define CLI_SET_NAME 64 /* room for the NAME of NAME=VALUE */
/* Splits "NAME=VALUE" (a NAME of 1 to CLI_SET_NAME - 1 bytes); -1 when it
 * is not that. */
int cli_split_set(const char *set, char name[CLI_SET_NAME], const char **value);
#define CLI_PATH_MAX 8192
/* POLICY, a file or a name on the search path (luaretry_policy_find), into
 * path; -1 after printing where it was looked for. */
int cli_find_policy(const char *policy, char path[CLI_PATH_MAX]);
/* Whether POLICY is a file (a '/' in it, or ending in ".lua") rather than a
 * bare name, which is looked up on the search path only, never in the
 * current folder (luaretry_policy_find). */
int cli_policy_is_file(const char *policy);
/* Finds POLICY and loads it with NAME=VALUE overrides; NULL after printing
 * why. */
luaretry_policy *cli_load_policy(const char *policy, char **sets, int nsets, int warn);
/* Where the fleet's guards live: field "fleet.local" or "fleet.redis"
 * (NULL: no fleet) = value, which came from `from` ("--fleet local",
 * "--redis", "LUARETRY_FLEET", "LUARETRY_REDIS"). */
typedef struct {
  const char *field, *value, *from;
} cli_store;
/* The same with the store's field set (store NULL or its field NULL:
 * none), named by its `from` in a message about it; *status (if given)
 * the exit status when NULL: EXIT_USAGE for a bad URL or folder. */
luaretry_policy *cli_load_policy_redis(const char *policy, char **sets, int nsets, int warn,
                                       const cli_store *store, int *status);
/* A library message with "--set " before each line about one of the
 * NAME=VALUE sets (the library speaks of the field only); malloc'ed. */
char *cli_policy_message(const char *msg, char **sets, int nsets);

/* ---- probe.c */
#define CLI_PROBE_HEADERS 32
/* One outcome written as '[METHOD] STATUS [ERROR] [Name: value]...
 * [body=TEXT]'; its strings point into `text`. */
typedef struct {
  char *text;         /* owned */
  const char *method; /* NULL: GET */
  int status;
  const char *error;                          /* status 0: the transport failure */
  luaretry_header headers[CLI_PROBE_HEADERS]; /* names in lower case */
  size_t nheaders;
  const char *body; /* NULL: none */
  char label[256];  /* the text as given */
} cli_probe;
/* 0, or -1 with a message naming the probe in err. */
int cli_probe_parse(const char *spec, cli_probe *p, char *err, size_t n);
void cli_probe_free(cli_probe *p);
/* A call of a probe's own: the virtual clock, `seed`, its own guards and
 * counters (isolated: nothing of the policy's changes). */
luaretry_code cli_probe_begin(luaretry_policy *p, uint64_t seed, luaretry_call **c);
/* The probe as an outcome (valid while p is) and as the request it answers.
 * A policy with run() judges only its workflow's answers: its probes are
 * those (info.workflow true), as `run` gives them. */
void cli_probe_outcome(luaretry_policy *pol, const cli_probe *p, luaretry_outcome *o);
void cli_probe_request(const cli_probe *p, luaretry_request *r);
/* The request before attempt `attempt`, as `run` makes it: prepare() and
 * is_idempotent() run; *not_repeatable as the curl helper sets it.  0, or
 * -1 with the hook's error in why. */
int cli_probe_prepare(luaretry_call *c, const cli_probe *pr, int attempt, int *not_repeatable,
                      char *why, size_t n);
/* The step before an attempt, as `run` takes it: luaretry_call_next until
 * the attempt may go at once (a rate token, header pacing's slot), its
 * waits on the call's virtual clock.  *n: its last answer, a stop when the
 * attempt is refused as it would go. */
luaretry_code cli_probe_go(luaretry_call *c, luaretry_decision *n);
/* After a retry decision d: its wait, then cli_probe_go, so that d->wait
 * is the whole wait before the next attempt (with next's source, "rate",
 * when next added to it); *n as for cli_probe_go. */
luaretry_code cli_probe_retry(luaretry_call *c, luaretry_decision *d, luaretry_decision *n);

/* ---- signals.c */
int cli_exit_status(luaretry_reason r);
/* The stop signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT) call `handler`,
 * without SA_RESTART, except those ignored at start (nohup, a background
 * job), which stay ignored; SIGPIPE is ignored. */
void cli_on_stop_signals(void (*handler)(int));
/* Whether `sig` was ignored when the process started (a child gets it
 * ignored too). */
int cli_signal_ignored_at_start(int sig);
/* The stop signals counted, and cancelling what runs (run.h). */
void cli_catch_stop_signals(void);
/* Whether a stop signal came. */
int cli_interrupted(void);
/* on: while nothing is there to undo (the fleet's first sync, before any
 * call or file), a stop signal ends the process at once with 130; one that
 * came already ends it now.  off: cancels as before. */
void cli_exit_on_stop_signal(int on);

/* ---- escape.c: text that may hold a server's bytes */
/* Length of the valid UTF-8 sequence of more than one byte at s (not
 * overlong, no surrogate, at most U+10FFFF), or 0. */
size_t cli_utf8_len(const unsigned char *s, size_t left);
/* A JSON string (null for NULL) that always parses: controls escaped,
 * bytes that are not UTF-8 taken as Latin-1. */
void cli_json_string(FILE *f, const char *s);
/* Text for a log line: controls (newlines too), C1 controls and bytes
 * that are not UTF-8 as \xHH, so it can neither end the line nor drive
 * the terminal. */
void cli_text(FILE *f, const char *s);
/* cli_text of len bytes, a NUL among them shown as \x00 (a body's). */
void cli_text_len(FILE *f, const char *s, size_t len);
/* cli_text into dst, cut to size (a label shown in a table). */
void cli_text_copy(char *dst, size_t size, const char *s);
/* The same for a block of lines (a command's error output): newlines and
 * tabs kept. */
void cli_text_block(FILE *f, const char *s, size_t len);

/* ---- log.c */
/* One JSON log line; status < 0 prints null. */
void cli_json_decision(FILE *f, const luaretry_decision *d, int status, const char *error,
                       const char *target);

/* ---- fleet_cmd.c */
/* --fleet local (the folder: $XDG_RUNTIME_DIR, else the library's) or
 * --redis URL, else LUARETRY_FLEET=local, else LUARETRY_REDIS.  0, or
 * EXIT_USAGE (said) for both options or a --fleet that is not local. */
int cli_fleet_store(const char *fleet, const char *redis, cli_store *s);
/* Before `run`'s first call: one sync with the fleet, if there is one. */
void cli_fleet_start(luaretry_policy *p);
/* The warning that --redis (or LUARETRY_REDIS, `from`) shares nothing. */
void cli_fleet_warn_unshared(luaretry_policy *p, const char *from);

/* ---- the subcommands */
int cli_run(int argc, char **argv);      /* run.c */
int cli_check(int argc, char **argv);    /* check.c */
int cli_simulate(int argc, char **argv); /* simulate.c */
int cli_list(int argc, char **argv);     /* list.c */
int cli_fleet(int argc, char **argv);    /* fleet_cmd.c */
/* simulate/latency.c: --latency "BASE[,SLOW@FRACTION]" [--calls N]: SPEC
 * into base, slow and fraction (0, or -1); the two runs printed. */
int cli_latency_parse(const char *s, luaretry_latency_options *l);
int cli_simulate_latency(luaretry_policy *p, const luaretry_latency_options *l, int json);

/* simulate/fleet_report.c: --fleet (own guards next to the fleet's; local:
 * the local store's, every outcome counted at once) or --process (the
 * clients as calls of one process); the exit status. */
int cli_simulate_fleet(luaretry_policy *p, const char *path, luaretry_herd_options *o, int json,
                       int process, int local);

#endif
