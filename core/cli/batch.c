/* batch.c: run POLICY URL URL... | --urls FILE.  Each URL is its own call,
 * all of them driven by luaretry_curl_perform_many() and sharing the
 * policy's budget, breaker and counters; each ends with a summary line, and
 * the batch exits with the worst status of its calls. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "run.h"

typedef struct {
  attempt_log log;         /* log.index: the URL's number; log.target: redacted */
  luaretry_request req;
  char *name;              /* --output-dir: the file's name in DIR */
  char *path;              /* DIR/NAME */
  char number[16];         /* "[3]": how messages about the file start */
  outfile file;            /* --output-dir: the body, kept on success */
} batch_url;

typedef struct {
  const run_args *a;
  char **list;             /* the URLs: the command line's, then --urls FILE's */
  int n, cap;
  batch_url *urls;
  luaretry_curl_job *jobs;
  FILE *json;              /* --log-json */
  luaretry_header headers[MAX_HEADERS];
  upload body;             /* -d, sent by every call */
  outfile out;             /* standard output, without --output-dir */
  luaretry_curl_many *many;
  int worst;               /* the worst exit status of the calls so far */
  luaretry_reason worst_reason;  /* the verdict of the call that set it */
  int interrupted;         /* some call ended cancelled */
} batch;

/* Exit statuses from best to worst: the batch exits with the worst of its
 * calls.  An interruption beats everything, then a policy error, then a
 * refusal (budget, circuit), the deadline, exhausted attempts, a final
 * response, success. */
static int severity(int status) {
  switch (status) {
  case EXIT_OK: return 0;
  case EXIT_FINAL: return 1;
  case EXIT_EXHAUSTED: return 2;
  case EXIT_DEADLINE: return 3;
  case EXIT_REFUSED: return 4;
  case EXIT_POLICY: return 5;
  case EXIT_INTERRUPTED: return 6;
  }
  return 5;
}

/* ---- the list of URLs */

static int add_url(batch *b, const char *url) {
  if (b->n == b->cap) {
    int grown = b->cap ? b->cap * 2 : 64;
    char **d = realloc(b->list, (size_t)grown * sizeof *d);
    if (!d) return -1;
    b->list = d;
    b->cap = grown;
  }
  if (!(b->list[b->n] = strdup(url))) return -1;
  b->n++;
  return 0;
}

/* --urls FILE: a URL a line; blank lines and # comments are skipped. */
static int read_url_list(batch *b, const char *path) {
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
  if (!f) {
    fprintf(stderr, "luaretry: --urls %s: %s\n", path, strerror(errno));
    return -1;
  }
  char *line = NULL;
  size_t size = 0;
  ssize_t len;
  int rc = 0;
  while (rc == 0 && (len = getline(&line, &size, f)) >= 0) {
    char *s = line, *e = line + len;
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) e--;
    *e = '\0';
    if (*s && *s != '#') rc = add_url(b, s);
  }
  if (rc == 0 && ferror(f)) {
    fprintf(stderr, "luaretry: --urls %s: %s\n", path, strerror(errno));
    rc = -1;
  } else if (rc != 0) {
    fprintf(stderr, "luaretry: --urls %s: out of memory\n", path);
  }
  free(line);
  if (f != stdin) fclose(f);
  return rc;
}

/* The URLs, checked, and what else must hold before any call starts. */
static int collect_urls(batch *b) {
  const run_args *a = b->a;
  for (int i = 0; i < a->nwords; i++)
    if (add_url(b, a->words[i]) != 0) return EXIT_POLICY;
  if (a->urls_file && read_url_list(b, a->urls_file) != 0) return EXIT_USAGE;
  char why[256], what[512];
  for (int i = 0; i < b->n; i++) {
    char *fixed;
    if (!url_check(b->list[i], &fixed, why, sizeof why)) {
      snprintf(what, sizeof what, "run: bad URL %s: %s", b->list[i], why);
      return cli_usage("%s", what);
    }
    if (fixed) free(b->list[i]), b->list[i] = fixed;  /* no scheme: http:// */
  }
  if (b->n == 0) return cli_usage("run: --urls %s holds no URL", a->urls_file);
  if (a->output) return cli_usage("run: -o takes one URL; with several use --output-dir DIR%s", "");
  struct stat st;
  if (a->output_dir) {
    const char *why_not = stat(a->output_dir, &st) != 0 ? strerror(errno)
                          : !S_ISDIR(st.st_mode) ? "not a directory" : NULL;
    if (why_not) {
      fprintf(stderr, "luaretry: --output-dir %s: %s\n", a->output_dir, why_not);
      return EXIT_USAGE;
    }
  }
  return EXIT_OK;
}

