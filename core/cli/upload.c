/* upload.c: the request body of -d: the argument itself, a file mapped
 * rather than copied (-d @FILE), or standard input read whole (-d @-).  It
 * is read once, before the first attempt, and sent whole on every one. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

static int read_stdin(upload *u) {
  size_t cap = 0;
  for (;;) {
    if (u->len == cap) {
      cap = cap ? cap * 2 : 65536;
      char *d = realloc(u->owned, cap);
      if (!d) { fprintf(stderr, "luaretry: -d @-: out of memory\n"); return -1; }
      u->owned = d;
    }
    ssize_t n = read(STDIN_FILENO, u->owned + u->len, cap - u->len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) { fprintf(stderr, "luaretry: -d @-: %s\n", strerror(errno)); return -1; }
    if (n == 0) break;
    u->len += (size_t)n;
  }
  u->data = u->owned ? u->owned : "";
  return 0;
}

static int map_file(upload *u, const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    fprintf(stderr, "luaretry: -d @%s: %s\n", path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  u->len = (size_t)st.st_size;
  u->data = "";
  if (u->len) {
    u->map = mmap(NULL, u->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (u->map == MAP_FAILED) {
      fprintf(stderr, "luaretry: -d @%s: %s\n", path, strerror(errno));
      u->map = NULL;
      close(fd);
      return -1;
    }
    u->data = u->map;
  }
  close(fd);
  return 0;
}

int upload_open(upload *u, const char *arg) {
  memset(u, 0, sizeof *u);
  if (arg[0] != '@') {
    u->data = arg;
    u->len = strlen(arg);
    return 0;
  }
  return strcmp(arg + 1, "-") == 0 ? read_stdin(u) : map_file(u, arg + 1);
}

void upload_close(upload *u) {
  if (u->map) munmap(u->map, u->len);
  free(u->owned);
}
