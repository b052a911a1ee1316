/* run.h: what the files of `luaretry run` share. */
#ifndef LUARETRY_CLI_RUN_H
#define LUARETRY_CLI_RUN_H

#include <stdint.h>
#include <stdio.h>

#include "luaretry.h"
#include "luaretry_curl.h"
#include "outfile.h"

#define MAX_HEADERS 128
#define MAX_SETS 64

/* ---- upload.c: -d DATA, -d @FILE (mapped, not copied), -d @- */

typedef struct {
  const char *data;
  size_t len;
  void *map;
  char *owned;
} upload;

/* 0, or -1 after a message. */
int upload_open(upload *u, const char *arg);
void upload_close(upload *u);  /* also on a zeroed upload */

/* ---- args.c: the command line */

typedef struct {
  const char *policy;
  const char *url;         /* the one URL of a single call, once chosen */
  char **words;            /* after POLICY: the URLs, or run()'s arguments */
  int nwords;
  const char *urls_file;   /* --urls FILE */
  const char *output_dir;  /* --output-dir DIR */
  long parallel;           /* --parallel N; 0: not given */
  char **command;          /* after --; NULL: none */
  const char *method;
  const char *data;
  const char *output;
  const char *log_json;
  const char *redis;       /* --redis URL (fleet.c: else LUARETRY_REDIS) */
  uint64_t seed;
  int has_seed;
  int verbosity;           /* 0 -q, 1 normal, 2 -v */
  int stats;
  char *headers[MAX_HEADERS];
  int nheaders;
  char *sets[MAX_SETS];
  int nsets;
} run_args;

/* Parses the words after `run`; `words` has room for argc entries.  0, or
 * the exit status after a usage message. */
int parse_run(int argc, char **argv, run_args *a, char **words);
/* The -H values as headers; splits the arguments in place, so call it once. */
void split_headers(const run_args *a, luaretry_header *headers);
/* The request the options describe for `url`, with `headers` from
 * split_headers() and -d's body, if any, from upload_open(). */
luaretry_request run_request(const run_args *a, const char *url, const luaretry_header *headers,
                             const upload *body);

/* ---- url.c: URLs through curl's parser */

/* Whether `url` is an http or https URL; if not, why. */
int url_valid(const char *url, char *why, size_t size);
/* The URL as logs may show it: no user name or password; malloc'ed. */
char *url_redacted(const char *url);
/* --output-dir's name for it; malloc'ed. */
char *url_file_name(const char *url);

/* ---- log.c: a line per attempt on standard error, and --log-json */

typedef struct {
  int verbosity;           /* 0 quiet, 1 normal, 2 verbose */
  FILE *json;              /* --log-json, or NULL */
  long max_attempts;
  const char *target;      /* URL without credentials, or the command */
  int index;               /* in a batch: the URL's number, from 1; else 0 */
} attempt_log;

/* A luaretry_observer_fn; ud is an attempt_log. */
void log_attempt(void *ud, const luaretry_outcome *o, const luaretry_decision *d);
/* -v: the script's print(); not -q: the breaker's changes. */
void log_policy_events(luaretry_policy *p, int verbosity);
/* --log-json PATH ("-": standard error; NULL: none) into *json; -1 after a
 * message. */
int log_json_open(const char *path, FILE **json);
void log_json_close(FILE *json);
/* --stats: the policy's counters, one line on standard error. */
void log_stats(const luaretry_policy *p);

/* ---- signals.c: SIGINT and SIGTERM cancel what runs */

/* From now on a stop signal cancels `call` or `many` (either may be NULL;
 * one that came before cancels it at once).  Both NULL before freeing
 * them. */
void cli_cancel_on_signal(luaretry_call *call, luaretry_curl_many *many);
/* The exit status for a call that ended in error code rc. */
int cli_error_status(luaretry_code rc);

/* ---- the ways to run: each fills `final`; the final body goes to `out` */

/* command.c: run POLICY -- COMMAND, each attempt a child process. */
luaretry_code command_run(luaretry_call *c, char **argv, outfile *out, luaretry_decision *final);
/* workflow.c: run POLICY [ARGS...], the script's run(http, args) retried whole. */
luaretry_code workflow_run(luaretry_policy *p, luaretry_call *c, char **args, int nargs,
                           outfile *out, luaretry_decision *final);
/* batch.c: run POLICY URL URL... | --urls FILE: each URL its own call. */
int batch_run(const run_args *a, luaretry_policy *p);

#endif
