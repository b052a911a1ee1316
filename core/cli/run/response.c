/* response.c: what `run URL` writes besides the body, as curl does: -i
 * the final response's headers before its body (into -o FILE too), -D FILE
 * those headers alone (-D -: standard output), -w after everything, and
 * with -f no body for a call that failed.
 *
 * The headers are the bytes libcurl received (status lines and all, every
 * response of a redirect chain), taken from its debug callback: the curl
 * helper owns the header callback, and keeps options the host set.  The
 * body streams into `out` as it arrives, so an attempt's headers go in
 * first, at its first body bytes; a new attempt (response_restart) empties
 * both, so only the final attempt's remain. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "run.h"

static int on_debug(CURL *h, curl_infotype type, char *data, size_t size, void *ud) {
  (void)h;
  response *r = ud;
  trace_feed(type, data, size); /* this callback replaced trace.c's */
  if (type != CURLINFO_HEADER_IN || r->failed) return 0;
  if (r->len + size > r->cap) {
    size_t cap = r->cap ? r->cap : 4096;
    while (cap < r->len + size) cap *= 2;
    char *d = realloc(r->headers, cap);
    if (!d) {
      r->failed = 1;
      return 0;
    }
    r->headers = d;
    r->cap = cap;
  }
  memcpy(r->headers + r->len, data, size);
  r->len += size;
  return 0;
}

void response_init(response *r, const run_args *a, attempt_log *log, outfile *out, CURL *h) {
  memset(r, 0, sizeof *r);
  r->a = a;
  r->log = log;
  r->out = out;
  r->h = h;
  progress_init(&r->meter, a, 0);
  if (!a->include && !a->dump_header && !trace_active()) return;
  curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, on_debug);
  curl_easy_setopt(h, CURLOPT_DEBUGDATA, r);
  curl_easy_setopt(h, CURLOPT_VERBOSE, 1L); /* the debug callback's switch */
}

/* The headers go before the body: -i's into the output at the body's
 * first bytes (a retried attempt's go with its body), -D -'s to standard
 * output at the final decision only, once (what is written there stays:
 * a retried attempt's headers would; the body comes once the call is
 * over, after them), as -D FILE's are, whatever -f drops. */
static void write_headers(response *r) {
  if (!r->headers_done && !r->drop) {
    r->headers_done = 1;
    if (r->a->include) outfile_write(r->out, r->headers, r->len);
  }
  if (r->stopped && !r->dumped && r->a->dump_header && strcmp(r->a->dump_header, "-") == 0) {
    r->dumped = 1;
    fwrite(r->headers, 1, r->len, stdout);
    fflush(stdout);
  }
}

/* A broken answer that can be resumed (a transport failure after ranges
 * and a strong ETag or a Last-Modified; its status is 0): its bytes are
 * the sink's, and this is their validator, which keep_partial names when
 * error answers (a 503) come after it. */
int resumable_validator(const luaretry_outcome *o, char *out, size_t cap) {
  if (!luaretry_curl_resumable(o)) return 0;
  const char *etag = NULL, *modified = NULL;
  for (size_t i = 0; i < o->header_count; i++) {
    if (!etag && strcmp(o->headers[i].name, "etag") == 0) etag = o->headers[i].value;
    if (!modified && strcmp(o->headers[i].name, "last-modified") == 0)
      modified = o->headers[i].value;
  }
  const char *v = etag && etag[0] == '"' ? etag : modified;
  if (!v || strlen(v) >= cap) return 0;
  strcpy(out, v);
  return 1;
}

/* Not with -i: the file holds the headers before the body, and a later
 * run would take their bytes for the body's (its Range off by them, the
 * answer's headers spliced into the middle). */
int run_keeps_partials(const run_args *a) {
  return !a->continue_at && !a->include && !a->data && !a->upload_file &&
         (!a->method || strcmp(a->method, "GET") == 0);
}

static void note_resumable(response *r, const luaretry_outcome *o) {
  resumable_validator(o, r->validator, sizeof r->validator);
}

