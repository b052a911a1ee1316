/* data.c: the request body as curl builds it from -d, --data-binary and
 * --data-raw: each part's bytes (the argument, or @FILE's content for the
 * first two), joined with '&'.  A single part is what upload.c gives: a
 * file is read as it is sent, never copied, whatever its size.
 *
 * One difference from curl, on purpose: curl's -d @FILE drops the file's
 * CR and LF bytes (it was made for form data); luaretry sends every file as
 * it is, as --data-binary does, so an upload is never silently changed and
 * a file of any size streams (README, "curl's options"). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run.h"

/* A part's bytes into *u: an @FILE through upload_open (read whole when
 * `whole`, else left to be read as sent), else the text itself.  0, or the
 * exit status after a message. */
static int part_open(const data_part *part, upload *u, int whole) {
  if (part->kind == DATA_RAW || part->arg[0] != '@') {
    memset(u, 0, sizeof *u);
    u->fd = u->src = -1;
    u->arg = part->arg;
    u->opt = part->opt;
    u->typed = part->typed;
    u->data = part->arg;
    u->len = strlen(part->arg);
    return 0;
  }
  int status = upload_open(u, part);
  if (status != 0 || !whole) return status;
  spool_status st = upload_ready(u, 0, SIZE_MAX);
  return st == SPOOL_OK ? 0 : st == SPOOL_INTERRUPTED ? EXIT_INTERRUPTED : EXIT_USAGE;
}

/* Every part read whole and joined with '&' into *u. */
static int join_parts(const run_args *a, upload *u) {
  memset(u, 0, sizeof *u);
  u->fd = u->src = -1;
  upload parts[MAX_DATA];
  size_t total = 0;
  int opened = 0, status = 0;
  for (; opened < a->ndata; opened++) {
    if ((status = part_open(&a->data_parts[opened], &parts[opened], 1)) != 0) break;
    total += parts[opened].len + 1;
  }
  if (status != 0) upload_close(&parts[opened]); /* what a failed open holds */
  char *joined = status == 0 ? malloc(total + 1) : NULL;
  if (status == 0 && !joined) {
    fprintf(stderr, "luaretry: -d: out of memory\n");
    status = EXIT_POLICY;
  }
  size_t len = 0;
  for (int i = 0; i < opened; i++) {
    if (joined && i > 0) joined[len++] = '&';
    if (joined) memcpy(joined + len, parts[i].data, parts[i].len), len += parts[i].len;
    upload_close(&parts[i]);
  }
  if (status != 0) {
    free(joined);
    return status;
  }
  joined[len] = '\0';
  u->arg = a->data_parts[0].arg;
  u->owned = joined;
  u->data = joined;
  u->len = len;
  return 0;
}

int data_open(const run_args *a, upload *u) {
  if (a->nforms) return form_open(a, u);
  if (a->ndata == 1) return part_open(&a->data_parts[0], u, 0); /* a large file is not copied */
  return join_parts(a, u);
}

/* The URL's path ends with '/' (before any query or fragment). */
static int ends_with_slash(const char *url) {
  size_t n = strlen(url);
  return n > 0 && url[n - 1] == '/' && !strpbrk(url, "?#");
}

char *url_for_call(const run_args *a, const char *url) {
  upload q = { .fd = -1, .src = -1 };
  const char *base = NULL;
  if (a->get && a->ndata && join_parts(a, &q) != 0) return NULL;
  if (a->upload_file && strcmp(a->upload_file, "-") != 0 && ends_with_slash(url)) {
    base = strrchr(a->upload_file, '/'); /* curl's -T to a folder URL: the file's name */
    base = base ? base + 1 : a->upload_file;
  }
  size_t n = strlen(url) + q.len + (base ? strlen(base) : 0) + 2;
  char *out = malloc(n);
  if (out) {
    size_t at = strcspn(url, "#"); /* the query goes before a fragment */
    snprintf(out, n, "%.*s%s%s%.*s", (int)at, url, base ? base : "",
             !q.arg                 ? ""
             : memchr(url, '?', at) ? "&"
                                    : "?",
             (int)q.len, q.data ? q.data : "");
  } else {
    fprintf(stderr, "luaretry: out of memory\n");
  }
  upload_close(&q);
  return out;
}
