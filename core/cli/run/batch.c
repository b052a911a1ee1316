/* batch.c: run POLICY URL URL... | --urls FILE.  Each URL is its own call,
 * all of them driven by luaretry_curl_perform_many() and sharing the
 * policy's budget, breaker and counters; each ends with a summary line, and
 * the batch exits with the worst status of its calls.
 *
 * The list is read as calls can begin, never held whole: the library asks
 * for the next URL when a call may start (at most LUARETRY_CURL_MAX_CALLS
 * in progress, transfers and waits together), and a URL's state is freed
 * when its call ends, so a million URLs run in the memory of a few
 * thousand.  A URL waiting for its retry holds no file descriptor either.
 * A --urls FILE that is a regular file is checked whole first (a bad URL on
 * its last line stops the batch before the first request, as it did when
 * the list was read at once); a list from a pipe or standard input can only
 * be checked as it comes, and a bad URL there fails alone.  Its lines are
 * taken as they come and never waited for in a read (run_list): while its
 * writer pauses, the library waits for it beside the transfers. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "run.h"

typedef struct {
  attempt_log log; /* first: the job's observer_ud leads back here;
                              log.index: the URL's number; log.target:
                              redacted */
  luaretry_request req;
  char *url;                   /* as given */
  char *path;                  /* --output-dir: DIR/NAME */
  char number[16];             /* "[3]": how messages about the file start */
  outfile file;                /* the body: DIR/NAME kept on success, or standard
                              output (a spool of its own) shown once decided */
  char *body_line;             /* "; body: ..." of a failure's final answer, or NULL */
  luaretry_curl_resume resume; /* a download that ends early goes on */
  struct batch *b;             /* its batch: the status line's counts */
  int state;                   /* URL_IN_FLIGHT, URL_WAITING, URL_THROTTLED */
  long long got;               /* body bytes since the last decision */
  long long streamed;          /* the attempt on the host's handle's, in the total */
  int hedge_won;               /* a hedge's answer ended the call: its body replaces
                                  the stream, whose bytes leave the total */
  int too_large;               /* the sink refused the final answer's body, given
                                  after the stop, as above --max-filesize */
  int unwritten;               /* a success whose body could not be kept */
  /* resume across runs (outfile.h), as one URL's (run.c, response.c) */
  int across_runs;     /* a GET to a file: what a stop signal cuts is kept */
  char validator[256]; /* of the bytes of a broken answer the file holds
                          (since its last restart), which the next attempt
                          resumes; "": none */
  int started_over;    /* the file restarted before the stop: an earlier
                          run's partial is not what it holds */
  int stopped;         /* the final decision came: a restart now gives the
                          error answer that ended the call, and the partial
                          still matches */
  int suspect;         /* the last attempt's bytes are not the resource's
                          (a digest mismatch, too large): none kept */
  char *disposition;   /* -J: the final answer's Content-Disposition, or NULL */
} batch_url;

enum { URL_IN_FLIGHT, URL_WAITING, URL_THROTTLED };

typedef struct batch {
  const run_args *a;
  int next_word; /* the command line's URLs come first */
  int list_fd;   /* then --urls FILE's (-1: none), read as they are needed */
  run_list list;
  long line_no;
  int list_failed; /* reading it failed: the batch fails */
  int list_later;  /* no whole line could be read now: a pipe's writer pauses */
  int list_done;   /* read to its end */
  int clash;       /* a URL's file is another option's: --log-json's is left alone */
  long urls;       /* URLs read so far (their numbers) */
  long max_attempts;
  double quota_max_wait; /* attempt_log's */
  out_names names;       /* --output-dir's, each unique */
  out_others others;     /* the other options' files in that folder */
  out_order order;       /* standard output's bodies, in list order */
  FILE *json;            /* --log-json */
  int keeps_partials;    /* run_keeps_partials(): each file keeps what is cut */
  luaretry_header headers[MAX_HEADERS];
  upload body; /* -d, sent by every call */
  luaretry_curl_many *many;
  int worst;                    /* the worst exit status of the calls so far */
  luaretry_reason worst_reason; /* the verdict of the call that set it */
  int interrupted;              /* some call ended cancelled */
  long failed_early;            /* --fail-early: the URL that failed first; 0: none */
  progress meter;               /* the status line, on a terminal */
  long count;                   /* URLs known before the start; -1: a pipe's */
  long succeeded, failed;       /* for the summary */
  long long bytes;
} batch;

/* Exit statuses from best to worst: the batch exits with the worst of its
 * calls.  An interruption beats everything, then a policy error, a bad URL
 * met late (a usage error), a refusal (budget, circuit), the deadline,
 * exhausted attempts, a final response, success (luaretry(1)'s order). */
static int severity(int status) {
  switch (status) {
  case EXIT_OK: return 0;
  case EXIT_FINAL: return 1;
  case EXIT_EXHAUSTED: return 2;
  case EXIT_DEADLINE: return 3;
  case EXIT_REFUSED: return 4;
  case EXIT_USAGE: return 5;
  case EXIT_POLICY: return 6;
  case EXIT_INTERRUPTED: return 7;
  }
  return 6;
}

