/* run.c: `luaretry run`.  Loads the policy, decides what to run (one URL,
 * a batch of URLs, a command, or the policy's own run()) and runs a call of
 * it; batch.c, command.c and workflow.c hold the other ways.  Only public
 * API: luaretry.h and luaretry_curl.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "run.h"

typedef enum { RUN_URL, RUN_BATCH, RUN_COMMAND, RUN_WORKFLOW } run_mode;

/* What to run, from the options and whether the policy has run(); 0 or a
 * usage status. */
static int choose_mode(run_args *a, const luaretry_policy *p, run_mode *mode) {
  if (a->command) {
    *mode = RUN_COMMAND;
    return 0;
  }
  /* A policy with run() takes the words after it as its arguments. */
  if (luaretry_policy_has_workflow(p)) {
    *mode = RUN_WORKFLOW;
    if (a->method || a->data || a->nheaders)
      return cli_usage("run: -X, -H and -d are for URLs; %s runs its own requests", a->policy);
    if (a->urls_file || a->output_dir || a->parallel)
      return cli_usage("run: --urls, --parallel and --output-dir are for URLs; %s runs its own "
                       "requests", a->policy);
    return 0;
  }
  /* One URL alone is one call, as ever; several (or --urls, or
   * --output-dir) make a batch. */
  if (a->nwords > 1 || a->urls_file || a->output_dir) {
    *mode = RUN_BATCH;
    return 0;
  }
  *mode = RUN_URL;
  if (a->nwords == 0) return cli_usage("run: a URL, -- COMMAND, or a policy with run() is needed%s", "");
  char why[256];
  a->url = a->words[0];
  if (!url_valid(a->url, why, sizeof why)) return cli_usage("run: bad URL: %s", why);
  return 0;
}

/* run POLICY URL: the request through the libcurl helper. */
static luaretry_code url_run(const run_args *a, luaretry_policy *p, luaretry_call *c,
                             const upload *body, outfile *out, luaretry_decision *final) {
  luaretry_header headers[MAX_HEADERS];
  split_headers(a, headers);
  luaretry_request req = run_request(a, a->url, headers, body);
  luaretry_curl_options co;
  luaretry_curl_options_init(&co);
  co.sink = outfile_write;
  co.sink_ud = out;
  CURL *h = curl_easy_init();
  luaretry_code rc = h ? luaretry_curl_perform(p, c, h, &req, &co, final) : LUARETRY_E_NOMEM;
  curl_easy_cleanup(h);
  return rc;
}

/* Begins the call (*c, freed by the caller) and runs it; the exit status. */
static int run_call(const run_args *a, luaretry_policy *p, run_mode mode, attempt_log *log,
                    const upload *body, outfile *out, luaretry_call **c) {
  luaretry_call_options opt;
  luaretry_call_options_init(&opt);
  if (a->has_seed) opt.flags |= LUARETRY_CALL_SEED, opt.seed = a->seed;
  luaretry_code rc = luaretry_call_begin(p, &opt, c);
  if (rc != LUARETRY_OK) {
    fprintf(stderr, "luaretry: %s\n", luaretry_strerror(rc));
    return EXIT_POLICY;
  }
  luaretry_call_observe(*c, log_attempt, log);
  cli_cancel_on_signal(*c, NULL);
  luaretry_decision final;
  memset(&final, 0, sizeof final);
  if (mode == RUN_URL) rc = url_run(a, p, *c, body, out, &final);
  else if (mode == RUN_WORKFLOW) rc = workflow_run(p, *c, a->words, a->nwords, out, &final);
  else rc = command_run(*c, a->command, out, &final);
  cli_cancel_on_signal(NULL, NULL);
  if (rc != LUARETRY_OK) {
    const char *pm = luaretry_policy_errmsg(p);
    fprintf(stderr, "luaretry: %s\n", pm[0] ? pm : luaretry_call_errmsg(*c));
    return cli_error_status(rc);
  }
  if (final.reason == LUARETRY_REASON_CANCELLED) fprintf(stderr, "luaretry: interrupted\n");
  else if (final.attempt == 0 && final.message && a->verbosity > 0)  /* refused at begin */
    fprintf(stderr, "luaretry: before attempt 1: %s (%s): %s\n",
            luaretry_reason_name(final.reason), final.rule, final.message);
  return cli_exit_status(final.reason);
}

/* One call: its log, its body (-d) and its output (-o, or standard output). */
static int run_one(const run_args *a, luaretry_policy *p, run_mode mode) {
  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  char *target = a->url ? url_redacted(a->url)
                 : strdup(mode == RUN_WORKFLOW ? t.name : a->command[0]);
  attempt_log log = { a->verbosity, NULL, t.max_attempts, target, 0 };
  if (log_json_open(a->log_json, &log.json) != 0) {
    free(target);
    return EXIT_USAGE;
  }
  upload body = { 0 };
  outfile out;  /* finished even when upload_open() failed */
  outfile_init(&out, a->output, "-o", OUTFILE_PRIVATE);
  luaretry_call *c = NULL;
  int status = EXIT_USAGE;
  if ((!a->data || upload_open(&body, a->data) == 0) && outfile_create(&out) == 0)
    status = run_call(a, p, mode, &log, &body, &out, &c);
  if (outfile_finish(&out, status == EXIT_OK) != 0 && status == EXIT_OK) status = EXIT_FINAL;
  if (a->stats) log_stats(p);
  luaretry_call_free(c);
  upload_close(&body);
  log_json_close(log.json);
  free(target);
  return status;
}

/* libcurl set up and the policy loaded around the run. */
static int run_loaded(run_args *a) {
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    fprintf(stderr, "luaretry: cannot initialise libcurl\n");
    return EXIT_POLICY;
  }
  int status = EXIT_POLICY;
  const char *from;
  const char *redis = cli_redis_url(a->redis, &from);
  luaretry_policy *p = cli_load_policy_redis(a->policy, a->sets, a->nsets, a->verbosity > 0,
                                             redis, from, &status);
  run_mode mode;
  if (p && (status = choose_mode(a, p, &mode)) == 0) {
    log_policy_events(p, a->verbosity);
    cli_fleet_start(p);
    status = mode == RUN_BATCH ? batch_run(a, p) : run_one(a, p, mode);
  }
  luaretry_policy_free(p);
  curl_global_cleanup();
  return status;
}

int cli_run(int argc, char **argv) {
  char **words = calloc((size_t)argc + 1, sizeof *words);
  if (!words) {
    fprintf(stderr, "luaretry: out of memory\n");
    return EXIT_POLICY;
  }
  run_args a;
  int status = parse_run(argc, argv, &a, words);
  if (status == 0) status = run_loaded(&a);
  free(words);
  return status;
}