void response_observe(void *ud, const luaretry_outcome *o, const luaretry_decision *d) {
  response *r = ud;
  progress_clear(&r->meter); /* the log line has the line to itself */
  log_attempt(r->log, o, d);
  if (d->retry) progress_wait(&r->meter, d->wait);
  /* an attempt that failed beside a hedge still running: nothing decided */
  if (!d->retry && d->reason == LUARETRY_REASON_NONE && d->in_flight) return;
  if (o && d->retry) r->len = 0; /* a retried attempt's headers are no one's */
  /* a hedge's bytes reach the sink only when it wins (given whole, no
   * break to resume): a broken hedge's validator names nothing it holds */
  if (o && !d->hedge) note_resumable(r, o);
  if (o) r->suspect = o->error && strstr(o->error, "_mismatch");
  if (d->retry) return;
  if (!r->stopped) {
    /* the answer that ended the call, a winning hedge's too: what the
     * sink is given from now on, and -J's name (the host's handle holds
     * the attempt on it, cancelled when a hedge won) */
    r->final_status = o ? o->status : 0;
    for (size_t i = 0; o && r->a->remote_header_name && i < o->header_count; i++)
      if (!r->disposition && strcmp(o->headers[i].name, "content-disposition") == 0)
        r->disposition = strdup(o->headers[i].value); /* NULL: the URL's name stays */
  }
  r->stopped = 1;
  r->final_broken = o && o->error;
  r->final_large = o && o->error && strcmp(o->error, "too_large") == 0;
  if (r->a->fail && d->reason != LUARETRY_REASON_SUCCESS) r->drop = 1;
  /* bytes known to be other than their server or the user said */
  if (o && o->error && strstr(o->error, "_mismatch")) r->drop = r->damaged = 1;
  write_headers(r);
}

int response_restart(void *ud) {
  response *r = ud;
  r->headers_done = 0;
  if (!r->stopped) {
    /* a new attempt: its headers and body replace the last one's */
    r->len = 0;
    r->drop = 0;
  } /* else the body of the answer that ended the call (resume.c): its
     * headers and -f's verdict are those observed; -i writes them again */
  r->counted = 0;
  r->got = 0;
  r->too_large = 0;
  r->validator[0] = '\0'; /* the sink starts over: no bytes of any answer */
  progress_attempt(&r->meter, 0);
  /* after the stop: the error answer to a Range request that ended the
   * call; an earlier run's partial still matches (resume.c) */
  return outfile_start_over(r->out, !r->stopped);
}

size_t response_sink(void *ud, const char *data, size_t len) {
  response *r = ud;
  if (r->out->append) {
    /* -C - writes in place: an error page (a 503 to a request from zero)
     * is not the file's, and the next -C - would go on after it */
    long code = r->final_status; /* once stopped: maybe a hedge's, given whole */
    if (!r->stopped) curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &code);
    if (code < 200 || code > 299) return len;
  }
  if (r->a->max_filesize && (long long)len > r->a->max_filesize - r->got) {
    r->too_large = 1; /* none of it written: the attempt's bytes are dropped */
    return 0;
  }
  r->got += (long long)len;
  if (r->meter.on && !r->counted) { /* the length, once an answer came */
    curl_off_t cl = -1;
    curl_easy_getinfo(r->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    r->meter.total = cl > 0 ? (long long)cl : 0;
    r->counted = 1;
  }
  progress_bytes(&r->meter, len);
  if (r->drop) return len;
  write_headers(r);
  return outfile_write(r->out, data, len);
}

/* The attempt the sink refused: its outcome as libcurl tells a stated
 * length over CURLOPT_MAXFILESIZE. */
static luaretry_code report_too_large(response *r, luaretry_call *c, const luaretry_request *req,
                                      luaretry_decision *final) {
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.error = "too_large";
  o.error_detail = "Maximum file size exceeded";
  o.method = req->method ? req->method : req->body ? "POST" : "GET";
  o.url = req->url;
  int idempotent = 1;
  luaretry_call_is_idempotent(c, req, &idempotent);
  o.not_repeatable = !idempotent; /* its request was sent */
  luaretry_code rc = luaretry_call_report(c, &o, final);
  r->suspect = 1; /* after the observer's say: no partial of it is kept for the next run */
  if (rc == LUARETRY_OK && !final->retry) {
    r->damaged = 1; /* written nowhere: -C -'s file as it was, too */
    outfile_append_undo(r->out);
  }
  return rc;
}