static void fold_status(batch *b, int status, luaretry_reason reason) {
  if (severity(status) > severity(b->worst)) b->worst = status, b->worst_reason = reason;
}

/* ---- the list of URLs */

/* The next line of the list that holds a URL (blank lines and # comments
 * are skipped), trimmed, in *url; 1, 0 at the end, -1 when reading failed,
 * -2 for a line longer than any URL, -3 for one with a NUL byte, which no
 * URL holds (it was cut there in silence) (*line_no: its number);
 * RUN_LIST_LATER when no whole line can be read now. */
static int next_line(run_list *l, long *line_no, char **url) {
  int r;
  char *line;
  size_t len;
  while ((r = run_list_line(l, &line, &len)) == 1 || r == -2) {
    (*line_no)++;
    if (r == -2) return -2;
    char *s = line, *e = line + len;
    /* a Windows editor's UTF-8 byte order mark (its CRLF is taken below) */
    if (*line_no == 1 && len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) s += 3;
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    while (e > s && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) e--;
    if (*s != '#' && memchr(s, '\0', (size_t)(e - s))) return -3;
    *e = '\0';
    if (*s && *s != '#') {
      *url = s;
      return 1;
    }
  }
  return r;
}

/* A bad URL: a usage error before the batch; met in it (from a pipe), the
 * line of a URL that failed, shown as those are (-s: none), and exit 2. */
static int bad_url(const batch *b, const char *url, const char *where, const char *why, int late) {
  char *safe = url_shown(url), what[640];
  snprintf(what, sizeof what, "run: bad URL %s%s: %s", safe ? safe : "(URL)", where, why);
  free(safe);
  if (!late) return cli_usage("%s", what);
  if (b->a->verbosity > 0 || b->a->show_error) fprintf(stderr, "luaretry: %s\n", what);
  return EXIT_USAGE;
}

/* A line next_line() refused: -2 too long, -3 with a NUL byte. */
static int odd_line(const char *name, long line_no, int r) {
  char what[4400];
  if (r == -3)
    snprintf(what, sizeof what,
             "run: --urls %s, line %ld: holds a NUL byte, which no URL does: refused", name,
             line_no);
  else
    snprintf(what, sizeof what,
             "run: --urls %s, line %ld: longer than %d bytes, more than "
             "any URL libcurl accepts: refused",
             name, line_no, RUN_LINE_MAX);
  return cli_usage("%s", what);
}

/* A regular --urls FILE, checked whole before any request: every URL valid,
 * at least one in all.  Then read again from its start. */
static int check_list(batch *b, int *count) {
  const char *name = b->a->urls_file;
  char *url, why[256], where[320];
  long line_no = 0;
  int r;
  while ((r = next_line(&b->list, &line_no, &url)) == 1) {
    (*count)++;
    char *fixed = NULL;
    int valid = url_check(url, &fixed, why, sizeof why);
    free(fixed);
    if (!valid) {
      snprintf(where, sizeof where, " (--urls %s, line %ld)", name, line_no);
      return bad_url(b, url, where, why, 0);
    }
  }
  if (r <= -2) return odd_line(name, line_no, r);
  if (r < 0 || run_list_rewind(&b->list) != 0) {
    fprintf(stderr, "luaretry: --urls %s: %s\n", name, strerror(errno));
    return EXIT_USAGE;
  }
  return EXIT_OK;
}

/* --remote-name-all -o FILE: FILE is the first URL's, so a later URL of
 * its name in its folder gets NAME.1 as any name given twice (it wrote
 * over FILE).  -1 when out of memory. */
static int reserve_output(const batch *b, out_names *names) {
  char dir[CLI_PATH_MAX];
  path_folder(b->a->output, dir, sizeof dir);
  struct stat sd, so;
  if (stat(dir, &sd) != 0 || stat(b->a->output_dir, &so) != 0 || sd.st_dev != so.st_dev ||
      sd.st_ino != so.st_ino)
    return 0; /* another folder (or none yet): no name of the batch's */
  const char *slash = strrchr(b->a->output, '/');
  char *base = strdup(slash ? slash + 1 : b->a->output);
  if (out_names_unique(names, base)) return 0;
  fprintf(stderr, "luaretry: out of memory\n");
  return -1;
}

static char *join_path(const char *dir, const char *name);

/* The option that named the batch's folder, as typed: -O's "." or
 * --output-dir DIR. */
static const char *dir_opt(const run_args *a) {
  return a->output_dir_implied && a->remote_opt[0] ? a->remote_opt : "--output-dir";
}

/* URL number `number`'s file would be another option's (-c, --log-json,
 * --urls ...): one would write over the other.  Before the batch a usage
 * error; met in it (a list from a pipe), the URL fails alone, said as a
 * bad URL is.  Exit 2. */
static int name_clash(const batch *b, const char *path, long number, int k, int late) {
  char what[3 * CLI_PATH_MAX];
  snprintf(what, sizeof what,
           "run: %s %s (URL [%ld]) and %s %s name the same file: one would write over the "
           "other",
           dir_opt(b->a), path, number, b->others.opt[k], b->others.path[k]);
  if (!late) return cli_usage("%s", what);
  if (b->a->verbosity > 0 || b->a->show_error) {
    fputs("luaretry: ", stderr);
    cli_text(stderr, what);
    fputc('\n', stderr);
  }
  return EXIT_USAGE;
}

