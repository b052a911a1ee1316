/* dirs.c: --create-dirs, as curl's: the folders -o FILE (or --output-dir
 * DIR) needs are made, each missing one with mode 0750 as curl makes them
 * (less the umask), before the first attempt; and the folder of a path,
 * and whether a folder takes new files, for the checks of the files
 * written at the end. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

void path_folder(const char *path, char *out, size_t size) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(out, size, ".");
  else if (slash == path)
    snprintf(out, size, "/");
  else
    snprintf(out, size, "%.*s", (int)(slash - path), path);
}

int create_dirs(const char *path, int whole, const char *option) {
  char *p = strdup(path);
  if (!p) {
    fprintf(stderr, "luaretry: %s %s: out of memory\n", option, path);
    return -1;
  }
  size_t n = strlen(p);
  if (!whole) { /* FILE's folder: up to its last '/' */
    while (n > 0 && p[n - 1] != '/') n--;
    p[n] = '\0';
  }
  int rc = 0;
  /* each prefix ending at a '/' (and the whole), from the top down */
  for (size_t i = 1; i <= n && rc == 0; i++) {
    if (i < n && p[i] != '/') continue;
    char keep = p[i];
    p[i] = '\0';
    if (mkdir(p, 0750) != 0 && errno != EEXIST) {
      fprintf(stderr, "luaretry: --create-dirs: %s: %s\n", p, strerror(errno));
      rc = -1;
    }
    p[i] = keep;
  }
  free(p);
  return rc;
}

int folder_takes_files(const char *dir) {
  /* a file made and removed: access() says yes to root whatever the mode,
   * and to folders whose file system refuses new files (/proc, /sys) */
  size_t size = strlen(dir) + sizeof "/.luaretry-XXXXXX";
  char *probe = malloc(size);
  if (!probe) {
    errno = ENOMEM;
    return 0;
  }
  snprintf(probe, size, "%s/.luaretry-XXXXXX", dir);
  int fd = mkostemp(probe, O_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    unlink(probe);
  }
  int err = errno;
  free(probe);
  errno = err;
  return fd >= 0;
}

int folder_refusal(const char *dir, char *why, size_t cap) {
  if (folder_takes_files(dir)) return 0;
  int err = errno;
  struct stat st;
  if (stat(dir, &st) != 0)
    snprintf(why, cap, "%s", strerror(errno)); /* no such folder (--create-dirs makes it) */
  else if (!S_ISDIR(st.st_mode))
    snprintf(why, cap, "%s", strerror(ENOTDIR));
  else /* the probe's ENOENT of a folder that is there (/proc) names nothing */
    snprintf(why, cap, "cannot create files there%s%s", err != ENOENT ? ": " : "",
             err != ENOENT ? strerror(err) : "");
  return -1;
}
