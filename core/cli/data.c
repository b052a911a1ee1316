/* data.c: the request body as curl builds it from -d, --data-binary and
 * --data-raw: each part's bytes (the argument, or @FILE's content for the
 * first two; -d drops a file's CR and LF bytes, as curl's --data does),
 * joined with '&'.  upload.c reads each @FILE; a single --data-binary
 * @FILE stays as upload.c gives it (a large file is not copied). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

/* Appends n bytes (CR and LF dropped when `strip`) at out + *len. */
static void append(char *out, size_t *len, const char *s, size_t n, int strip) {
  for (size_t i = 0; i < n; i++)
    if (!strip || (s[i] != '\r' && s[i] != '\n')) out[(*len)++] = s[i];
}

/* Part i's bytes into *u: an @FILE through upload_open, else the text. */
static int part_open(const data_part *part, upload *u) {
  if (part->kind != DATA_RAW && part->arg[0] == '@') return upload_open(u, part->arg);
  memset(u, 0, sizeof *u);
  u->data = part->arg;
  u->len = strlen(part->arg);
  return 0;
}

int data_open(const run_args *a, upload *u) {
  memset(u, 0, sizeof *u);
  if (a->ndata == 1 && (a->data_parts[0].kind != DATA_ASCII || a->data_parts[0].arg[0] != '@'))
    return part_open(&a->data_parts[0], u);
  upload parts[MAX_DATA];
  size_t total = 0;
  int opened = 0, rc = 0;
  for (; opened < a->ndata; opened++) {
    if ((rc = part_open(&a->data_parts[opened], &parts[opened])) != 0) break;
    total += parts[opened].len + 1;
  }
  if (rc != 0) upload_close(&parts[opened]);  /* what a failed open holds */
  char *joined = rc == 0 ? malloc(total + 1) : NULL;
  if (rc == 0 && !joined) {
    fprintf(stderr, "luaretry: -d: out of memory\n");
    rc = -1;
  }
  size_t len = 0;
  for (int i = 0; i < opened; i++) {
    const data_part *part = &a->data_parts[i];
    int strip = part->kind == DATA_ASCII && part->arg[0] == '@';
    if (joined && i > 0) joined[len++] = '&';
    if (joined) append(joined, &len, parts[i].data, parts[i].len, strip);
    upload_close(&parts[i]);
  }
  if (rc != 0) {
    free(joined);
    return -1;
  }
  joined[len] = '\0';
  u->owned = joined;
  u->data = joined;
  u->len = len;
  return 0;
}