/* URL number `number`'s file in --output-dir (url as it is fetched): its
 * unique name in `names`, DIR/NAME into *path (malloc'ed).  0; -1 when out
 * of memory; 1 when it is another option's file (name_clash: said). */
static int url_path(const batch *b, out_names *names, const char *url, long number, int late,
                    char **path) {
  *path = NULL;
  char *name = out_names_unique(names, url_file_name(url));
  if (!name || !(*path = join_path(b->a->output_dir, name))) return -1;
  int k = out_others_clash(&b->others, name);
  if (k < 0) return 0;
  name_clash(b, *path, number, k, late);
  free(*path);
  *path = NULL;
  return 1;
}

/* One URL as given, named as next_job() will name it (its scheme added,
 * -T's file name after a folder URL): 0, or the exit status after a
 * message. */
static int check_name(const batch *b, out_names *names, const char *url, long number) {
  char *fixed = NULL, why[256];
  url_check(url, &fixed, why, sizeof why); /* valid: checked before */
  const char *u = fixed ? fixed : url;
  char *full = b->a->upload_file ? url_for_call(b->a, u) : NULL;
  char *path = NULL;
  int named =
    b->a->upload_file && !full ? -1 : url_path(b, names, full ? full : u, number, 0, &path);
  free(fixed);
  free(full);
  free(path);
  if (named < 0) fprintf(stderr, "luaretry: out of memory\n");
  return named < 0 ? EXIT_POLICY : named > 0 ? EXIT_USAGE : EXIT_OK;
}

/* The names of the URLs known before the start (the command line's, a
 * regular --urls FILE's, read again from its start), against the other
 * files the options write in that folder: a clash is a usage error
 * before any request.  A list from a pipe is checked as it comes
 * (next_job).  Only when some such file is there: naming costs a parse. */
static int check_names(batch *b) {
  const run_args *a = b->a;
  out_names names = { 0 };
  int status = a->output && reserve_output(b, &names) != 0 ? EXIT_POLICY : EXIT_OK;
  long number = 0;
  /* --remote-name-all -o FILE: the first URL's file is FILE */
  for (int i = 0; status == EXIT_OK && i < a->nwords; i++)
    if (++number > 1 || !a->output) status = check_name(b, &names, a->words[i], number);
  if (b->list_fd >= 0 && b->count >= 0) {
    char *url;
    long line_no = 0;
    while (status == EXIT_OK && next_line(&b->list, &line_no, &url) == 1)
      if (++number > 1 || !a->output) status = check_name(b, &names, url, number);
    if (run_list_rewind(&b->list) != 0 && status == EXIT_OK) {
      fprintf(stderr, "luaretry: --urls %s: %s\n", a->urls_file, strerror(errno));
      status = EXIT_USAGE;
    }
  }
  out_names_free(&names);
  return status;
}

/* What must hold before any call starts: the command line's URLs valid, a
 * list that opens (and, when it is a regular file, is valid), a place for
 * the files, none of them another option's. */
static int open_urls(batch *b) {
  const run_args *a = b->a;
  char why[256];
  int count = a->nwords;
  for (int i = 0; i < a->nwords; i++) {
    char *fixed = NULL;
    int valid = url_check(a->words[i], &fixed, why, sizeof why);
    free(fixed);
    if (!valid) return bad_url(b, a->words[i], "", why, 0);
  }
  if (a->urls_file) {
    /* a stop signal that came before the open: the open would not see it */
    errno = EINTR;
    b->list_fd = cli_interrupted()                ? -1
                 : strcmp(a->urls_file, "-") == 0 ? STDIN_FILENO
                                                  : open(a->urls_file, O_RDONLY | O_CLOEXEC);
    if (b->list_fd < 0 && errno == EINTR && cli_interrupted()) { /* a FIFO without a writer */
      if (a->verbosity > 0 || a->show_error) fprintf(stderr, "luaretry: interrupted\n");
      return EXIT_INTERRUPTED;
    }
    if (b->list_fd < 0) {
      fprintf(stderr, "luaretry: --urls %s: %s\n", a->urls_file, strerror(errno));
      return EXIT_USAGE;
    }
    run_list_init(&b->list, b->list_fd);
    struct stat st;
    int known = fstat(b->list_fd, &st) == 0;
    if (known && S_ISDIR(st.st_mode)) {
      /* a folder opens; its read fails */
      fprintf(stderr, "luaretry: --urls %s: %s\n", a->urls_file, strerror(EISDIR));
      return EXIT_USAGE;
    }
    if (known && S_ISREG(st.st_mode)) {
      int status = check_list(b, &count);
      if (status != EXIT_OK) return status;
      if (count == 0) return cli_usage("run: --urls %s holds no URL", a->urls_file);
    } else {
      b->count = -1; /* as many as come */
    }
  }
  if (b->count == 0) b->count = count;
  if (a->output && a->remote_name != 2) /* --remote-name-all -o FILE: the first URL's */
    return cli_usage("run: -o takes one URL; with several use --output-dir DIR%s", "");
  if (a->output_dir && a->create_dirs && create_dirs(a->output_dir, 1, "--output-dir") != 0)
    return EXIT_USAGE;
  if (a->output && a->output_dir && reserve_output(b, &b->names) != 0) return EXIT_POLICY;
  if (a->output_dir) {
    /* no such folder, or one no body can be kept in: said before any
     * request (each was fetched, then lost), naming the option given */
    char why[256], what[CLI_PATH_MAX + 320];
    if (folder_refusal(a->output_dir, why, sizeof why) != 0) {
      snprintf(what, sizeof what, "run: %s %s: %s", dir_opt(a), a->output_dir, why);
      return cli_usage("%s", what);
    }
    if (out_others_find(&b->others, a, a->output_dir) != 0) {
      fprintf(stderr, "luaretry: out of memory\n");
      return EXIT_POLICY;
    }
    int named = b->others.n ? check_names(b) : EXIT_OK;
    b->clash = named != EXIT_OK;
    return named;
  }
  return EXIT_OK;
}

