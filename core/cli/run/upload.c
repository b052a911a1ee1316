/* upload.c: the request body of -d, and standard input spooled once.
 *
 * -d DATA is the argument itself.  -d @FILE of a regular file is read as
 * it is sent (pread through the curl helper's upload function), so a body
 * of any size costs nothing: only its first body_limit bytes are read
 * into memory, for the script; a file that changes size meanwhile is an
 * error, never a short body nor a signal.  Anything else (-d @-, a FIFO,
 * a process substitution, a /proc file, whose size says nothing) is
 * spooled once to an unlinked temporary file, within the deadline, then
 * read the same way.  Every attempt sends the whole body. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "run.h"

#define PROC_SUPER_MAGIC 0x9fa0
#define SYSFS_MAGIC      0x62656572

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits (bounded by `end`, 0: none, and a stop signal) until src has
 * bytes or its end. */
static spool_status wait_readable(int src, double end) {
  for (;;) {
    if (cli_interrupted()) return SPOOL_INTERRUPTED;
    double left = end > 0 ? end - now_seconds() : 1;
    if (left <= 0) return SPOOL_DEADLINE;
    struct pollfd p = { src, POLLIN, 0 };
    int ms = left < 0.1 ? (int)(left * 1000) + 1 : 100; /* a signal is seen within 100 ms */
    int n = poll(&p, 1, ms);
    if (n > 0) return SPOOL_OK;
    if (n < 0 && errno != EINTR) return SPOOL_OK; /* let read() say what is wrong */
  }
}

spool_status spool_input(int src, const char *what, double seconds, int *out_fd, uint64_t *size) {
  int fd = outfile_spool_fd();
  if (fd < 0) {
    int err = errno;
    fprintf(stderr, "luaretry: %s: cannot create a temporary file in %s: %s\n", what,
            outfile_spool_named(), strerror(err));
    return SPOOL_ERROR;
  }
  double end = seconds > 0 ? now_seconds() + seconds : 0;
  char buf[65536];
  uint64_t total = 0;
  for (;;) {
    spool_status st = wait_readable(src, end);
    if (st != SPOOL_OK) {
      close(fd);
      return st;
    }
    ssize_t n = read(src, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n == 0) break;
    ssize_t w = n > 0 ? write(fd, buf, (size_t)n) : -1;
    if (n < 0 || w != n) {
      fprintf(stderr, "luaretry: %s: %s\n", what,
              n < 0   ? strerror(errno)
              : w < 0 ? strerror(errno)
                      : "short write to the spool");
      close(fd);
      return SPOOL_ERROR;
    }
    total += (uint64_t)n;
  }
  *out_fd = fd;
  *size = total;
  return SPOOL_OK;
}

/* Whether a file's size tells how much it holds: a regular file, not of
 * /proc or /sys (which say 0 or 4096 whatever they hold). */
static int size_is_true(int fd, const struct stat *st) {
  struct statfs fs;
  if (!S_ISREG(st->st_mode) || st->st_size == 0) return 0;
  if (fstatfs(fd, &fs) == 0 && (fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC))
    return 0;
  return 1;
}

const char *upload_name(const upload *u, char *buf, size_t size) {
  snprintf(buf, size, "%s %s", u->opt ? u->opt : "-d", u->typed ? u->typed : u->arg);
  return buf;
}

int upload_open(upload *u, const data_part *part) {
  const char *arg = part->arg;
  char name[320];
  memset(u, 0, sizeof *u);
  u->fd = u->src = -1;
  u->arg = arg;
  u->opt = part->opt;
  u->typed = part->typed;
  if (arg[0] != '@') {
    u->data = arg;
    u->len = strlen(arg);
    return 0;
  }
  if (strcmp(arg + 1, "-") == 0) {
    u->must_spool = 1;
    u->src = STDIN_FILENO;
    return 0;
  }
  struct stat st;
  /* a FIFO's open waits for its writer, as curl's does; a stop signal
   * ends the wait */
  u->src = open(arg + 1, O_RDONLY | O_CLOEXEC);
  if (u->src < 0 || fstat(u->src, &st) != 0) {
    if (errno == EINTR && cli_interrupted()) return EXIT_INTERRUPTED;
    fprintf(stderr, "luaretry: %s: %s\n", upload_name(u, name, sizeof name), strerror(errno));
    return EXIT_USAGE;
  }
  if (S_ISDIR(st.st_mode)) {
    fprintf(stderr, "luaretry: %s: %s\n", upload_name(u, name, sizeof name), strerror(EISDIR));
    return EXIT_USAGE;
  }
  u->must_spool = !size_is_true(u->src, &st);
  if (!u->must_spool) {
    u->fd = u->src;
    u->src = -1;
    u->len = (size_t)st.st_size;
  }
  return 0;
}

/* The first `prefix` bytes of the file, for what the script sees. */
static int read_prefix(upload *u, size_t prefix) {
  size_t want = u->len < prefix ? u->len : prefix;
  char name[320];
  u->owned = malloc(want + 1);
  if (!u->owned) {
    fprintf(stderr, "luaretry: %s: out of memory\n", upload_name(u, name, sizeof name));
    return -1;
  }
  for (size_t got = 0; got < want;) {
    ssize_t n = pread(u->fd, u->owned + got, want - got, (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fprintf(stderr, "luaretry: %s: %s\n", upload_name(u, name, sizeof name),
              n < 0 ? strerror(errno) : "shorter than its size");
      return -1;
    }
    got += (size_t)n;
  }
  u->data = u->owned;
  return 0;
}

spool_status upload_ready(upload *u, double seconds, size_t prefix) {
  if (!u->arg) return SPOOL_OK; /* no body */
  if (u->fd < 0) {
    if (!u->must_spool) return SPOOL_OK; /* -d DATA, or no body */
    char what[64], name[320];
    snprintf(what, sizeof what, "%.60s", upload_name(u, name, sizeof name));
    uint64_t size = 0;
    spool_status st = spool_input(u->src, what, seconds, &u->fd, &size);
    if (st != SPOOL_OK) return st;
    u->len = (size_t)size;
    u->spooled = 1;
  }
  return read_prefix(u, prefix) == 0 ? SPOOL_OK : SPOOL_ERROR;
}

size_t upload_read(void *ud, uint64_t offset, char *buf, size_t len) {
  upload *u = ud;
  struct stat st;
  /* our spool cannot change; the user's file can, and must not */
  if (!u->spooled) {
    if (fstat(u->fd, &st) != 0) {
      snprintf(u->why, sizeof u->why, "%s", strerror(errno));
      return 0;
    }
    if ((uint64_t)st.st_size != (uint64_t)u->len) {
      snprintf(u->why, sizeof u->why,
               "the file changed size during the upload (%zu bytes, "
               "now %jd): no body is sent that is not the file",
               u->len, (intmax_t)st.st_size);
      return 0;
    }
  }
  for (;;) {
    ssize_t n = pread(u->fd, buf, len, (off_t)offset);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) return (size_t)n;
    snprintf(
      u->why, sizeof u->why, "%s",
      n < 0 ? strerror(errno) : "the file ended before its size: it changed during the upload");
    return 0;
  }
}

void upload_close(upload *u) {
  if (!u->arg) return; /* zeroed: nothing was opened */
  if (u->fd >= 0) close(u->fd);
  if (u->src > STDIN_FILENO) close(u->src);
  free(u->owned);
  memset(u, 0, sizeof *u);
}
