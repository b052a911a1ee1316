/* outfile.c: where a body goes, written as curl writes it (see outfile.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cli/cli.h"
#include "outfile.h"

#define TMP_SUFFIX ".luaretry-XXXXXX"    /* what the specs look for as leftovers */
#define MAX_LINKS  40                    /* as the kernel's ELOOP */
#define SPOOL_LOOK (16ULL * 1024 * 1024) /* spool bytes between looks at its room */

void outfile_init(outfile *f, const char *path, const char *option) {
  memset(f, 0, sizeof *f);
  f->path = path && strcmp(path, "-") != 0 ? path : NULL;
  f->option = option;
  f->fd = -1;
  f->in_place = f->path == NULL;
  f->out_fd = STDOUT_FILENO;
}

/* "luaretry: -o out.txt: what: error"; `what` may be NULL.  Nothing for
 * a write a stop signal cut: the run says "interrupted" (exit 130). */
static void complain(const outfile *f, const char *what, int err) {
  if (err == EINTR && cli_interrupted()) return;
  if (f->path)
    fprintf(stderr, "luaretry: %s %s: %s%s%s\n", f->option, f->path, what ? what : "",
            what ? ": " : "", strerror(err));
  else
    fprintf(stderr, "luaretry: standard output: %s%s%s\n", what ? what : "", what ? ": " : "",
            strerror(err));
}

const char *outfile_spool_dir(void) {
  const char *dir = getenv("TMPDIR");
  return dir && *dir ? dir : "/tmp";
}

const char *outfile_spool_named(void) {
  static char named[PATH_MAX + 96];
  const char *dir = getenv("TMPDIR");
  char raw[sizeof named], cwd[PATH_MAX];
  if (!dir || !*dir) return "/tmp";
  if (dir[0] != '/' && getcwd(cwd, sizeof cwd))
    snprintf(raw, sizeof raw, "%s (TMPDIR, relative to %s)", dir, cwd);
  else
    snprintf(raw, sizeof raw, "%s (TMPDIR)", dir);
  cli_text_copy(named, sizeof named, raw); /* the environment's bytes, escaped */
  return named;
}

int outfile_spool_fd(void) {
  const char *dir = outfile_spool_dir();
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
  /* a file system without O_TMPFILE: a name, unlinked at once */
  char name[PATH_MAX];
  if (snprintf(name, sizeof name, "%s/luaretry-spool-XXXXXX", dir) >= (int)sizeof name) {
    errno = ENAMETOOLONG;
    return -1;
  }
  fd = mkostemp(name, O_CLOEXEC);
  if (fd >= 0) unlink(name);
  return fd;
}

/* path with its symlinks followed (a dangling one names the file to make);
 * malloc'ed, NULL when out of memory. */
static char *follow_links(const char *path) {
  char *cur = strdup(path);
  for (int hops = 0; cur && hops < MAX_LINKS; hops++) {
    struct stat st;
    char link[PATH_MAX];
    if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) return cur;
    ssize_t n = readlink(cur, link, sizeof link - 1);
    if (n < 0) return cur;
    link[n] = '\0';
    const char *slash = strrchr(cur, '/');
    int dir_len = link[0] == '/' || !slash ? 0 : (int)(slash - cur + 1);
    size_t size = (size_t)dir_len + (size_t)n + 1;
    char *next = malloc(size);
    if (next) snprintf(next, size, "%.*s%s", dir_len, cur, link);
    free(cur);
    cur = next;
  }
  return cur; /* a loop: stat() fails with ELOOP (inspect_target) */
}

/* A name beside target: its folder, then prefix, target's last name and
 * suffix, with `room` bytes more to come (a sidecar's).  Any name curl can
 * write is one we can write: when the whole would pass NAME_MAX, the last
 * name is cut (never inside a UTF-8 sequence) and a hash of it (FNV-1a 64)
 * keeps names of one beginning apart.  malloc'ed with room bytes to spare,
 * NULL when out of memory. */