/* ---- --output-dir: a file name for each URL */

/* A set of names (open addressing), to make each file name unique. */
typedef struct {
  char **slot;
  size_t mask;
} name_set;

static size_t name_hash(const char *s) {
  size_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* 1 if added, 0 if already there. */
static int name_add(name_set *set, char *name) {
  size_t i = name_hash(name) & set->mask;
  while (set->slot[i]) {
    if (strcmp(set->slot[i], name) == 0) return 0;
    i = (i + 1) & set->mask;
  }
  set->slot[i] = name;
  return 1;
}

/* `base`, or base.1, base.2 ... when taken; NULL when out of memory. */
static char *unique_name(name_set *set, char *base) {
  char *name = base;
  for (long k = 1; !name_add(set, name); k++) {
    if (name != base) free(name);
    size_t len = strlen(base) + 24;
    if (!(name = malloc(len))) break;
    snprintf(name, len, "%s.%ld", base, k);
  }
  if (name != base) free(base);
  return name;
}

static char *join_path(const char *dir, const char *name) {
  size_t len = strlen(dir) + strlen(name) + 2;
  char *s = malloc(len);
  if (s) snprintf(s, len, "%s/%s", dir, name);
  return s;
}

/* Names for every URL, unique in the batch: NAME, then NAME.1, NAME.2 ...
 * for the URLs after the first with the same NAME; each its file DIR/NAME. */
static int assign_names(batch *b) {
  name_set set;
  size_t cap = 16;
  while (cap < (size_t)b->n * 2) cap *= 2;
  set.slot = calloc(cap, sizeof *set.slot);
  set.mask = cap - 1;
  if (!set.slot) return -1;
  int rc = 0;
  for (int i = 0; rc == 0 && i < b->n; i++) {
    batch_url *u = &b->urls[i];
    char *base = url_file_name(u->req.url);
    u->name = base ? unique_name(&set, base) : NULL;
    u->path = u->name ? join_path(b->a->output_dir, u->name) : NULL;
    if (!u->path) { rc = -1; break; }
    snprintf(u->number, sizeof u->number, "[%d]", u->log.index);
    outfile_init(&u->file, u->path, u->number, OUTFILE_PRIVATE);
  }
  free(set.slot);
  return rc;
}

/* ---- the calls */

/* A call ended: keep or drop its file, print its summary line, fold its
 * exit status into the batch's. */
static void url_done(void *ud, size_t i, const luaretry_curl_job *job) {
  batch *b = ud;
  batch_url *u = &b->urls[i];
  const luaretry_curl_result *r = &job->result;
  int status = r->code != LUARETRY_OK ? cli_error_status(r->code)
               : cli_exit_status(r->final.reason);
  if (status == EXIT_INTERRUPTED) b->interrupted = 1;
  if (outfile_finish(b->a->output_dir ? &u->file : &b->out, status == EXIT_OK) != 0)
    status = EXIT_FINAL;
  if (severity(status) > severity(b->worst)) b->worst = status, b->worst_reason = r->final.reason;
  char last[64] = "none";
  if (r->final.attempt > 0) {
    if (r->error) snprintf(last, sizeof last, "%s error", r->error);
    else snprintf(last, sizeof last, "%d", r->status);
  }
  const char *verdict = r->code == LUARETRY_OK ? luaretry_reason_name(r->final.reason) : "error";
  const char *detail = r->code != LUARETRY_OK ? r->errmsg : NULL;
  fprintf(stderr, "luaretry: [%d] %s: %s, %d attempt%s, status %s, %.3f s, exit %d%s%s\n",
          u->log.index, u->log.target, verdict, r->final.attempt,
          r->final.attempt == 1 ? "" : "s", last, r->elapsed, status, detail ? ": " : "",
          detail ? detail : "");
}

/* URL i's request, log and job. */
static void prepare_url(batch *b, int i, long max_attempts) {
  batch_url *u = &b->urls[i];
  u->log.verbosity = b->a->verbosity;
  u->log.json = b->json;
  u->log.max_attempts = max_attempts;
  u->log.index = i + 1;
  u->log.target = url_redacted(b->list[i]);
  if (!u->log.target) u->log.target = strdup("(URL)");
  u->req = run_request(b->a, b->list[i], b->headers, &b->body);
  luaretry_curl_job *job = &b->jobs[i];
  job->request = &u->req;
  job->sink = outfile_write;
  job->sink_ud = b->a->output_dir ? &u->file : &b->out;
  job->observer = log_attempt;
  job->observer_ud = &u->log;
}

static int prepare(batch *b, luaretry_policy *p) {
  const run_args *a = b->a;
  b->urls = calloc((size_t)b->n, sizeof *b->urls);
  b->jobs = b->urls ? calloc((size_t)b->n, sizeof *b->jobs) : NULL;
  if (!b->jobs) {
    fprintf(stderr, "luaretry: out of memory\n");
    return EXIT_POLICY;
  }
  if (log_json_open(a->log_json, &b->json) != 0) return EXIT_USAGE;
  split_headers(a, b->headers);
  if (a->data && data_open(a, &b->body) != 0) return EXIT_USAGE;
  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  for (int i = 0; i < b->n; i++) prepare_url(b, i, t.max_attempts);
  if (a->output_dir && assign_names(b) != 0) {
    fprintf(stderr, "luaretry: out of memory\n");
    return EXIT_POLICY;
  }
  return EXIT_OK;
}

static int perform(batch *b, luaretry_policy *p) {
  /* curl's options on a template every call's handle is copied from */
  CURL *easy = curl_easy_init();
  if (!easy || curlopts_apply(b->a, easy) != 0) {
    curl_easy_cleanup(easy);
    return EXIT_USAGE;
  }
  luaretry_code rc = luaretry_curl_many_new(&b->many);
  luaretry_call_options copt;
  luaretry_call_options_init(&copt);
  if (b->a->has_seed) copt.flags |= LUARETRY_CALL_SEED, copt.seed = b->a->seed;
  luaretry_curl_many_options mo;
  luaretry_curl_many_options_init(&mo);
  mo.max_transfers = b->a->parallel ? (size_t)b->a->parallel : 1;
  mo.call = &copt;
  mo.done = url_done;
  mo.done_ud = b;
  mo.easy = easy;
  mo.connect_timeout = b->a->connect_timeout;
  if (rc == LUARETRY_OK) {
    cli_cancel_on_signal(NULL, b->many);
    rc = luaretry_curl_perform_many(b->many, p, b->jobs, (size_t)b->n, &mo);
    cli_cancel_on_signal(NULL, NULL);
  }
  curl_easy_cleanup(easy);
  if (rc != LUARETRY_OK) {
    fprintf(stderr, "luaretry: %s\n", luaretry_strerror(rc));
    return EXIT_POLICY;
  }
  if (b->interrupted) fprintf(stderr, "luaretry: interrupted\n");
  return b->worst;
}

static void batch_free(batch *b) {
  luaretry_curl_many_free(b->many);
  for (int i = 0; b->urls && i < b->n; i++) {
    outfile_finish(&b->urls[i].file, 0);  /* a temporary is never left behind */
    free((char *)b->urls[i].log.target);
    free(b->urls[i].name);
    free(b->urls[i].path);
  }
  upload_close(&b->body);
  log_json_close(b->json);
  for (int i = 0; i < b->n; i++) free(b->list[i]);
  free(b->list);
  free(b->urls);
  free(b->jobs);
}

int batch_run(const run_args *a, luaretry_policy *p) {
  batch b;
  memset(&b, 0, sizeof b);
  b.a = a;
  b.worst = EXIT_OK;
  b.worst_reason = LUARETRY_REASON_SUCCESS;
  outfile_init(&b.out, NULL, NULL, OUTFILE_PRIVATE);
  int status = collect_urls(&b);
  if (status == EXIT_OK) status = prepare(&b, p);
  if (status == EXIT_OK) status = perform(&b, p);
  report_end(a, p, b.json, b.worst_reason, -1, status);
  batch_free(&b);
  return status;
}
