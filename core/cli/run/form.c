/* form.c: -F/--form, the multipart/form-data body curl builds (RFC 7578).
 * Each part is NAME=VALUE (text), NAME=@FILE (the file, with its name and
 * ;type=), or NAME=<FILE (the file's content as a text value).  The body is
 * built once, before the first attempt, into an unlinked temporary file and
 * sent whole on every attempt: a file that changes during the call never
 * mixes two versions in one request (curl reads the files as it sends, once
 * per transfer). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "run.h"

static int put(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0) return -1;
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

static int puts_fd(int fd, const char *s) { return put(fd, s, strlen(s)); }

/* n bytes of a part's name or file name inside its quotes, escaped as curl
 * escapes them (RFC 7578 4.2, HTML's form encoding): '"' as %22, CR as %0D,
 * LF as %0A.  Written byte for byte, a name could close its quotes or add a
 * header line to its part. */
static int put_quoted(int fd, const char *s, size_t n) {
  size_t from = 0;
  for (size_t i = 0; i < n; i++) {
    const char *esc = s[i] == '"' ? "%22" : s[i] == '\r' ? "%0D" : s[i] == '\n' ? "%0A" : NULL;
    if (!esc) continue;
    if (put(fd, s + from, i - from) != 0 || puts_fd(fd, esc) != 0) return -1;
    from = i + 1;
  }
  return put(fd, s + from, n - from);
}

/* The file's bytes appended to fd; -1 after a message. */
static int copy_file(int fd, const char *path) {
  int in = strcmp(path, "-") == 0 ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    perror(path);
    return -1;
  }
  char buf[65536];
  ssize_t n;
  int rc = 0;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (put(fd, buf, (size_t)n) != 0) {
      rc = -1;
      break;
    }
  if (n < 0) rc = -1;
  if (rc) perror(path);
  close(in);
  return rc;
}

/* "FILE;type=T" into the file's name (written into `file`) and T. */
static const char *split_type(const char *v, char *file, size_t size) {
  const char *semi = strstr(v, ";type=");
  size_t n = semi ? (size_t)(semi - v) : strlen(v);
  if (n >= size) n = size - 1;
  memcpy(file, v, n);
  file[n] = '\0';
  return semi ? semi + 6 : NULL;
}

/* One part, after its boundary line. */
static int put_part(int fd, const char *arg, int as_string) {
  const char *eq = strchr(arg, '=');
  const char *value = eq + 1;
  char file[4096];
  if (puts_fd(fd, "Content-Disposition: form-data; name=\"") != 0 ||
      put_quoted(fd, arg, (size_t)(eq - arg)) != 0 || puts_fd(fd, "\"") != 0)
    return -1;
  if (!as_string && value[0] == '@') {
    const char *type = split_type(value + 1, file, sizeof file);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (puts_fd(fd, "; filename=\"") ||
        put_quoted(fd, base, strcmp(file, "-") ? strlen(base) : 0) ||
        puts_fd(fd, "\"\r\nContent-Type: ") ||
        puts_fd(fd, type ? type : "application/octet-stream") || puts_fd(fd, "\r\n\r\n"))
      return -1;
    return copy_file(fd, file);
  }
  if (puts_fd(fd, "\r\n\r\n") != 0) return -1;
  if (!as_string && value[0] == '<') {
    split_type(value + 1, file, sizeof file);
    return copy_file(fd, file);
  }
  return puts_fd(fd, value);
}

int form_open(const run_args *a, upload *u) {
  memset(u, 0, sizeof *u);
  u->fd = u->src = -1;
  u->arg = a->forms[0];
  int fd = outfile_spool_fd();
  if (fd < 0) {
    int err = errno;
    fprintf(stderr, "luaretry: -F: cannot create a temporary file in %s: %s\n",
            outfile_spool_named(), strerror(err));
    return EXIT_USAGE;
  }
  const char *boundary = a->form_boundary;
  int rc = 0;
  for (int i = 0; i < a->nforms && rc == 0; i++) {
    rc = puts_fd(fd, "--") || puts_fd(fd, boundary) || puts_fd(fd, "\r\n");
    if (rc == 0) rc = put_part(fd, a->forms[i], a->form_string[i]);
    if (rc == 0) rc = puts_fd(fd, "\r\n");
  }
  if (rc == 0) rc = puts_fd(fd, "--") || puts_fd(fd, boundary) || puts_fd(fd, "--\r\n");
  struct stat st;
  if (rc != 0 || fstat(fd, &st) != 0) {
    fprintf(stderr, "luaretry: -F: the form could not be built\n");
    close(fd);
    return EXIT_USAGE;
  }
  u->fd = fd;
  u->len = (size_t)st.st_size;
  u->spooled = 1;
  return 0;
}
