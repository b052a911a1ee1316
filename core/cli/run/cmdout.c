/* cmdout.c: a command's output passed on without waiting for its reader
 * (cmdout.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmdout.h"

enum {
  WRITE_PLAIN,  /* a regular file (it never fills), or a descriptor not open
                   for writing: a plain write, whose error is the answer */
  WRITE_OWN,    /* our own non-blocking description of a pipe or terminal */
  WRITE_SEND,   /* a socket: send(MSG_DONTWAIT) */
  WRITE_POLLED, /* another device, or one we could not reopen: at most
                   PIPE_BUF once poll says it takes more */
};

void cmdout_open(cmdout *o, int fd, int lines) {
  o->fd = o->wfd = fd;
  o->own = 0;
  o->how = WRITE_PLAIN;
  o->lines = lines;
  o->off = o->len = o->ready = 0;
  o->put_mid = o->wrote_mid = 0;
  o->err = 0;
  struct stat st;
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY || fstat(fd, &st) != 0 || S_ISREG(st.st_mode))
    return;
  if (S_ISSOCK(st.st_mode)) {
    o->how = WRITE_SEND;
    return;
  }
  /* only pipes, FIFOs and terminals are opened again: opening some
   * devices has effects of its own (a tape rewinds when closed) */
  o->how = WRITE_POLLED;
  if (!S_ISFIFO(st.st_mode) && !isatty(fd)) return;
  if (flags & O_NONBLOCK) { /* so it was given to us */
    o->how = WRITE_OWN;
    return;
  }
  char path[32];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int own = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (own >= 0) o->wfd = own, o->own = 1, o->how = WRITE_OWN;
}

void cmdout_close(cmdout *o) {
  if (o->own) close(o->wfd);
  o->own = 0;
  o->wfd = o->fd;
}

size_t cmdout_room(const cmdout *o) {
  if (o->err) return CMDOUT_SIZE;
  return o->len < CMDOUT_SIZE ? CMDOUT_SIZE - o->len : 0; /* a line end may pass it by one */
}

static int line_end(char c) { return c == '\n' || c == '\r'; }

void cmdout_flush(cmdout *o) {
  while (o->ready > 0 && !o->err) {
    const char *p = o->buf + o->off;
    size_t n = o->ready;
    if (o->how == WRITE_POLLED) {
      struct pollfd q = { o->wfd, POLLOUT, 0 };
      if (poll(&q, 1, 0) <= 0) return;
      if (n > PIPE_BUF) n = PIPE_BUF; /* what a pipe that polls writable takes at once */
    }
    ssize_t w =
      o->how == WRITE_SEND ? send(o->wfd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL) : write(o->wfd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (w <= 0) {
      o->err = w < 0 ? errno : EIO;
      o->off = o->len = o->ready = 0;
      return;
    }
    o->wrote_mid = !line_end(p[w - 1]);
    o->off += (size_t)w, o->len -= (size_t)w, o->ready -= (size_t)w;
    if (!o->len) o->off = 0;
  }
}

void cmdout_put(cmdout *o, const char *s, size_t n) {
  if (o->err || n == 0) return;
  if (o->off + o->len + n > CMDOUT_SIZE) {
    memmove(o->buf, o->buf + o->off, o->len);
    o->off = 0;
  }
  memcpy(o->buf + o->off + o->len, s, n);
  o->len += n;
  o->put_mid = !line_end(s[n - 1]);
  if (!o->lines) {
    o->ready = o->len;
  } else {
    size_t end = o->len;
    while (end > o->ready && !line_end(o->buf[o->off + end - 1])) end--;
    o->ready = end;
    if (o->len - o->ready >= CMDOUT_LINE) o->ready = o->len; /* a very long line */
  }
  cmdout_flush(o);
}

void cmdout_end_line(cmdout *o) {
  if (o->err || !o->put_mid) return;
  /* off + len <= CMDOUT_SIZE: the byte after them is there */
  o->buf[o->off + o->len++] = '\n';
  o->ready = o->len;
  o->put_mid = 0;
  cmdout_flush(o);
}

int cmdout_poll(const cmdout *o, struct pollfd *p) {
  if (o->err || !o->ready || o->how == WRITE_PLAIN) return 0;
  *p = (struct pollfd){ o->wfd, POLLOUT, 0 };
  return 1;
}

size_t cmdout_drop(cmdout *o) {
  size_t n = o->len;
  o->off = o->len = o->ready = 0;
  o->put_mid = 0;
  if (o->lines && o->wrote_mid && !o->err) {
    o->buf[0] = '\n';
    o->len = o->ready = 1;
    cmdout_flush(o);
    o->off = o->len = o->ready = 0;
  }
  return n;
}