static char *name_beside(const char *target, const char *prefix, const char *suffix, size_t room) {
  const char *slash = strrchr(target, '/');
  size_t dir = slash ? (size_t)(slash - target + 1) : 0;
  const char *base = target + dir;
  size_t fixed = strlen(prefix) + strlen(suffix) + room, n = strlen(base);
  char hash[18] = "";
  if (fixed + n > NAME_MAX) {
    unsigned long long h = 0xcbf29ce484222325ULL;
    for (const char *c = base; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
    snprintf(hash, sizeof hash, "-%016llx", h);
    n = NAME_MAX > fixed + 17 ? NAME_MAX - fixed - 17 : 0;
    while (n > 0 && ((unsigned char)base[n] & 0xC0) == 0x80) n--;
  }
  size_t size = dir + fixed + n + sizeof hash + 1;
  char *s = malloc(size);
  if (s) snprintf(s, size, "%.*s%s%.*s%s%s", (int)dir, target, prefix, (int)n, base, hash, suffix);
  return s;
}

/* The temporary beside the target, private until it is kept. */
static int create_temp(outfile *f) {
  if (!(f->tmp = name_beside(f->target, "", TMP_SUFFIX, 0))) {
    complain(f, NULL, ENOMEM);
    return -1;
  }
  f->fd = mkostemp(f->tmp, O_CLOEXEC);
  if (f->fd < 0) {
    complain(f, "cannot create a temporary file beside it", errno);
    free(f->tmp);
    f->tmp = NULL;
    return -1;
  }
  return 0;
}

static int create_spool(outfile *f) {
  f->fd = outfile_spool_fd();
  if (f->fd >= 0) return 0;
  int err = errno;
  char what[PATH_MAX + 160];
  snprintf(what, sizeof what, "cannot create a temporary file in %s", outfile_spool_named());
  complain(f, what, err);
  return -1;
}

/* What the target is: a regular file to replace (or make), or something to
 * write into; -1 after a message. */
static int inspect_target(outfile *f) {
  if (!(f->target = follow_links(f->path))) {
    complain(f, NULL, ENOMEM);
    return -1;
  }
  struct stat st;
  if (stat(f->target, &st) != 0) {
    /* only a name that is not there is a new file: a link loop (ELOOP)
     * or a folder that is a file is an error, and nothing is replaced */
    if (errno != ENOENT) {
      complain(f, NULL, errno);
      return -1;
    }
    mode_t mask = umask(0);
    umask(mask);
    f->mode = 0666 & ~mask; /* what open(..., 0666) gives, as curl's */
    return 0;
  }
  if (S_ISDIR(st.st_mode)) {
    complain(f, NULL, EISDIR);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    f->in_place = 1; /* a device, a FIFO, a socket: never replaced */
    if (access(f->target, W_OK) != 0) {
      complain(f, NULL, errno);
      return -1;
    }
    return 0;
  }
  f->existed = 1;
  f->mode = st.st_mode & 0777; /* no set-id bit carried onto new bytes */
  f->uid = st.st_uid;
  f->gid = st.st_gid;
  return 0;
}

int outfile_create(outfile *f) {
  if (f->fd >= 0 || (f->in_place && f->target && !f->failed && !f->finished)) return 0;
  if (f->failed || f->finished) return -1;
  f->failed = 1;
  if (f->path && !f->target && inspect_target(f) != 0) return -1;
  /* in place, memory first: a spool file costs an inode, and a batch of
   * small bodies would spend most of its time making them */
  if (!f->in_place && create_temp(f) != 0) return -1;
  f->failed = 0;
  return 0;
}

/* All of len bytes to fd; 0, or -1 with errno.  A stop signal ends it
 * (EINTR): a reader that stalls (a full pipe, a FIFO) never holds the run
 * past the signal.  A write the signal cut after some bytes returns them,
 * not EINTR, so the signal is looked for before each write. */
static int write_all(int fd, const char *data, size_t len) {
  for (size_t done = 0; done < len;) {
    if (cli_interrupted()) {
      errno = EINTR;
      return -1;
    }
    ssize_t n = write(fd, data + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return -1;
    }
    done += (size_t)n;
  }
  return 0;
}

/* In place: keeps len more bytes in memory, or moves to a spool file when
 * they would pass OUTFILE_MEMORY; -1 after a message. */
static int spool(outfile *f, const char *data, size_t len) {
  if (f->mem_len + len <= OUTFILE_MEMORY) {
    char *grown = realloc(f->mem, f->mem_len + len);
    if (!grown) {
      complain(f, NULL, ENOMEM);
      return -1;
    }
    memcpy(grown + f->mem_len, data, len);
    f->mem = grown;
    f->mem_len += len;
    return 1;
  }
  if (create_spool(f) != 0) return -1;
  f->spooled = f->spool_look = 0;
  if (f->mem_len && write_all(f->fd, f->mem, f->mem_len) != 0) {
    complain(f, "writing", errno);
    return -1;
  }
  free(f->mem);
  f->mem = NULL;
  f->mem_len = 0;
  return 0;
}

/* In place: whether the spool file may grow by len bytes.  It never
 * takes the last 1/20 of its file system, looked at every SPOOL_LOOK
 * bytes with the next look's bytes counted: an endless body held until
 * the call ends filled $TMPDIR until the deadline (24 GB at the default
 * 300 s), and every other program's writes there failed meanwhile.  Past
 * it the body is not kept: said, and the spool's space given back now. */
int outfile_spool_room(int fd, unsigned long long more) {
  struct statvfs vs;
  if (fstatvfs(fd, &vs) != 0 || vs.f_blocks == 0) return 1; /* a write tells */
  unsigned long long unit = vs.f_frsize ? vs.f_frsize : vs.f_bsize;
  return (unsigned long long)vs.f_bavail * unit >= vs.f_blocks * unit / 20 + more;
}

static int spool_room(outfile *f, size_t len) {
  f->spooled += len;
  if (f->spooled < f->spool_look) return 1;
  f->spool_look = f->spooled + SPOOL_LOOK;
  if (outfile_spool_room(f->fd, SPOOL_LOOK)) return 1;
  /* the space first, then the word: whoever reads the message finds the
   * space back (said first, a df right after it saw 32 MiB still held) */
  if (ftruncate(f->fd, 0) != 0) { /* closed next: its space goes all the same */
  }
  close(f->fd);
  f->fd = -1;
  char who[PATH_MAX + 32];
  snprintf(who, sizeof who, "%s%s%s", f->path ? f->option : "standard output", f->path ? " " : "",
           f->path ? f->path : "");
  fprintf(stderr,
          "luaretry: %s: the body is not kept: held in %s until the call ends, it passed %llu "
          "MiB, and more would leave that file system less than 5%% free (TMPDIR may name "
          "another folder)\n",
          who, outfile_spool_dir(), f->spooled >> 20);
  return 0;
}

size_t outfile_write(void *ud, const char *data, size_t len) {
  outfile *f = ud;
  /* nothing (no headers yet for -i): realloc(mem, 0) would free it */
  if (len == 0) return 0;
  if (outfile_create(f) != 0 || f->failed) return len;
  if (f->in_place && f->fd < 0) {
    int kept = spool(f, data, len);
    if (kept != 0) {
      if (kept < 0) f->failed = 1;
      return len;
    }
  }
  if (f->in_place && !spool_room(f, len)) {
    f->failed = 1;
    return len;
  }
  if (write_all(f->fd, data, len) != 0) {
    complain(f, "writing", errno);
    f->failed = 1;
  }
  return len;
}

/* The earlier run's partial, the temporary until now, closed and left on
 * disk as it is; the next write makes a temporary of its own. */
static void set_partial_aside(outfile *f) {
  if (fsync(f->fd) != 0 || close(f->fd) != 0) complain(f, "keeping the partial download", errno);
  f->fd = -1;
  free(f->tmp);
  f->tmp = NULL;
  f->partial_aside = 1;
}

/* fd cut back to held_from, the next write there; 0 or -1 (errno). */
static int cut_back(outfile *f) {
  return ftruncate(f->fd, f->held_from) == 0 && lseek(f->fd, f->held_from, SEEK_SET) >= 0 ? 0 : -1;
}

int outfile_restart(void *ud) { return outfile_start_over(ud, 1); }

int outfile_start_over(outfile *f, int stale) {
  f->restarted = 1;
  f->mem_len = 0;
  if (f->partial && stale) f->partial_stale = 1;
  if (f->partial && !f->partial_aside && f->fd >= 0) {
    /* never emptied in place: what follows may not be the resource's */
    set_partial_aside(f);
    f->failed = 0;
    return 0;
  }
  if (f->append && f->held_from == 0) {
    /* -C - on a new or empty file: nothing of its own to protect, so the
     * bytes go in place and a failed run leaves them for the next -C - */
    if (f->fd >= 0 && cut_back(f) != 0) {
      complain(f, "emptying", errno);
      return -1;
    }
    f->failed = 0;
    return 0;
  }
  if (f->append) {
    /* -C - from zero: the new bytes replace the file only when kept (curl
     * stops with error 33 and leaves it); its mode and owner carried */
    struct stat st;
    if (f->fd >= 0 && fstat(f->fd, &st) == 0) {
      f->existed = 1;
      f->mode = st.st_mode & 0777;
      f->uid = st.st_uid;
      f->gid = st.st_gid;
    }
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    f->append = 0;
    f->failed = 0;
    return 0;
  }
  if (f->fd < 0) {
    f->failed = 0;
    return 0;
  }
  if (ftruncate(f->fd, 0) != 0 || lseek(f->fd, 0, SEEK_SET) != 0) {
    complain(f, "emptying", errno);
    return -1;
  }
  f->spooled = f->spool_look = 0;
  f->failed = 0;
  return 0;
}

void outfile_release(outfile *f) {
  free(f->mem);
  f->mem = NULL;
  f->mem_len = 0;
  f->failed = 0;
  if (f->fd < 0) return;
  close(f->fd);
  f->fd = -1;
  if (f->tmp) {
    unlink(f->tmp);
    free(f->tmp);
    f->tmp = NULL;
  }
  f->failed = 0;
}

/* The spool written into the target, from its start; 0 or -1 (with errno). */
static int copy_spool(int from, int to) {
  char buf[65536];
  if (lseek(from, 0, SEEK_SET) != 0) return -1;
  for (;;) {
    ssize_t n = read(from, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return (int)n;
    if (write_all(to, buf, (size_t)n) != 0) return -1;
  }
}

/* Kept: the spool into the device, FIFO or standard output, in place. */
static int finish_in_place(outfile *f, int ok) {
  if (ok && (f->fd >= 0 || f->mem_len)) {
    /* no O_CREAT, no O_TRUNC: the thing is written into, never made;
     * a stop signal interrupts a FIFO's open that waits for a reader, and
     * one that came before it is looked for first (the open would not see
     * it, and wait for a reader that may never come) */
    errno = EINTR;
    int to = !f->path            ? f->out_fd
             : cli_interrupted() ? -1
                                 : open(f->target, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    int failed =
      to < 0 || (f->fd >= 0 ? copy_spool(f->fd, to) : write_all(to, f->mem, f->mem_len)) != 0;
    if (failed) complain(f, "writing", errno), ok = 0;
    if (f->path && to >= 0 && close(to) != 0 && ok) complain(f, "writing", errno), ok = 0;
  }
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
  free(f->mem);
  f->mem = NULL;
  f->mem_len = 0;
  return ok;
}

/* An earlier run's partial, continued, is gone from its name (removed
 * while this run wrote it): its bytes, whole and checked, are still ours
 * through fd, copied into a new temporary put in place instead.  0, or -1
 * after a message that names the partial. */
static int rescue_partial(outfile *f) {
  int from = f->fd, err = 0;
  char *gone = f->tmp;
  f->fd = -1;
  f->tmp = NULL;
  int ok = create_temp(f) == 0; /* said when it fails */
  if (ok && (copy_spool(from, f->fd) != 0 || fchmod(f->fd, f->mode) != 0 || fsync(f->fd) != 0))
    err = errno, ok = 0;
  if (f->fd >= 0 && close(f->fd) != 0 && ok) err = errno, ok = 0;
  f->fd = -1;
  if (ok && rename(f->tmp, f->target) != 0) err = errno, ok = 0;
  if (!ok && f->tmp) unlink(f->tmp);
  if (err) {
    char what[PATH_MAX + 96];
    snprintf(what, sizeof what, "the partial download %s was removed while this run wrote it",
             gone);
    complain(f, what, err);
  }
  free(f->tmp);
  f->tmp = NULL;
  free(gone);
  close(from);
  return ok ? 0 : -1;
}

/* Kept: the temporary renamed into place with the file's mode; else
 * removed.  A partial continued is renamed while still open: its lock
 * (outfile_partial_open) keeps another run from taking it meanwhile. */
static int finish_replace(outfile *f, int ok) {
  if (ok && f->fd < 0 && outfile_create(f) != 0) ok = 0;
  if (f->fd < 0) return ok;
  int locked = f->partial && strcmp(f->tmp, f->partial) == 0;
  if (ok && fchmod(f->fd, f->mode) != 0) complain(f, NULL, errno), ok = 0;
  if (ok && f->existed && (f->uid != geteuid() || f->gid != getegid()) &&
      fchown(f->fd, f->uid, f->gid) != 0) {
    /* only root may give a file away: the bytes still replace it */
  }
  if (ok && fsync(f->fd) != 0) complain(f, NULL, errno), ok = 0;
  if (!locked) {
    if (close(f->fd) != 0 && ok) complain(f, NULL, errno), ok = 0;
    f->fd = -1;
  }
  if (ok && rename(f->tmp, f->target) != 0) {
    if (locked && errno == ENOENT) return rescue_partial(f) == 0; /* removed meanwhile */
    complain(f, NULL, errno), ok = 0;
  }
  if (locked) close(f->fd), f->fd = -1;
  if (!ok) unlink(f->tmp);
  free(f->tmp);
  f->tmp = NULL;
  return ok;
}

/* ---- resume across runs */

#define PARTIAL_SUFFIX ".luaretry-partial"
#define URL_SUFFIX     ".url"
#define PARTIAL_MAGIC  "luaretry-partial 1\n"

/* dir/.base.luaretry-partial for f->target, short enough that its
 * sidecar's temporary (.url.XXXXXX after it) is a legal name too;
 * malloc'ed, NULL when out of memory. */
static char *partial_name(const outfile *f) {
  return name_beside(f->target, ".", PARTIAL_SUFFIX, sizeof URL_SUFFIX + sizeof ".XXXXXX" - 2);
}

/* The sidecar's name: the partial's with ".url" (partial_name left room). */
static void sidecar_name(const char *partial, char *out, size_t cap) {
  snprintf(out, cap, "%s%s", partial, URL_SUFFIX);
}

/* The sidecar's URL and validator lines match url: 1, validator filled.
 * Reads fd (closed here). */
static int sidecar_matches(int fd, const char *url, char *validator, size_t cap) {
  FILE *in = fdopen(fd, "rb");
  if (!in) {
    close(fd);
    return 0;
  }
  char line[8192];
  int ok = fgets(line, sizeof line, in) && strcmp(line, PARTIAL_MAGIC) == 0 &&
           fgets(line, sizeof line, in) && strlen(line) == strlen(url) + 1 &&
           strncmp(line, url, strlen(url)) == 0 && fgets(validator, (int)cap, in) &&
           strlen(validator) > 1 && validator[strlen(validator) - 1] == '\n';
  fclose(in);
  if (ok) validator[strlen(validator) - 1] = '\0';
  return ok;
}

/* Opens path (never through a link) and checks that this user made it,
 * as outfile_partial_keep does: a regular file of ours, 0600 or so, with
 * no other name.  Someone else's file (planted in a folder others may
 * write, such as /tmp) would put their bytes into ours, a file others may
 * write would let them change it while we read, and a hard link to some
 * other file of ours (.bashrc) would be appended to.  The descriptor, or
 * -1: ENOENT when there is none, else why in `why`. */
static int open_own(const char *path, int flags, char *why, size_t cap) {
  why[0] = '\0';
  int fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  struct stat st;
  if (fd < 0 && errno == ENOENT) return -1;
  if (fd < 0 && errno == ELOOP)
    snprintf(why, cap, "it is a symbolic link");
  else if (fd < 0 && lstat(path, &st) == 0 && st.st_uid != geteuid())
    snprintf(why, cap, "it is owned by another user (uid %lu)", (unsigned long)st.st_uid);
  else if (fd < 0)
    snprintf(why, cap, "%s", strerror(errno));
  else if (fstat(fd, &st) != 0)
    snprintf(why, cap, "%s", strerror(errno));
  else if (!S_ISREG(st.st_mode))
    snprintf(why, cap, "it is not a regular file");
  else if (st.st_uid != geteuid())
    snprintf(why, cap, "it is owned by another user (uid %lu)", (unsigned long)st.st_uid);
  else if (st.st_mode & (S_IWGRP | S_IWOTH))
    snprintf(why, cap, "it is writable by group or others (mode %04o)",
             (unsigned)(st.st_mode & 07777));
  else if (st.st_nlink != 1)
    snprintf(why, cap, "it has another name (%lu hard links)", (unsigned long)st.st_nlink);
  if (!why[0]) {
    /* ours: the writes that follow may block as any file's do */
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0) return fd;
    snprintf(why, cap, "%s", strerror(errno));
  }
  if (fd >= 0) close(fd);
  errno = EPERM;
  return -1;
}

/* Takes fd's lock, held while the partial is this run's temporary (one
 * run at a time continues it); 0 when another run holds it, or when the
 * name no longer leads to fd (renamed into place or removed by a run that
 * held the lock first).  Where locks are not kept (ENOLCK), 1: as before. */
static int lock_partial(int fd, const char *path) {
  struct stat held, named;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) return errno != EWOULDBLOCK && errno != EAGAIN;
  return fstat(fd, &held) == 0 && lstat(path, &named) == 0 && held.st_dev == named.st_dev &&
         held.st_ino == named.st_ino;
}

int outfile_partial_open(outfile *f, const char *url) {
  char validator[1024], why[128];
  size_t cap = sizeof validator;
  if (!f->path || (!f->target && inspect_target(f) != 0)) return f->path ? -1 : 0;
  if (f->in_place) return 0;
  char *partial = partial_name(f), side[PATH_MAX + 64];
  if (!partial) return 0;
  sidecar_name(partial, side, sizeof side);
  /* read too: its bytes are hashed for the digests */
  int fd = open_own(partial, O_RDWR, why, sizeof why), side_fd = -1;
  if (fd >= 0 && !lock_partial(fd, partial)) {
    /* another run continues it (two of one command at once): never
     * written by both, nor removed under the other */
    snprintf(why, sizeof why, "another run is continuing it");
    close(fd);
    fd = -1;
  }
  const char *bad = why[0] ? partial : NULL;
  if (fd >= 0 && (side_fd = open_own(side, O_RDONLY, why, sizeof why)) < 0 && why[0]) bad = side;
  if (bad) {
    /* not ours: never appended to, never removed; a partial this run
     * keeps replaces it whole (a rename), where the folder lets us */
    fprintf(stderr,
            "luaretry: %s %s: the partial download %s is not continued: %s; "
            "the download starts from zero\n",
            f->option, f->path, bad, why);
    if (fd >= 0) close(fd);
    free(partial);
    return 0;
  }
  if (fd >= 0 && side_fd >= 0 && sidecar_matches(side_fd, url, validator, cap)) {
    f->fd = fd;
    f->partial = strdup(partial);
    f->validator = strdup(validator);
    if (f->partial && f->validator && (f->held_from = lseek(f->fd, 0, SEEK_END)) >= 0) {
      f->tmp = partial;
      return 1;
    }
    free(f->partial);
    free(f->validator);
    f->partial = f->validator = NULL;
    f->fd = -1;
  }
  /* ours, but another URL's or one that cannot be continued: it starts
   * over (a lone .url file goes too) */
  if (fd >= 0) close(fd), unlink(partial);
  unlink(side);
  free(partial);
  return 0;
}

int outfile_partial_keep(outfile *f, const char *url, const char *validator) {
  if (!f->tmp || f->fd < 0 || f->in_place || f->append) return -1;
  char *partial = f->partial ? f->partial : partial_name(f), side[PATH_MAX + 64],
       tmp[PATH_MAX + 80];
  int ok = partial != NULL && fsync(f->fd) == 0;
  ok = close(f->fd) == 0 && ok;
  f->fd = -1;
  /* a partial another run continues is not replaced under it: that run
   * would put these bytes in place as its own */
  int other = -1, busy = 0;
  if (ok && strcmp(f->tmp, partial) != 0) {
    other = open(partial, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    busy = other >= 0 && !lock_partial(other, partial);
    if (busy) {
      fprintf(stderr,
              "luaretry: %s %s: the partial download is not kept: another run is continuing %s\n",
              f->option, f->path, partial);
      ok = 0;
      errno = 0;
    } else if (rename(f->tmp, partial) != 0) {
      ok = 0;
    }
  }
  if (other >= 0) close(other);
  if (ok) {
    /* the sidecar last, whole or not at all: without it the partial is
     * never continued.  Its temporary is a new file of a name no one can
     * guess (mkostemp: 0600, O_EXCL), so no link planted beside it is
     * followed */
    sidecar_name(partial, side, sizeof side);
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", side);
    int fd = mkostemp(tmp, O_CLOEXEC);
    FILE *out = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !out) close(fd);
    ok = out && fprintf(out, "%s%s\n%s\n", PARTIAL_MAGIC, url, validator) > 0;
    ok = (out && fclose(out) == 0) && ok;
    if (ok && rename(tmp, side) != 0) ok = 0;
    if (!ok) {
      if (fd >= 0) unlink(tmp);
      unlink(partial);
    }
  }
  if (!ok) {
    if (!busy) complain(f, "keeping the partial download", errno);
    unlink(f->tmp);
  }
  if (partial != f->partial) free(partial);
  free(f->partial);
  free(f->validator);
  f->partial = f->validator = NULL;
  free(f->tmp);
  f->tmp = NULL;
  free(f->target);
  f->target = NULL;
  f->finished = 1;
  return ok ? 0 : -1;
}

int outfile_continue(outfile *f, unsigned long long *size) {
  struct stat st;
  if (!f->path || !(f->target = follow_links(f->path))) {
    fprintf(stderr, "luaretry: -C - continues a file: not standard output\n");
    return -1;
  }
  f->fd = open(f->target, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0666);
  if (f->fd < 0 || fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      lseek(f->fd, 0, SEEK_END) < 0) {
    complain(f, "-C -", f->fd < 0 || S_ISREG(st.st_mode) ? errno : EINVAL);
    return -1;
  }
  f->append = 1;
  f->held_from = st.st_size;
  *size = (unsigned long long)st.st_size;
  return 0;
}

void outfile_append_undo(outfile *f) {
  if (f->append && f->fd >= 0 && cut_back(f) != 0)
    complain(f, "taking back the bytes appended", errno);
}

int outfile_take_back(outfile *f) {
  if (f->fd < 0 || (!f->append && (!f->partial || f->partial_aside))) return 0;
  if (cut_back(f) == 0) return 1;
  complain(f, "taking back the bytes appended", errno);
  return 0;
}

/* -C -: the file has its bytes already; they reach the disk. */
static int finish_append(outfile *f, int ok) {
  if (f->fd < 0) return ok;
  if (fsync(f->fd) != 0 && ok) complain(f, NULL, errno), ok = 0;
  if (close(f->fd) != 0 && ok) complain(f, NULL, errno), ok = 0;
  f->fd = -1;
  return ok;
}

int outfile_finish(outfile *f, int keep) {
  if (f->finished) return 0;
  int ok = keep && !f->failed;
  ok = f->append     ? finish_append(f, ok)
       : f->in_place ? finish_in_place(f, ok)
                     : finish_replace(f, ok);
  if (f->partial) {
    /* continued from an earlier run: kept (renamed) or dropped, its
     * sidecar goes with it; set aside, it goes too, unless it is held */
    char side[PATH_MAX + 64];
    sidecar_name(f->partial, side, sizeof side);
    if (!f->partial_hold) unlink(side);
    if (!f->partial_hold && f->partial_aside) unlink(f->partial);
    free(f->partial);
    free(f->validator);
    f->partial = f->validator = NULL;
  }
  f->finished = 1;
  free(f->target);
  f->target = NULL;
  return ok || !keep ? 0 : -1;
}

void outfile_partial_hold(outfile *f) {
  if (!f->partial || f->partial_stale || f->finished) return;
  f->partial_hold = 1;
  if (f->partial_aside) return; /* this run's temporary: finished as the caller says */
  if (f->fd >= 0) set_partial_aside(f);
  outfile_finish(f, 0); /* no temporary left: FILE is not touched */
}
