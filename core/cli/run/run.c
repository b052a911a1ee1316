/* run.c: `luaretry run`.  Loads the policy, decides what to run (one URL,
 * a batch of URLs, a command, or the policy's own run()) and runs a call of
 * it; batch.c, command.c and workflow.c hold the other ways.  Only public
 * API: luaretry.h and luaretry_curl.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "run.h"

typedef enum { RUN_URL, RUN_BATCH, RUN_COMMAND, RUN_WORKFLOW } run_mode;

/* One URL: -G's query and -T's file name in it, -O's file named by it
 * (*clash: that is another option's file). */
static int single_url_options(run_args *a, int *clash) {
  if (a->get || a->upload_file) {
    char *full = run_args_keep(a, url_for_call(a, a->url));
    if (!full) return EXIT_POLICY;
    a->url = full;
  }
  if (!a->remote_name || a->output) return 0; /* --remote-name-all -o FILE: FILE */
  char *name = run_args_keep(a, url_file_name(a->url));
  const char *dir = a->output_dir ? a->output_dir : ".";
  size_t n = name ? strlen(dir) + strlen(name) + 2 : 0;
  char *path = name ? run_args_keep(a, malloc(n)) : NULL;
  if (!path) return EXIT_POLICY;
  snprintf(path, n, "%s/%s", dir, name);
  a->output = strcmp(dir, ".") == 0 ? name : path;
  a->output_by_url = 1;
  /* -c, --log-json ... naming the same file: refused as -o's are */
  int status = run_check_outputs(a);
  *clash = status != 0;
  return status;
}

/* The option as typed (args.c), else its usual name. */
static const char *typed(const char *as_typed, const char *name) {
  return as_typed[0] ? as_typed : name;
}

/* The first option given that only a URL's transfer reads, as typed (-I,
 * not the -X it sets): with a policy that has run(), it would be ignored.
 * --max-filesize too: the script's requests keep their bodies whole for
 * it (up to 16 MiB), so no sink could count them as they come; and
 * --fail-with-body and --fail-early, of a URL's answer and a batch. */
static const char *workflow_refused(const run_args *a) {
  const struct {
    int given;
    const char *name;
  } url_only[] = {
    /* first: each sets -X or -d as well, and the user typed it */
    { a->upload_file != NULL, "-T" },
    { a->nforms > 0, typed(a->form_opt, "-F") },
    { a->get, "-G" },
    { a->method != NULL, typed(a->method_opt, "-X") },
    { a->data != NULL, typed(a->data_opt, "-d") },
    { a->nheaders > 0, "-H" },
    { a->include, "-i" },
    { a->dump_header != NULL, "-D" },
    { a->write_out != NULL, "-w" },
    { a->fail, "-f" },
    { a->fail_with_body, "--fail-with-body" },
    { a->fail_early, "--fail-early" },
    { a->urls_file != NULL, "--urls" },
    { a->output_dir != NULL, "--output-dir" },
    { a->parallel, typed(a->parallel_opt, "--parallel-max") },
    { a->max_filesize > 0, "--max-filesize" },
    { a->continue_at, "-C" },
    { a->checksum != NULL, "--checksum" },
    { a->remote_name, typed(a->remote_opt, "-O") },
    { a->remote_header_name, "-J" },
  };
  /* named as the user typed it, the first typed (-K's words name theirs) */
  for (size_t i = 0; i < sizeof url_only / sizeof url_only[0]; i++)
    if (url_only[i].given) return a->url_only_opt[0] ? a->url_only_opt : url_only[i].name;
  return NULL;
}

/* What to run, from the options and whether the policy has run(); 0 or a
 * usage status (*clash: -O's file is another option's). */