luaretry_code response_perform(response *r, luaretry_policy *p, luaretry_call *c,
                               const luaretry_request *req, const luaretry_curl_options *co,
                               luaretry_decision *final) {
  luaretry_curl_options round = *co;
  luaretry_curl_resume resume;
  for (;;) { /* as many rounds as the policy allows attempts */
    r->too_large = 0;
    luaretry_code rc = luaretry_curl_perform(p, c, r->h, req, &round, final);
    if (rc != LUARETRY_E_OPERATION || !r->too_large) return rc;
    if (r->stopped) {
      /* the error answer to a Range request that ended the call, given
       * to the sink after the stop (resume.c), is above the limit: shown
       * nowhere, and the call's own end stands */
      r->page_refused = 1;
      if (r->log->verbosity > 0)
        fprintf(stderr, "luaretry: the final answer's body is above --max-filesize: not kept\n");
      return LUARETRY_OK;
    }
    rc = report_too_large(r, c, req, final);
    if (rc != LUARETRY_OK || !final->retry) return rc;
    /* the next round resumes from what the run started with (its
     * resume options say so), the refused attempt's bytes and this
     * run's taken back; or from zero when the sink no longer holds them:
     * never from an offset the file has passed */
    r->got = 0;
    if (co->resume) {
      resume = *co->resume;
      if (!outfile_take_back(r->out)) resume.offset = 0, resume.validator = NULL;
      round.resume = &resume;
    }
    if (luaretry_call_wait(c, final->wait) == LUARETRY_E_CANCELLED) {
      luaretry_call_stop_cancelled(c, final);
      return LUARETRY_OK;
    }
  }
}

int output_check(const char *opt, const char *path, int replaced) {
  if (!path || strcmp(path, "-") == 0) return 0;
  struct stat st;
  char why[256] = "", dir[PATH_MAX], real[PATH_MAX];
  int exists = stat(path, &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    snprintf(why, sizeof why, "%s", strerror(EISDIR));
  else if (exists && access(path, W_OK) != 0)
    snprintf(why, sizeof why, "%s", strerror(errno));
  else if (!exists && errno != ENOENT)
    snprintf(why, sizeof why, "%s", strerror(errno));
  char what[2 * PATH_MAX + 320];
  if (why[0]) {
    snprintf(what, sizeof what, "run: %s %s: %s", opt, path, why);
    return cli_usage("%s", what);
  }
  /* made at the end in its folder, or a regular file replaced from a
   * temporary beside it (beside a link's target): that folder takes files */
  if (exists && (!replaced || !S_ISREG(st.st_mode))) return 0;
  path_folder(exists && realpath(path, real) ? real : path, dir, sizeof dir);
  if (folder_refusal(dir, why, sizeof why) == 0) return 0;
  snprintf(what, sizeof what, "run: %s %s: its folder %s: %s", opt, path, dir, why);
  return cli_usage("%s", what);
}

int disposition_rename(const char *path, const char *value, const char *who) {
  const char *f = strcasestr(value, "filename=");
  if (!f) return 0;
  f += 9;
  int quoted = *f == '"';
  f += quoted;
  size_t n = strcspn(f, quoted ? "\"" : "; \t");
  const char *slash = NULL;
  for (size_t i = 0; i < n; i++)
    if (f[i] == '/' || f[i] == '\\') slash = f + i;
  if (slash) n -= (size_t)(slash + 1 - f), f = slash + 1;
  if (n == 0 || f[0] == '.') return 0; /* no name, or a hidden one: the URL's stays */
  const char *end = strrchr(path, '/');
  size_t dir = end ? (size_t)(end - path) + 1 : 0;
  char *to = malloc(dir + n + 1);
  if (!to) return -1;
  snprintf(to, dir + n + 1, "%.*s%.*s", (int)dir, path, (int)n, f);
  int rc = 0;
  if (strcmp(to, path) == 0) { /* the URL's name already: the body is where it goes */
  } else if (link(path, to) != 0) {
    fprintf(stderr, "luaretry: %s-J: %s is not written over%s%s; the body is in %s\n", who, to,
            errno == EEXIST ? "" : ": ", errno == EEXIST ? "" : strerror(errno), path);
    rc = -1;
  } else {
    unlink(path);
  }
  free(to);
  return rc;
}

int response_finish(response *r, const luaretry_decision *final, int status) {
  if (r->a->dump_header && strcmp(r->a->dump_header, "-") != 0) {
    FILE *f = fopen(r->a->dump_header, "wb");
    int ok = f && fwrite(r->headers, 1, r->len, f) == r->len;
    if (f && fclose(f) != 0) ok = 0; /* closed whatever fwrite did */
    if (!ok) {
      fprintf(stderr, "luaretry: -D %s: %s\n", r->a->dump_header, strerror(errno));
      if (status == EXIT_OK) status = EXIT_FINAL;
    }
  }
  if (r->format) {
    long code = 0;
    curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &code);
    writeout_info w = { r->h, final, (int)code, status };
    writeout_print(stdout, r->format, &w);
  }
  return status;
}

void response_free(response *r) {
  progress_end(&r->meter);
  free(r->headers);
  free(r->format);
  free(r->disposition);
}
