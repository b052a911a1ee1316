/* lines.c: one line of a list the command reads as it goes (-K's
 * options, --urls's URLs), grown as it comes and bounded, so a line of
 * gigabytes is refused as soon as it is too long and never held whole. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "run.h"

long run_read_line(FILE *f, char **line, size_t *size) {
  size_t n = 0;
  for (;;) {
    /* a stop signal that came between reads: the next read would not see it */
    if (cli_interrupted()) {
      errno = EINTR;
      return 0;
    }
    int c = getc(f);
    if (c == EOF) {
      if (ferror(f) && errno == EINTR && !cli_interrupted()) { /* not ours: read on */
        clearerr(f);
        continue;
      }
      break;
    }
    if (n + 2 > *size) { /* room for c and the NUL: at most MAX + 3 */
      size_t cap = *size ? *size * 2 : 256;
      if (cap > RUN_LINE_MAX + 3) cap = RUN_LINE_MAX + 3;
      char *grown = realloc(*line, cap);
      if (!grown) return errno = ENOMEM, -1;
      *line = grown;
      *size = cap;
    }
    (*line)[n++] = (char)c;
    if (c == '\n') break;
    if (n > RUN_LINE_MAX) return -2; /* MAX + 1 bytes and no end yet */
  }
  if (n == 0) return 0;
  (*line)[n] = '\0';
  return (long)n;
}

/* ---- --urls's list */

void run_list_init(run_list *l, int fd) {
  memset(l, 0, sizeof *l);
  l->fd = fd;
}

void run_list_free(run_list *l) {
  free(l->buf);
  l->buf = NULL;
}

int run_list_rewind(run_list *l) {
  if (lseek(l->fd, 0, SEEK_SET) < 0) return -1;
  l->start = l->end = 0;
  l->eof = 0;
  return 0;
}

/* Room to read into, the untaken bytes (a line's start) moved to the front:
 * 0, or -1 (ENOMEM). */
static int list_room(run_list *l) {
  if (l->start > 0) {
    memmove(l->buf, l->buf + l->start, l->end - l->start);
    l->end -= l->start;
    l->start = 0;
  }
  if (l->cap - l->end > 1) return 0; /* a byte, and a last line's NUL */
  size_t cap = l->cap ? l->cap * 2 : 65536;
  if (cap > RUN_LINE_MAX + 2) cap = RUN_LINE_MAX + 2; /* enough to tell a line too long */
  char *grown = realloc(l->buf, cap);
  if (!grown) return errno = ENOMEM, -1;
  l->buf = grown;
  l->cap = cap;
  return 0;
}

int run_list_line(run_list *l, char **line, size_t *len) {
  for (;;) {
    size_t have = l->end - l->start;
    char *s = have ? l->buf + l->start : NULL, *nl = have ? memchr(s, '\n', have) : NULL;
    if (nl || (l->eof && have)) {
      size_t n = nl ? (size_t)(nl - s) : have;
      if (n > RUN_LINE_MAX) return -2;
      s[n] = '\0'; /* the newline's place, or the room list_room kept */
      l->start += nl ? n + 1 : n;
      *line = s;
      *len = n;
      return 1;
    }
    if (l->eof) return 0;
    if (have > RUN_LINE_MAX) return -2;
    if (list_room(l) != 0) return -1;
    /* a read only when it cannot wait: a regular file always can */
    struct pollfd p = { .fd = l->fd, .events = POLLIN };
    int ready = poll(&p, 1, 0);
    if (ready == 0 || (ready < 0 && errno == EINTR)) return RUN_LIST_LATER;
    if (ready < 0) return -1;
    ssize_t got = read(l->fd, l->buf + l->end, l->cap - l->end - 1);
    if (got > 0)
      l->end += (size_t)got;
    else if (got == 0)
      l->eof = 1;
    else if (errno == EINTR || errno == EAGAIN)
      return RUN_LIST_LATER;
    else
      return -1;
  }
}