static int choose_mode(run_args *a, const luaretry_policy *p, run_mode *mode, int *clash) {
  /* After a POLICY named, -- starts a command, or more of run()'s
   * arguments taken as they are (-x too) when the policy has one. */
  if (a->command_unsure) {
    int status = luaretry_policy_has_workflow(p) ? run_args_workflow(a) : run_check_kind(a);
    if (status) return status;
  }
  if (a->command) {
    *mode = RUN_COMMAND;
    return 0;
  }
  /* A policy with run() takes the words after it as its arguments. */
  if (luaretry_policy_has_workflow(p)) {
    *mode = RUN_WORKFLOW;
    const char *url_only = workflow_refused(a);
    if (url_only) {
      char why[512];
      snprintf(why, sizeof why, "run: %s is for URLs; %s runs its own requests", url_only,
               a->policy);
      return cli_usage("%s", why);
    }
    return 0;
  }
  /* One URL alone is one call, as ever; several (or --urls, or
   * --output-dir) make a batch. */
  if (a->nwords > 1 || a->urls_file || (a->output_dir && !a->remote_name)) {
    if (a->remote_name && !a->output_dir) /* -O: curl's folder */
      a->output_dir = ".", a->output_dir_implied = 1;
    if (a->continue_at) return cli_usage("run: -C - takes one URL%s", "");
    if (a->checksum) return cli_usage("run: --checksum takes one URL%s", "");
    if (a->include || a->dump_header || a->write_out)
      return cli_usage("run: -i, -D and -w take one URL%s", "");
    *mode = RUN_BATCH;
    return 0;
  }
  *mode = RUN_URL;
  if (a->nwords == 0)
    return cli_usage("run: a URL, -- COMMAND, or a policy with run() is needed%s", "");
  char why[256];
  a->url = a->words[0];
  if (!url_check(a->url, &a->url_fixed, why, sizeof why)) {
    char *safe = url_shown(a->url), what[640];
    snprintf(what, sizeof what, "run: bad URL %s: %s", safe ? safe : "(URL)", why);
    free(safe);
    return cli_usage("%s", what);
  }
  if (a->url_fixed) a->url = a->url_fixed; /* no scheme: http://, as curl guesses */
  return single_url_options(a, clash);
}

/* The bytes -C - or an earlier run left, for the digests (the sink's ud
 * is the response). */
static size_t held_read(void *ud, uint64_t offset, char *buf, size_t len) {
  const response *r = ud;
  ssize_t n = pread(r->out->fd, buf, len, (off_t)offset);
  return n > 0 ? (size_t)n : 0;
}

/* Every GET resumes a download that ends early; -C - from the end of the
 * file, an earlier run's partial from its end with its validator. */
static const luaretry_curl_resume *resume_options(const run_args *a, attempt_log *log,
                                                  const outfile *out, luaretry_curl_resume *r) {
  memset(r, 0, sizeof *r);
  r->note = run_resume_note;
  r->note_ud = log;
  r->checksum = a->checksum;
  if ((a->continue_at || out->partial) && out->fd >= 0) {
    off_t end = lseek(out->fd, 0, SEEK_END);
    r->offset = end > 0 ? (uint64_t)end : 0;
    r->validator = out->partial ? out->validator : NULL;
    r->held = held_read;
  }
  return r;
}

/* -J: the -O file renamed to the name the final answer's
 * Content-Disposition gives (response.c), a winning hedge's too: never
 * read on h, whose attempt was cancelled then; 0, or -1 after a message. */
static int remote_header_name(const char *path, const response *r) {
  return r->disposition ? disposition_rename(path, r->disposition, "") : 0;
}

/* The validator of what the sink holds when the call was cut, as the last
 * answer on h names it: a 200 or 206 (itself proof of ranges) with
 * Accept-Ranges and a strong ETag, else a Last-Modified; NULL: none. */
static const char *cut_validator(CURL *h) {
  long code = 0;
  struct curl_header *e;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  if (code != 200 && code != 206) return NULL;
  if (code == 200 && (curl_easy_header(h, "Accept-Ranges", 0, CURLH_HEADER, -1, &e) != CURLHE_OK ||
                      !strstr(e->value, "bytes")))
    return NULL;
  if (curl_easy_header(h, "ETag", 0, CURLH_HEADER, -1, &e) == CURLHE_OK && e->value[0] == '"')
    return e->value;
  if (curl_easy_header(h, "Last-Modified", 0, CURLH_HEADER, -1, &e) == CURLHE_OK && e->value[0])
    return e->value;
  return NULL;
}

/* A call cut by a stop signal or its deadline keeps its bytes for the
 * next run (outfile.h), when they are the resource's, from its byte 0. */
