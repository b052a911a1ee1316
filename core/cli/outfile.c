/* outfile.c: a file replaced whole or not at all (see outfile.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

#define TMP_SUFFIX ".luaretry-XXXXXX"  /* what the specs look for as leftovers */

void outfile_init(outfile *f, const char *path, const char *option, outfile_mode mode) {
  memset(f, 0, sizeof *f);
  f->path = path;
  f->option = option;
  f->mode = mode;
  f->fd = path ? -1 : STDOUT_FILENO;
}

/* "luaretry: -o out.txt: what: error"; `what` may be NULL. */
static void complain(const outfile *f, const char *what, int err) {
  fprintf(stderr, "luaretry: %s %s: %s%s%s\n", f->option, f->path, what ? what : "",
          what ? ": " : "", strerror(err));
}

/* mkstemp makes 0600; OUTFILE_UMASK gives what open(..., 0666) would. */
static int set_mode(outfile *f) {
  if (f->mode != OUTFILE_UMASK) return 0;
  mode_t mask = umask(0);
  umask(mask);
  return fchmod(f->fd, 0666 & ~mask);
}

int outfile_create(outfile *f) {
  if (!f->path || f->tmp) return 0;
  if (f->failed || f->finished) return -1;
  f->failed = 1;
  size_t size = strlen(f->path) + sizeof TMP_SUFFIX;
  if (!(f->tmp = malloc(size))) {
    complain(f, NULL, ENOMEM);
    return -1;
  }
  snprintf(f->tmp, size, "%s%s", f->path, TMP_SUFFIX);
  f->fd = mkstemp(f->tmp);
  if (f->fd < 0 || set_mode(f) != 0) {
    complain(f, "cannot create a temporary file beside it", errno);
    if (f->fd >= 0) close(f->fd), unlink(f->tmp);
    free(f->tmp);
    f->tmp = NULL;
    f->fd = -1;
    return -1;
  }
  f->failed = 0;
  return 0;
}

size_t outfile_write(void *ud, const char *data, size_t len) {
  outfile *f = ud;
  if (outfile_create(f) != 0) return len;
  for (size_t done = 0; done < len && !f->failed;) {
    ssize_t n = write(f->fd, data + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (f->path) fprintf(stderr, "luaretry: writing %s %s: %s\n", f->option, f->path,
                           strerror(errno));
      else fprintf(stderr, "luaretry: writing standard output: %s\n", strerror(errno));
      f->failed = 1;
    } else {
      done += (size_t)n;
    }
  }
  return len;
}

int outfile_finish(outfile *f, int keep) {
  if (!f->path) return keep && f->failed ? -1 : 0;
  if (f->finished) return 0;
  int ok = keep && !f->failed && outfile_create(f) == 0;
  if (f->tmp) {
    if (ok && fsync(f->fd) != 0) complain(f, NULL, errno), ok = 0;
    if (close(f->fd) != 0 && ok) complain(f, NULL, errno), ok = 0;
    if (ok && rename(f->tmp, f->path) != 0) complain(f, NULL, errno), ok = 0;
    if (!ok) unlink(f->tmp);
    free(f->tmp);
    f->tmp = NULL;
    f->fd = -1;
  }
  f->finished = 1;
  return ok || !keep ? 0 : -1;
}