/* The next URL, a copy; NULL at the end of the list (or when reading it
 * failed, which is remembered), or when none can be read now (list_later:
 * a pipe's writer pauses). */
static char *next_url(batch *b) {
  b->list_later = 0;
  if (b->next_word < b->a->nwords) return strdup(b->a->words[b->next_word++]);
  if (b->list_fd < 0 || b->list_failed) return NULL;
  char *url;
  int r = next_line(&b->list, &b->line_no, &url);
  if (r == RUN_LIST_LATER) {
    b->list_later = 1;
  } else if (r == 0) {
    b->list_done = 1;
  } else if (r <= -2) { /* the list is read no further */
    odd_line(b->a->urls_file, b->line_no, r);
    b->list_failed = 1;
  } else if (r < 0) {
    fprintf(stderr, "luaretry: --urls %s: %s\n", b->a->urls_file, strerror(errno));
    b->list_failed = 1;
  }
  return r == 1 ? strdup(url) : NULL;
}

/* Whether a URL is left unbegun, as the list can be read now: the batch is
 * ending (a stop signal, --fail-early), and a pipe's writer may still be
 * there with nothing to say; the list's reads never wait.  Says nothing of
 * a bad line. */
static int url_left(batch *b) {
  if (b->next_word < b->a->nwords) return 1;
  if (b->list_fd < 0 || b->list_failed) return 0;
  char *url;
  long line_no = b->line_no;
  return next_line(&b->list, &line_no, &url) == 1;
}

/* ---- --output-dir: a file name for each URL */

static char *join_path(const char *dir, const char *name) {
  size_t len = strlen(dir) + strlen(name) + 2;
  char *s = malloc(len);
  if (s) snprintf(s, len, "%s/%s", dir, name);
  return s;
}

/* ---- one URL's call */

static void url_free(batch_url *u) {
  if (!u) return;
  outfile_finish(&u->file, 0); /* a temporary is never left behind */
  free((char *)u->log.target);
  free(u->url);
  free(u->path);
  free(u->body_line);
  free(u->disposition);
  free(u);
}

/* An observer: the attempt's log line; and a URL that waits for its retry
 * gives back its file (what the failed attempt wrote is dropped anyway), so
 * thousands of waiting URLs hold no descriptor. */
static void url_set_state(batch_url *u, int state) {
  progress *m = &u->b->meter;
  long *from = u->state == URL_IN_FLIGHT ? &m->in_flight
               : u->state == URL_WAITING ? &m->waiting
                                         : &m->throttled;
  long *to = state == URL_IN_FLIGHT ? &m->in_flight
             : state == URL_WAITING ? &m->waiting
                                    : &m->throttled;
  (*from)--, (*to)++;
  u->state = state;
  progress_update(m, 0);
}

static void url_observe(void *ud, const luaretry_outcome *o, const luaretry_decision *d) {
  batch_url *u = ud;
  log_attempt(&u->log, o, d);
  if (o) {
    /* never a hedge's: its bytes reach the file only when it wins, whole */
    if (!d || !d->hedge) resumable_validator(o, u->validator, sizeof u->validator);
    u->suspect = o->error && (strstr(o->error, "_mismatch") || strcmp(o->error, "too_large") == 0);
  }
  /* stopped, unless an attempt failed beside a hedge still running */
  if (d && !d->retry && !(d->reason == LUARETRY_REASON_NONE && d->in_flight)) {
    if (!u->stopped) u->hedge_won = d->hedge;
    u->stopped = 1;
    for (size_t i = 0; o && u->b->a->remote_header_name && i < o->header_count; i++)
      if (!u->disposition && strcmp(o->headers[i].name, "content-disposition") == 0)
        u->disposition = strdup(o->headers[i].value); /* NULL: the URL's name stays */
  }
  if (d && d->retry)
    url_set_state(u, d->throttled || d->wait_source == LUARETRY_WAIT_THROTTLE ||
                         d->wait_source == LUARETRY_WAIT_RATE
                       ? URL_THROTTLED
                       : URL_WAITING);
  /* ... unless what it holds is resumed by the next attempt: a break
   * the next attempt resumes, or bytes this attempt never started over
   * (an error answer to its Range request leaves them for the next) */
  if (d && d->retry && u->file.restarted && !luaretry_curl_resumable(o)) outfile_release(&u->file);
  if (d) u->file.restarted = 0;
  if (d) u->got = 0; /* the helper counts each attempt's (job->max_body) */
  /* the attempt on the host's handle ended: its bytes came, and stay counted */
  if (d && !d->hedge) u->streamed = 0;
  if (o && d && !d->retry && d->reason != LUARETRY_REASON_SUCCESS && !u->body_line) {
    /* its summary line quotes the answer too: with -q it is the only one */
    size_t len;
    FILE *f = open_memstream(&u->body_line, &len);
    if (f) log_body_line(f, o), fclose(f);
  }
}