static void keep_partial(const run_args *a, const luaretry_decision *final, CURL *h,
                         const response *r, outfile *out) {
  if (!out->across_runs || r->suspect || out->fd < 0 ||
      (final->reason != LUARETRY_REASON_CANCELLED && final->reason != LUARETRY_REASON_DEADLINE))
    return;
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  /* cut before any answer, or after an error answer (whose body the
   * sink never got): an earlier run's partial stays, unless this run
   * started the sink over; then the bytes are those of this run's last
   * broken answer that can be resumed, if any */
  const char *validator = cut_validator(h);
  if (code == 0 || code >= 400)
    validator = out->partial && !out->restarted ? out->validator
                : r->validator[0]               ? r->validator
                                                : NULL;
  if (!validator || lseek(out->fd, 0, SEEK_END) <= 0) return;
  char *url = url_redacted(a->url);
  if (url && outfile_partial_keep(out, url, validator) == 0 && r->log->verbosity > 0)
    fprintf(stderr, "luaretry: %s: the partial download is kept for the next run\n", url);
  free(url);
}

/* run POLICY URL: the request through the libcurl helper, with curl's
 * options on its handle, its body streamed to `out` (rewound for each
 * attempt) with -i, -D, -w and -f around it, and the upload read from its
 * file as it is sent. */
static luaretry_code url_run(const run_args *a, luaretry_policy *p, luaretry_call *c,
                             attempt_log *log, upload *body, outfile *out,
                             luaretry_decision *final) {
  luaretry_header headers[MAX_HEADERS];
  split_headers(a, headers);
  luaretry_request req = run_request(a, a->url, headers, body);
  CURL *h = curl_easy_init();
  if (!h) return LUARETRY_E_NOMEM;
  int applied = curlopts_apply(a, h) == 0; /* first: response's debug callback wins */
  response r;
  response_init(&r, a, log, out, h);
  luaretry_code rc = LUARETRY_E_ARG; /* a usage error, already told */
  if (applied && (!a->write_out || writeout_load(a->write_out, &r.format) == 0)) {
    luaretry_call_on_decision(c, response_observe, &r);
    luaretry_curl_options co;
    luaretry_curl_options_init(&co);
    co.sink = response_sink;
    co.sink_ud = &r;
    co.restart = response_restart;
    luaretry_curl_resume resume;
    co.resume = resume_options(a, log, out, &resume);
    if (body->fd >= 0) {
      co.upload = upload_read;
      co.upload_ud = body;
    }
    rc = response_perform(&r, p, c, &req, &co, final);
  }
  long code = 0; /* the final attempt's answer, 0: none came */
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  if (rc == LUARETRY_OK) keep_partial(a, final, h, &r, out);
  /* an earlier run's partial goes on success, on a final answer and when
   * it no longer matches (stale, or the last body failed its digest);
   * refused, spent on transient errors, a policy error, a final error
   * with no answer (a bad certificate), an error page too large for
   * --max-filesize (no word on the resource): it stays */
  int answered =
    final->reason == LUARETRY_REASON_FINAL && code > 0 && !(r.final_large && code >= 400);
  if (rc == LUARETRY_OK && final->reason != LUARETRY_REASON_SUCCESS && !answered && !r.suspect &&
      !r.damaged)
    outfile_partial_hold(out);
  if (rc == LUARETRY_OK) {
    /* the body in place first: -w comes after it, as curl writes it */
    int status = cli_exit_status(final->reason);
    int decided = final->attempt > 0 && final->reason != LUARETRY_REASON_CANCELLED;
    /* --fail-with-body: curl's, the answer to -o too, but not one that
     * broke off: FILE never holds half a file */
    /* -C - whose file went to a temporary (a 200 from zero): that holds
     * an attempt's bytes, never the error page (resume.c): only success
     * puts it in place */
    int replacing = a->continue_at && !out->append && out->held_from > 0;
    int keep = status == EXIT_OK || (!out->path && decided && !a->fail) ||
               (a->fail_with_body && decided && code > 0 && !r.final_broken && !replacing);
    if (r.damaged || r.page_refused) keep = 0;
    int lost = outfile_finish(out, keep) != 0;
    /* a stop signal cut the write to a reader that stalled (a full pipe,
     * a FIFO none opens): the run ends there, interrupted */
    if (lost && cli_interrupted()) {
      final->reason = LUARETRY_REASON_CANCELLED;
    } else {
      /* a body not written, or -J's refusal: exit 1 (curl's 23), and -D
       * and -w written all the same, %{exitcode} saying 1 */
      int shown = lost && status == EXIT_OK ? EXIT_FINAL : status;
      if (shown == EXIT_OK && a->remote_header_name && out->path &&
          remote_header_name(out->path, &r) != 0)
        shown = EXIT_FINAL;
      if (response_finish(&r, final, shown) != status) rc = LUARETRY_E_IO;
    }
  }
  response_free(&r);
  curl_easy_cleanup(h);
  return rc;
}

/* What a call needs before its first attempt: the upload's first bytes,
 * and what must be spooled (-d @-, a FIFO; a command's standard input),
 * within the deadline.  0, or the exit status after a message (if `tell`:
 * not -s). */
static int inputs_ready(run_mode mode, luaretry_call *c, const luaretry_tuning *t, upload *body,
                        int *stdin_fd, int tell) {
  double left = t->deadline > 0 ? t->deadline - luaretry_call_elapsed(c) : 0;
  if (t->deadline > 0 && left <= 0) left = 1e-3;
  spool_status st = SPOOL_OK;
  const char *what = body->arg;
  if (mode == RUN_COMMAND && !isatty(STDIN_FILENO) && fcntl(STDIN_FILENO, F_GETFD) >= 0) {
    /* given whole to every attempt, as -d @- is */
    uint64_t size;
    what = "standard input";
    st = spool_input(STDIN_FILENO, what, left, stdin_fd, &size);
  } else if (mode == RUN_URL) {
    st = upload_ready(body, left, t->body_limit);
  }
  char name[320];
  if (st == SPOOL_DEADLINE && tell)
    fprintf(stderr, "luaretry: %s did not end before the deadline (%g s)\n",
            what == body->arg ? upload_name(body, name, sizeof name) : what, t->deadline);
  if (st == SPOOL_INTERRUPTED && tell) fprintf(stderr, "luaretry: interrupted\n");
  return st == SPOOL_OK            ? 0
         : st == SPOOL_DEADLINE    ? EXIT_DEADLINE
         : st == SPOOL_INTERRUPTED ? EXIT_INTERRUPTED
                                   : EXIT_USAGE;
}

/* A call that ended in error code rc: why (if `tell`), and the exit
 * status. */
static int call_error(luaretry_policy *p, luaretry_call *c, run_mode mode, const upload *body,
                      luaretry_code rc, int tell) {
  if (rc == LUARETRY_E_IO) return EXIT_FINAL;        /* -D could not be written: said */
  if (rc == LUARETRY_E_ARG && mode != RUN_COMMAND) { /* curl's options: said; the helper's, here */
    const char *why = luaretry_call_errmsg(c);
    if (why[0]) { /* a usage error: said under -s too */
      fputs("luaretry: run: ", stderr);
      cli_text(stderr, why);
      fputc('\n', stderr);
    }
    return EXIT_USAGE;
  }
  if (rc == LUARETRY_E_OPERATION) { /* our upload or output stopped it, and said why */
    if (!body->why[0]) return EXIT_FINAL;
    char name[320];
    fprintf(stderr, "luaretry: %s: %s\n", upload_name(body, name, sizeof name), body->why);
    return EXIT_USAGE;
  }
  const char *pm = luaretry_policy_errmsg(p);
  if (!tell) return cli_error_status(rc);
  fputs("luaretry: ", stderr);
  cli_text(stderr, pm[0] ? pm : luaretry_call_errmsg(c));
  fputc('\n', stderr);
  return cli_error_status(rc);
}

/* Begins the call (*c, freed by the caller) and runs it into *final; the
 * exit status.  *decided: the call ended on a decision (not cancelled, no
 * error), so its final attempt's output is what standard output shows, as
 * curl shows an error page. */