/* The body's bytes, counted for the status line.  An attempt's body past
 * --max-filesize fails in the helper (job->max_body: reported as
 * too_large, judged by the policy); the error answer that ends a resumed
 * call, given here after the stop, is refused here when larger. */
static size_t url_sink(void *ud, const char *data, size_t len) {
  batch_url *u = ud;
  long long most = u->b->a->max_filesize;
  if (most && (long long)len > most - u->got) {
    u->too_large = 1;
    return 0;
  }
  u->got += (long long)len;
  u->streamed += (long long)len;
  u->b->bytes += (long long)len;
  u->b->meter.bytes += (long long)len;
  progress_update(&u->b->meter, 0);
  return outfile_write(&u->file, data, len);
}

/* A new attempt: the URL is in flight again. */
static int url_restart(void *ud) {
  batch_url *u = ud;
  if (u->state != URL_IN_FLIGHT) url_set_state(u, URL_IN_FLIGHT);
  u->got = 0;
  /* a winning hedge's body, given whole: it replaces the stream of the
   * attempt it beat (cancelled), which the total counted once already */
  if (u->stopped && u->hedge_won) u->b->bytes -= u->streamed;
  u->streamed = 0;
  u->validator[0] = '\0'; /* the file starts over: no bytes of any answer */
  if (!u->stopped) u->started_over = 1;
  /* after the stop: the error answer to a Range request that ended the
   * call; an earlier run's partial still matches (resume.c) */
  return outfile_start_over(&u->file, !u->stopped);
}

/* The bytes an earlier run left, for the digests (the sink's ud). */
static size_t url_held(void *ud, uint64_t offset, char *buf, size_t len) {
  const batch_url *u = ud;
  ssize_t n = pread(u->file.fd, buf, len, (off_t)offset);
  return n > 0 ? (size_t)n : 0;
}

/* An earlier run's partial of the URL's file, continued from its end with
 * its validator, as one URL's is (run.c); a file that cannot be written
 * (said) takes no body, as one whose write failed. */
static void url_partial_open(batch *b, batch_url *u) {
  u->across_runs = b->keeps_partials && u->path;
  if (!u->across_runs) return;
  progress_clear(&b->meter); /* its message goes above the status line */
  int held = outfile_partial_open(&u->file, u->log.target);
  progress_update(&b->meter, 1);
  if (held < 0) u->file.failed = 1;
  if (held <= 0) return;
  u->resume.offset = (uint64_t)u->file.held_from;
  u->resume.validator = u->file.validator;
  u->resume.held = url_held;
}

/* A URL's state and job, its file at path (both taken; NULL: standard
 * output); NULL when out of memory. */
static batch_url *url_new(batch *b, char *url, char *path, luaretry_curl_job *job) {
  batch_url *u = calloc(1, sizeof *u);
  if (!u) {
    free(url);
    free(path);
    return NULL;
  }
  u->url = url;
  u->path = path;
  u->b = b;
  u->state = URL_IN_FLIGHT;
  b->meter.in_flight++;
  /* a batch's attempts are -v's; its URLs' lines say how each ended */
  u->log.verbosity = b->a->verbosity == 2 ? 2 : 0;
  u->log.json = b->json;
  u->log.max_attempts = b->max_attempts;
  u->log.quota_max_wait = b->quota_max_wait;
  u->log.index = (int)b->urls;
  u->log.target = url_redacted(url);
  int named = u->log.target != NULL; /* a partial's .url file names it */
  if (!u->log.target) u->log.target = strdup("(URL)");
  u->req = run_request(b->a, url, b->headers, &b->body);
  snprintf(u->number, sizeof u->number, "[%ld]", b->urls);
  outfile_init(&u->file, u->path, u->number);
  if (named) url_partial_open(b, u);
  job->request = &u->req;
  job->sink = url_sink;
  job->sink_ud = u;
  job->restart = url_restart;
  job->max_body = b->a->max_filesize > 0 ? (uint64_t)b->a->max_filesize : 0;
  if (b->body.fd >= 0) {
    job->upload = upload_read;
    job->upload_ud = &b->body;
  }
  job->observer = url_observe;
  job->observer_ud = u;
  u->resume.note = run_resume_note;
  u->resume.note_ud = &u->log;
  job->resume = &u->resume;
  return u;
}

/* The file of URL number b->urls: -o's for --remote-name-all's first,
 * DIR/NAME in --output-dir, or none (standard output) into *path.  0; -1
 * when out of memory; 1 when it is another option's file (said). */
static int next_path(batch *b, const char *url, char **path) {
  *path = NULL;
  if (b->a->output && b->urls == 1) return (*path = strdup(b->a->output)) ? 0 : -1;
  if (!b->a->output_dir) return 0;
  if (b->others.n) progress_clear(&b->meter); /* a clash's line goes above the status line */
  int named = url_path(b, &b->names, url, b->urls, 1, path);
  if (b->others.n) progress_update(&b->meter, 1);
  return named;
}

/* A luaretry_curl_next_fn: the next URL's job; -1 while a pipe's writer
 * pauses. */
static int next_job(void *ud, size_t index, luaretry_curl_job *job) {
  (void)index; /* URLs are numbered here, bad ones included */
  batch *b = ud;
  char why[256];
  if (b->failed_early) return 0; /* --fail-early: no URL begins after a failure */
  for (char *url; (url = next_url(b));) {
    b->urls++;
    char *fixed = NULL;
    if (!url_check(url, &fixed, why, sizeof why)) { /* from a pipe: not checked before */
      char where[64];
      snprintf(where, sizeof where, " ([%ld])", b->urls);
      progress_clear(&b->meter); /* the line goes above the status line */
      fold_status(b, bad_url(b, url, where, why, 1), LUARETRY_REASON_FINAL);
      progress_update(&b->meter, 1);
      free(url);
      order_skip(&b->order, b->urls);
      if (b->a->fail_early) { /* a failure too: nothing begins after it */
        b->failed_early = b->urls;
        return 0;
      }
      continue;
    }
    if (fixed) free(url), url = fixed;    /* no scheme: http://, as curl guesses */
    if (b->a->get || b->a->upload_file) { /* -G's query, -T's file name */
      char *full = url_for_call(b->a, url);
      free(url);
      if (!(url = full)) {
        fold_status(b, EXIT_POLICY, LUARETRY_REASON_POLICY_ERROR);
        order_skip(&b->order, b->urls);
        continue;
      }
    }
    if (curlopts_cookies_for(b->a, url) != 0) fprintf(stderr, "luaretry: -b: out of memory\n");
    char *path;
    int named = next_path(b, url, &path);
    if (named > 0) { /* another option's file (from a pipe: not checked before) */
      fold_status(b, EXIT_USAGE, LUARETRY_REASON_FINAL);
      free(url);
      order_skip(&b->order, b->urls);
      if (b->a->fail_early) {
        b->failed_early = b->urls;
        return 0;
      }
      continue;
    }
    if (named == 0 && url_new(b, url, path, job)) return 1;
    if (named < 0) free(url);
    fprintf(stderr, "luaretry: [%ld] out of memory\n", b->urls);
    fold_status(b, EXIT_POLICY, LUARETRY_REASON_POLICY_ERROR);
    order_skip(&b->order, b->urls);
  }
  return b->list_later ? -1 : 0; /* -1: none yet, the transfers go on */
}

/* A URL's summary line: how its call ended. */
static void url_line(batch *b, const batch_url *u, const luaretry_curl_result *r, int status) {
  char last[64] = "none";
  int attempts = r->final.attempt;
  if (r->final.attempt > 0 && r->error)
    snprintf(last, sizeof last, "%s error", r->error);
  else if (r->final.attempt > 0)
    snprintf(last, sizeof last, "%d", r->status);
  const char *verdict = r->code == LUARETRY_OK ? luaretry_reason_name(r->final.reason) : "error";
  const char *detail = r->code != LUARETRY_OK ? r->errmsg : NULL;
  if (r->code == LUARETRY_E_OPERATION && b->body.why[0]) detail = b->body.why;
  if (r->error && strcmp(r->error, "too_large") == 0)
    detail = "Maximum file size exceeded (--max-filesize)";
  if (u->unwritten) detail = "its body was not written"; /* said above, with why */
  /* made whole, then written at once: standard error is unbuffered, and a
   * million lines written in pieces cost more than their transfers */
  char *line = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&line, &len);
  FILE *out = m ? m : stderr;
  fprintf(out, "luaretry: [%d] ", u->log.index);
  cli_text(out, u->log.target);
  fprintf(out, ": %s, %d attempt%s, status %s, %.3f s, exit %d%s", verdict, attempts,
          attempts == 1 ? "" : "s", last, r->elapsed, status, detail ? ": " : "");
  cli_text(out, detail);
  if (u->body_line) fputs(u->body_line, out); /* escaped already */
  fputc('\n', out);
  progress_clear(&b->meter); /* the line goes above the status line */
  if (m && fclose(m) == 0) fwrite(line, 1, len, stderr);
  progress_update(&b->meter, 1);
  free(line);
}

/* A call cut by a stop signal or its deadline keeps its file's bytes for
 * the next run (outfile.h), as one URL's (run.c's keep_partial), when they
 * are the resource's from byte 0 and a validator names them: the cut
 * answer's, when it can be resumed; else (cut before an answer, or after
 * an error answer the file never got) an earlier run's partial, unless the
 * file started over since, or the last broken answer's that it holds.
 * (The cut answer's status is not known here: an error answer that named
 * ranges and a validator names the bytes held; If-Range checks it.) */