static int run_call(const run_args *a, luaretry_policy *p, run_mode mode, attempt_log *log,
                    upload *body, outfile *out, luaretry_call **c, luaretry_decision *final,
                    int *decided, int *command_status) {
  luaretry_call_options opt;
  luaretry_call_options_init(&opt);
  if (a->has_seed) opt.flags |= LUARETRY_CALL_SEED, opt.seed = a->seed;
  /* -i, -D and -w tell of one transfer: no hedge beside it; nor beside
   * --max-filesize, counted on the one transfer the sink gets as it comes */
  if (a->include || a->dump_header || a->write_out || a->max_filesize)
    opt.flags |= LUARETRY_CALL_NO_HEDGE;
  /* a workflow's requests are paced and admitted, not its rounds */
  if (mode == RUN_WORKFLOW) opt.flags |= LUARETRY_CALL_WORKFLOW;
  luaretry_code rc = luaretry_call_begin(p, &opt, c);
  if (rc != LUARETRY_OK) {
    fprintf(stderr, "luaretry: %s\n", luaretry_strerror(rc));
    return EXIT_POLICY;
  }
  luaretry_call_on_decision(*c, log_attempt, log);
  cli_cancel_on_signal(*c, NULL);
  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  int stdin_fd = -1;
  int tell = a->verbosity > 0 || a->show_error; /* -s: nothing */
  int status = inputs_ready(mode, *c, &t, body, &stdin_fd, tell);
  if (status == 0) {
    if (mode == RUN_URL)
      rc = url_run(a, p, *c, log, body, out, final);
    else if (mode == RUN_WORKFLOW)
      rc = workflow_run(a, p, *c, log, out, final);
    else
      rc = command_run(*c, a->command, stdin_fd, a->stdout_live, a->before_retry, out, final,
                       command_status);
  }
  cli_cancel_on_signal(NULL, NULL);
  if (stdin_fd >= 0) close(stdin_fd);
  if (status != 0) return status;
  if (rc != LUARETRY_OK) return call_error(p, *c, mode, body, rc, tell);
  if (final->reason == LUARETRY_REASON_CANCELLED) {
    if (tell) fprintf(stderr, "luaretry: interrupted\n");
  } else {
    *decided = final->attempt > 0;
  }
  /* refused before the first attempt (at begin, or as it would go): -q's
   * one line, told here alone (log_stop leaves it), escaped as log lines are */
  if (final->attempt == 0 && final->message && tell) {
    fprintf(stderr, "luaretry: before attempt 1: %s (", luaretry_reason_name(final->reason));
    cli_text(stderr, final->rule);
    fputs("): ", stderr);
    cli_text(stderr, final->message);
    fputc('\n', stderr);
  }
  return cli_exit_status(final->reason);
}

/* -w for a command: what a command has (%{exitcode}, %{num_attempts},
 * %{time_total}, %{verdict}); a variable of HTTP's is a usage error, never
 * an empty field.  0 or a usage status. */
static int command_writeout(const run_args *a, char **format) {
  static const char *const OK[] = { "exitcode}", "num_attempts}", "time_total}", "verdict}" };
  if (writeout_load(a->write_out, format) != 0) return EXIT_USAGE;
  for (const char *s = *format; (s = strstr(s, "%{")) != NULL; s += 2) {
    if (s > *format && s[-1] == '%') continue; /* %%{: text */
    int ok = 0;
    for (size_t k = 0; k < sizeof OK / sizeof OK[0]; k++)
      ok |= !strncmp(s + 2, OK[k], strlen(OK[k]));
    if (!ok) {
      char name[64];
      snprintf(name, sizeof name, "%.*s", (int)strcspn(s, "}") + 1, s);
      free(*format);
      *format = NULL;
      return cli_usage(
        "run: -w: a command has %%{exitcode}, %%{num_attempts}, %%{time_total} "
        "and %%{verdict}, not %s",
        name);
    }
  }
  if (strstr(*format, "%header{")) {
    free(*format);
    *format = NULL;
    return cli_usage("run: -w: a command has no %%header{NAME}%s", "");
  }
  return 0;
}

/* A -o FILE (or -O) GET of one URL keeps what it got when it is cut, and
 * continues it in the next run (outfile.h); a batch's files too (batch.c). */
static int across_runs(const run_args *a, run_mode mode) {
  return mode == RUN_URL && a->output && strcmp(a->output, "-") != 0 && run_keeps_partials(a);
}