static void keep_partial(batch *b, batch_url *u, const luaretry_decision *final) {
  outfile *f = &u->file;
  if (!u->across_runs || u->suspect || f->fd < 0 ||
      (final->reason != LUARETRY_REASON_CANCELLED && final->reason != LUARETRY_REASON_DEADLINE))
    return;
  const char *validator = u->validator[0]                  ? u->validator
                          : f->partial && !u->started_over ? f->validator
                                                           : NULL;
  if (!validator || lseek(f->fd, 0, SEEK_END) <= 0) return;
  if (outfile_partial_keep(f, u->log.target, validator) != 0 || b->a->verbosity == 0) return;
  progress_clear(&b->meter);
  fprintf(stderr, "luaretry: [%d] ", u->log.index);
  cli_text(stderr, u->log.target);
  fputs(": the partial download is kept for the next run\n", stderr);
  progress_update(&b->meter, 1);
}

/* Whether a call that did not succeed leaves an earlier run's partial as
 * it is, for the next run (outfile_partial_hold): not on a final answer,
 * which says what the resource is (a 404), nor after bytes known bad. */
static int holds_partial(const batch_url *u, const luaretry_curl_result *r) {
  if (r->code != LUARETRY_OK || r->final.reason == LUARETRY_REASON_SUCCESS || u->suspect) return 0;
  int redirect = r->error && (strcmp(r->error, "redirect_refused") == 0 ||
                              strcmp(r->error, "too_many_redirects") == 0);
  int answered = r->final.reason == LUARETRY_REASON_FINAL && (r->status > 0 || redirect) &&
                 !u->too_large; /* an error page above --max-filesize: no word */
  return !answered;
}

/* A call ended: keep or drop its file, print its summary line, fold its
 * exit status into the batch's. */
/* A job's exit status: a request the helper refused (a -H or -X that
 * would split it) is a usage error, as one URL's is; a body it could not
 * write is 1, said. */
static int job_status(const luaretry_curl_result *r) {
  if (r->code == LUARETRY_E_ARG) return EXIT_USAGE;
  if (r->code == LUARETRY_E_OPERATION) return EXIT_FINAL;
  if (r->code != LUARETRY_OK) return cli_error_status(r->code);
  return cli_exit_status(r->final.reason);
}

static void url_done(void *ud, size_t i, const luaretry_curl_job *job) {
  (void)i;
  batch *b = ud;
  batch_url *u = job->observer_ud;
  const luaretry_curl_result *r = &job->result;
  int status = job_status(r);
  if (status == EXIT_INTERRUPTED) b->interrupted = 1;
  /* a file only on success; standard output shows the final attempt's */
  int decided =
    r->code == LUARETRY_OK && r->final.reason != LUARETRY_REASON_CANCELLED && r->final.attempt > 0;
  /* -f: a failed URL's answer is not shown, as curl's --fail, URL by URL */
  int keep = status == EXIT_OK || (!u->file.path && decided && !b->a->fail) ||
             (b->a->fail_with_body && decided && !r->error && r->status > 0);
  /* a body above --max-filesize, the final answer's or an attempt's the
   * helper refused: nowhere, standard output included */
  if (u->too_large || (r->error && strcmp(r->error, "too_large") == 0)) keep = 0;
  if (r->code == LUARETRY_OK) keep_partial(b, u, &r->final);
  if (holds_partial(u, r)) outfile_partial_hold(&u->file);
  /* standard output's body in list order (order.c), a file's now */
  int lost = u->file.path ? outfile_finish(&u->file, keep)
                          : order_done(&b->order, u->log.index, &u->file, keep);
  if (lost != 0 && status == EXIT_OK) status = EXIT_FINAL, u->unwritten = 1;
  /* -J: the kept file renamed as the answer names it; refused: exit 1 */
  char who[24];
  snprintf(who, sizeof who, "%s ", u->number);
  if (status == EXIT_OK && u->disposition && u->file.path &&
      disposition_rename(u->file.path, u->disposition, who) != 0)
    status = EXIT_FINAL;
  fold_status(b, status, r->final.reason);
  url_set_state(u, URL_IN_FLIGHT);
  b->meter.in_flight--;
  if (status == EXIT_OK)
    b->succeeded++, b->meter.done++;
  else
    b->failed++, b->meter.failed++;
  progress_update(&b->meter, 0);
  if (b->a->fail_early && status != EXIT_OK && status != EXIT_INTERRUPTED && !b->failed_early)
    b->failed_early = u->log.index;
  /* -v: every URL's line; none and -q: a failed URL's only; -s: none */
  if (b->a->verbosity == 2 || (status != EXIT_OK && (b->a->verbosity == 1 || b->a->show_error)))
    url_line(b, u, r, status);
  url_free(u);
}

/* ---- the batch */

static int prepare(batch *b, luaretry_policy *p) {
  const run_args *a = b->a;
  int opened = log_json_open(a->log_json, &b->json, a->verbosity > 0 || a->show_error);
  if (opened != 0) return opened;
  b->keeps_partials = run_keeps_partials(a);
  split_headers(a, b->headers);
  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  b->max_attempts = t.max_attempts;
  b->quota_max_wait = log_quota_max_wait(p);
  int status = a->data ? data_open(a, &b->body) : 0;
  if (status != 0) return status;
  /* -d @- or a FIFO: spooled once for every call, within the deadline */
  spool_status st = upload_ready(&b->body, t.deadline, t.body_limit);
  if (st != SPOOL_OK) {
    char name[320];
    if (st == SPOOL_DEADLINE)
      fprintf(stderr, "luaretry: %s did not end before the deadline (%g s)\n",
              upload_name(&b->body, name, sizeof name), t.deadline);
    return st == SPOOL_DEADLINE      ? EXIT_DEADLINE
           : st == SPOOL_INTERRUPTED ? EXIT_INTERRUPTED
                                     : EXIT_USAGE;
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
  /* --max-filesize is counted on the transfer the sink gets as it comes */
  if (b->a->max_filesize) copt.flags |= LUARETRY_CALL_NO_HEDGE;
  luaretry_curl_many_options mo;
  luaretry_curl_many_options_init(&mo);
  mo.max_transfers = b->a->parallel ? (size_t)b->a->parallel : 1;
  mo.call = &copt;
  mo.done = url_done;
  mo.done_ud = b;
  mo.next = next_job;
  mo.next_ud = b;
  mo.easy = easy;
  mo.share = curlopts_share(); /* -b, -c: one cookie store for every URL */
  if (rc == LUARETRY_OK) {
    progress_init(&b->meter, b->a, 1);
    b->meter.total_urls = b->count > 0 ? b->count : 0;
    progress_update(&b->meter, 1);
    cli_cancel_on_signal(NULL, b->many);
    if (b->count < 0) luaretry_curl_many_next_fd(b->many, b->list_fd); /* a pipe's */
    rc = luaretry_curl_perform_many(b->many, p, NULL, 0, &mo);
    cli_cancel_on_signal(NULL, NULL);
    progress_end(&b->meter);
  }
  curl_easy_cleanup(easy);
  if (rc != LUARETRY_OK) {
    fprintf(stderr, "luaretry: %s\n", luaretry_strerror(rc));
    return EXIT_POLICY;
  }
  /* bodies still waiting for a turn that never came (a number lost to
   * memory): in order all the same; one whose write failed was said */
  if (order_end(&b->order) > 0) fold_status(b, EXIT_FINAL, LUARETRY_REASON_FINAL);
  if (cli_interrupted() && !b->interrupted && b->list_fd >= 0 && !b->list_done && !b->list_failed) {
    /* a stop while the list's writer paused, with no call in progress */
    b->interrupted = 1;
    fold_status(b, EXIT_INTERRUPTED, LUARETRY_REASON_CANCELLED);
  } else if (b->list_failed)
    fold_status(b, EXIT_USAGE, LUARETRY_REASON_FINAL);
  if (b->a->verbosity > 0 && b->urls > 0) /* after the lines of the URLs that failed */
    fprintf(stderr, "luaretry: %ld URL%s: %ld succeeded, %ld failed, %lld bytes, %.3f s, exit %d\n",
            b->urls, b->urls == 1 ? "" : "s", b->succeeded, b->urls - b->succeeded, b->bytes,
            progress_elapsed(&b->meter), b->worst);
  if (b->interrupted && (b->a->verbosity > 0 || b->a->show_error)) {
    if (url_left(b))
      fprintf(stderr, "luaretry: interrupted: the URLs from [%ld] on were not begun\n",
              b->urls + 1);
    else
      fprintf(stderr, "luaretry: interrupted\n");
  }
  if (b->failed_early && (b->a->verbosity > 0 || b->a->show_error)) {
    if (url_left(b))
      fprintf(stderr,
              "luaretry: --fail-early: [%ld] failed; the URLs from [%ld] on were not begun\n",
              b->failed_early, b->urls + 1);
  }
  if (b->urls == 0 && !b->interrupted)
    return cli_usage("run: --urls %s holds no URL", b->a->urls_file);
  return b->worst;
}

int batch_run(const run_args *a, luaretry_policy *p) {
  batch b;
  memset(&b, 0, sizeof b);
  b.a = a;
  b.worst = EXIT_OK;
  b.worst_reason = LUARETRY_REASON_SUCCESS;
  b.list_fd = -1;
  order_init(&b.order);
  int status = open_urls(&b);
  if (status == EXIT_OK)
    status = prepare(&b, p);
  else if (!b.clash) /* refused (a bad URL, a list that does not open): its summary */
    log_json_open(a->log_json, &b.json, 0);
  if (status == EXIT_OK) status = perform(&b, p);
  report_end(a, p, b.json, b.worst_reason, -1, status);
  luaretry_curl_many_free(b.many);
  upload_close(&b.body);
  log_json_close(b.json, a->log_json);
  out_names_free(&b.names);
  out_others_free(&b.others);
  order_free(&b.order);
  if (b.list_fd > STDIN_FILENO) close(b.list_fd);
  run_list_free(&b.list);
  return status;
}