/* One call: its log, its body (-d) and its output (-o, or standard output). */
static int run_one(const run_args *a, luaretry_policy *p, run_mode mode) {
  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  char *target =
    a->url ? url_redacted(a->url) : strdup(mode == RUN_WORKFLOW ? t.name : a->command[0]);
  attempt_log log = { a->verbosity, NULL, t.max_attempts, target, 0, a->show_error, 0, 0 };
  log.quota_max_wait = log_quota_max_wait(p);
  int opened = log_json_open(a->log_json, &log.json, a->verbosity > 0 || a->show_error);
  if (opened != 0) {
    report_end(a, p, NULL, LUARETRY_REASON_NONE, 0, opened); /* --metrics-file's status */
    free(target);
    return opened;
  }
  upload body = { .fd = -1, .src = -1 };
  outfile out; /* finished even when data_open() failed */
  /* messages name the option given: -O's file is named after the URL */
  const char *out_opt = a->output_by_url && a->remote_opt[0] ? a->remote_opt : "-o";
  outfile_init(&out, a->output, out_opt);
  luaretry_call *c = NULL;
  luaretry_decision final;
  memset(&final, 0, sizeof final);
  int decided = 0, command_status = -1;
  char *format = NULL; /* a command's -w */
  int status = a->data ? data_open(a, &body) : 0;
  if (status == 0 && mode == RUN_COMMAND && a->write_out) status = command_writeout(a, &format);
  if (status == 0) status = output_check("-D", a->dump_header, 0);
  if (status == 0 && a->create_dirs && a->output && strcmp(a->output, "-") != 0 &&
      create_dirs(a->output, 0, out_opt) != 0)
    status = EXIT_USAGE;
  /* a folder no file can be made in: a usage error, before any request */
  if (status == 0) status = output_check(out_opt, a->output, !a->continue_at);
  unsigned long long held = 0;
  out.across_runs = across_runs(a, mode);
  char *url = out.across_runs ? url_redacted(a->url) : NULL;
  int partial = status == 0 && url ? outfile_partial_open(&out, url) : 0;
  free(url);
  if (partial < 0) status = EXIT_USAGE;
  if (status == 0 && !partial &&
      (a->continue_at ? outfile_continue(&out, &held) : outfile_create(&out)) != 0)
    status = EXIT_USAGE;
  if (status == 0)
    status = run_call(a, p, mode, &log, &body, &out, &c, &final, &decided, &command_status);
  if (mode == RUN_COMMAND) status = retryopts_exit_status(a, status, &final, command_status);
  /* a file only on success; standard output shows the final attempt's,
   * unless -f asked for none on failure (as curl's --fail) */
  int keep = status == EXIT_OK || (!out.path && decided && !a->fail);
  if (status != EXIT_OK) outfile_partial_hold(&out); /* a usage error, or no call */
  int lost = outfile_finish(&out, keep) != 0;
  if (lost && cli_interrupted() && status != EXIT_INTERRUPTED) {
    /* a stop signal cut the write to a reader that stalled */
    if (a->verbosity > 0 || a->show_error) fprintf(stderr, "luaretry: interrupted\n");
    status = EXIT_INTERRUPTED;
  } else if (lost && status == EXIT_OK) {
    status = EXIT_FINAL;
  }
  if (format) { /* after the output, as a URL's -w */
    writeout_info w = { NULL, &final, 0, status };
    writeout_print(stdout, format, &w);
    free(format);
  }
  report_end(a, p, log.json, final.reason, final.attempt, status);
  luaretry_call_free(c);
  upload_close(&body);
  log_json_close(log.json, a->log_json);
  free(target);
  return status;
}

/* --speed-limit alone, with a policy that sets no stall_timeout: curl's
 * 30 s.  0 or a usage status. */
static int stall_default(const run_args *a, luaretry_policy *p) {
  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  if (!a->speed_limit || a->speed_time > 0 || t.stall_timeout > 0) return 0;
  if (luaretry_policy_set(p, "stall_timeout", "30") == LUARETRY_OK) return 0;
  fprintf(stderr, "luaretry: --speed-limit: %s\n", luaretry_policy_errmsg(p));
  return EXIT_POLICY;
}

/* Whether the policy loads with the --set overrides and those curl's
 * options made, but for the options of `except` (NULL: all of them). */
static int loads_without(const run_args *a, const char *path, const char *except) {
  luaretry_policy *p;
  if (luaretry_policy_new(&p) != LUARETRY_OK) return 0;
  int ok = 1;
  for (int i = 0; i < a->nsets && ok; i++) {
    char name[CLI_SET_NAME];
    const char *value;
    if (a->set_from[i] && (!except || a->set_from[i] == except)) continue;
    ok = cli_split_set(a->sets[i], name, &value) == 0 &&
         luaretry_policy_set(p, name, value) == LUARETRY_OK;
  }
  ok = ok && luaretry_policy_load_file(p, path) == LUARETRY_OK;
  luaretry_policy_free(p);
  return ok;
}

/* The policy did not load, and its message named fields, never the
 * options that set them (--max-time, --retry-delay, --retry-all-errors,
 * --retry-on-exit...): when it loads without those, the ones it cannot
 * take are named (each that alone makes the difference; else all). */
static void blame_options(const run_args *a) {
  const char *culprit[MAX_SETS];
  int n = 0, all = 0;
  char path[CLI_PATH_MAX];
  for (int i = 0; i < a->nsets; i++) {
    int first = a->set_from[i] != NULL; /* each option once */
    for (int k = 0; first && k < i; k++) first = a->set_from[k] != a->set_from[i];
    if (first) culprit[n++] = a->set_from[i];
  }
  if (n == 0 || luaretry_policy_find(a->policy, path, sizeof path) != LUARETRY_OK ||
      !loads_without(a, path, NULL))
    return; /* not theirs */
  int alone[MAX_SETS];
  for (int j = 0; j < n; j++) all += alone[j] = loads_without(a, path, culprit[j]);
  fprintf(stderr, "luaretry: %s loads without", a->policy);
  for (int j = 0, said = 0; j < n; j++) {
    if (all && !alone[j]) continue;
    fprintf(stderr, "%s %s (", said++ ? (all ? " or" : ",") : "", culprit[j]);
    for (int k = 0, m = 0; k < a->nsets; k++)
      if (a->set_from[k] == culprit[j]) fprintf(stderr, "%s%s", m++ ? " " : "", a->sets[k]);
    fputc(')', stderr);
  }
  fputs(": it cannot take what that sets\n", stderr);
}

/* libcurl set up and the policy loaded around the run.  A run that ends
 * before its call (the policy did not load, a usage error found with it)
 * still ends --log-json with its summary and writes --metrics-file, as a
 * run that made its call does: neither is left saying an earlier run's. */
static int run_loaded(run_args *a) {
  cli_store store;
  int status = cli_fleet_store(a->fleet, a->redis, &store);
  if (status != 0) {
    report_early(a, NULL, status, 1);
    return status;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    fprintf(stderr, "luaretry: cannot initialise libcurl\n");
    report_early(a, NULL, EXIT_POLICY, 1);
    return EXIT_POLICY;
  }
  status = EXIT_POLICY;
  luaretry_policy *p =
    cli_load_policy_redis(a->policy, a->sets, a->nsets, a->verbosity > 0, &store, &status);
  if (!p && status == EXIT_POLICY) blame_options(a);
  /* -q shows no policy warnings, but this one (-s: nothing at all) */
  if (p && store.field && a->verbosity == 0 && a->show_error)
    cli_fleet_warn_unshared(p, store.from);
  run_mode mode = RUN_URL;
  int reported = 0, clash = 0; /* run_one and batch_run report their end */
  if (p && (status = choose_mode(a, p, &mode, &clash)) == 0 && trace_open(a) != 0)
    status = EXIT_USAGE;
  else if (p && status == 0 && (status = stall_default(a, p)) == 0) {
    log_policy_events(p, a->verbosity);
    if (mode == RUN_COMMAND && !a->policy_defaulted && a->verbosity > 0)
      command_policy_check(p, a->policy);
    cli_fleet_start(p);
    if (curlopts_begin(a, mode != RUN_WORKFLOW) != 0) {
      fprintf(stderr, "luaretry: -b, -c or --resolve: out of memory\n");
      status = EXIT_POLICY;
    } else {
      status = mode == RUN_BATCH ? batch_run(a, p) : run_one(a, p, mode);
      reported = 1;
    }
    if (curlopts_end(a) != 0 && status == EXIT_OK) {
      fprintf(stderr, "luaretry: -c %s: the cookie jar could not be written\n", a->cookie_jar);
      status = EXIT_FINAL;
    }
  }
  if (!reported) report_early(a, p, status, !clash);
  trace_close();
  luaretry_policy_free(p);
  curl_global_cleanup();
  return status;
}

int cli_run(int argc, char **argv) {
  /* from the start: a stop signal while reading input cancels too */
  cli_catch_stop_signals();
  char **words = calloc((size_t)argc + 1, sizeof *words);
  if (!words) {
    fprintf(stderr, "luaretry: out of memory\n");
    return EXIT_POLICY;
  }
  run_args a;
  int status = parse_run(argc, argv, &a, words);
  /* a stop signal cut -K's read: nothing runs (-s: said only when given
   * before the -K, the options after it never read) */
  if (status == EXIT_INTERRUPTED && (a.verbosity > 0 || a.show_error))
    fprintf(stderr, "luaretry: interrupted\n");
  if (status == 0) status = run_loaded(&a);
  run_args_free(&a);
  free(a.url_fixed);
  run_args_free(&a);
  free(words);
  return status;
}
