/* local_file.c: the local store's file (local_store.h): where it lives,
 * and what is refused.  A new file is made whole under a name of its
 * own, then linked into place, so no process ever maps a half-made one;
 * two processes making it at once both link, one wins, the other maps
 * the winner's.
 *
 * A shared map faults (SIGBUS) once its file is cut under it, and a
 * library may not catch that signal (its handler is the host's).  What
 * is done before the map exists goes through pwrite and pread, which a
 * file cut meanwhile only cuts short: the new file's contents, the
 * open's checks.  A file cut while mapped ends the process at its next
 * update, as SQLite's and LMDB's mapped files do: checking the size at
 * every update would cost a system call each (and still leave a window);
 * luaretry(1) says so, and reset never cuts a file (it clears the words
 * in place, or unlinks a refused entry). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local_store.h"

#define LR_LOCAL_MAGIC   0x4c4f43414c464c52ull /* "RLFLACOL" on a little-endian disk */
#define LR_LOCAL_VERSION 1u

/* FNV-1a, 64 bits, from a given basis: two of them name a key's file. */
static uint64_t fnv(const char *s, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return h;
}

static void key_hash(const char *key, uint64_t out[2]) {
  size_t n = strlen(key);
  out[0] = fnv(key, n, 0xcbf29ce484222325ull);
  out[1] = fnv(key, n, 0x84222325cbf29ce4ull);
}

/* The machine's boot, in the file's name: the times in the file are
 * CLOCK_MONOTONIC's, which start again at each boot. */
static uint32_t boot_hash(void) {
  char id[64] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
  if (f) {
    if (!fgets(id, sizeof id, f)) id[0] = '\0';
    fclose(f);
  }
  return (uint32_t)fnv(id, strlen(id), 0xcbf29ce484222325ull);
}

static int refuse(lr_local *l, const char *fmt, const char *what) {
  char why[400];
  lr_fmt(why, sizeof why, fmt, what);
  lr_fmt(l->detail, sizeof l->detail, "%s: %s", l->path[0] ? l->path : "local store", why);
  return -1;
}

/* A folder of ours that no one else may write to. */
static int check_dir(lr_local *l, const char *dir) {
  struct stat st;
  if (lstat(dir, &st) != 0) {
    char why[4200];
    lr_fmt(why, sizeof why, "%s: %s", dir, strerror(errno));
    return refuse(l, "folder %s, refused", why);
  }
  if (S_ISLNK(st.st_mode)) return refuse(l, "folder %s: a symbolic link, refused", dir);
  if (!S_ISDIR(st.st_mode)) return refuse(l, "%s: not a folder", dir);
  if (st.st_uid != getuid()) return refuse(l, "folder %s: owned by another user, refused", dir);
  if (st.st_mode & 022) return refuse(l, "folder %s: others may write to it, refused", dir);
  return 0;
}

static int folder(lr_local *l, const char *dir, char *out, size_t size) {
  if (dir && dir[0]) {
    lr_fmt(out, size, "%s", dir);
  } else {
    lr_fmt(out, size, "/tmp/luaretry-%lu", (unsigned long)getuid());
    if (mkdir(out, 0700) != 0 && errno != EEXIST)
      return refuse(l, "cannot make the folder %s", out);
  }
  return check_dir(l, out);
}

/* Version 1 grew within its padding (the reserve's word, the settings'):
 * a file of an older build has this size, those words 0.  The offsets are
 * fleet_local_spec's, which writes garbage into a store. */
_Static_assert(sizeof(lr_local_file) == 896, "the store's layout changed: bump LR_LOCAL_VERSION");
_Static_assert(
  offsetof(lr_local_file, tokens) == 256 && offsetof(lr_local_file, breaker) == 264 &&
    offsetof(lr_local_file, tat_us) == 576 && offsetof(lr_local_file, reserve_tat_us) == 584 &&
    offsetof(lr_local_file, cfg_seen) == 840,
  "the store's layout changed: bump LR_LOCAL_VERSION (and fleet_local_spec's offsets)");

void lr_local_file_clear(lr_local_file *m) {
  atomic_store(&m->cfg_hash, 0); /* any process's settings may take it */
  atomic_store(&m->cfg_seen, 0);
  atomic_store(&m->tokens, -1);
  atomic_store(&m->breaker, 0);
  for (int i = 0; i < LR_LOCAL_BUCKETS; i++) {
    atomic_store(&m->requests[i], 0);
    atomic_store(&m->accepts[i], 0);
  }
  atomic_store(&m->tat_us, 0);
  atomic_store(&m->reserve_tat_us, 0);
  atomic_store(&m->window_from, atomic_load(&m->outcomes));
  for (int i = 0; i < LR_LOCAL_BLOCKS; i++) atomic_store(&m->blocks[i], 0);
}

static lr_local_file *map_fd(int fd) {
  void *p = mmap(NULL, sizeof(lr_local_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* Makes the file whole under a temporary name and links it into place:
 * 0 (made, or another process's came first), -1 refused. */
static int create(lr_local *l, const char *key, const uint64_t h[2]) {
  char tmp[sizeof l->path + 32];
  lr_fmt(tmp, sizeof tmp, "%s.%ld.new", l->path, (long)getpid());
  unlink(tmp); /* a crashed predecessor of ours with this pid */
  int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return refuse(l, "cannot create it: %s", strerror(errno));
  /* written, not mapped: a file cut meanwhile (by another process of
   * the user) only cuts the write short; its blocks reserved first, so
   * that a write through a process's map never lacks room */
  lr_local_file m;
  int rc = posix_fallocate(fd, 0, sizeof m);
  memset(&m, 0, sizeof m);
  m.version = LR_LOCAL_VERSION;
  m.size = sizeof m;
  m.key_hash[0] = h[0], m.key_hash[1] = h[1];
  lr_strlcpy(m.key, key, sizeof m.key);
  lr_local_file_clear(&m);
  m.magic = LR_LOCAL_MAGIC;
  ssize_t n = rc == 0 ? pwrite(fd, &m, sizeof m, 0) : -1;
  if (rc == 0 && n != (ssize_t)sizeof m) rc = n < 0 ? errno : ENOSPC;
  close(fd);
  if (rc != 0) {
    unlink(tmp);
    return refuse(l, "no room for it: %s", strerror(rc));
  }
  rc = link(tmp, l->path);
  int e = errno;
  unlink(tmp);
  if (rc != 0 && e != EEXIST) return refuse(l, "cannot create it: %s", strerror(e));
  return 0;
}

/* Ours, whole and of this layout: 0 and l->map, or -1.  Judged on a
 * copy read by pread, not through the map: a file cut after its size was
 * checked reads short, where the map would fault. */
static int check_and_map(lr_local *l, int fd, const uint64_t h[2]) {
  struct stat st;
  if (fstat(fd, &st) != 0) return refuse(l, "cannot be read: %s", strerror(errno));
  if (!S_ISREG(st.st_mode)) return refuse(l, "%s", "not a regular file, refused");
  if (st.st_uid != getuid()) return refuse(l, "%s", "owned by another user, refused");
  if (st.st_mode & 077) return refuse(l, "%s", "others may read or write it, refused");
  lr_local_file c;
  ssize_t n = st.st_size == (off_t)sizeof c ? pread(fd, &c, sizeof c, 0) : 0;
  if (n < 0) return refuse(l, "cannot be read: %s", strerror(errno));
  if (n != (ssize_t)sizeof c)
    return refuse(l, "%s", "of another size (truncated, or another layout): refused");
  if (c.magic != LR_LOCAL_MAGIC || c.version != LR_LOCAL_VERSION || c.size != sizeof c ||
      c.key_hash[0] != h[0] || c.key_hash[1] != h[1])
    return refuse(l, "%s", "not a luaretry fleet store of this version and key: refused");
  const char *bad = lr_local_counts_garbage(l, &c);
  if (bad) return refuse(l, "holds %s (garbage, or another layout): refused", bad);
  lr_local_file *m = map_fd(fd);
  if (!m) return refuse(l, "cannot be mapped: %s", strerror(errno));
  l->map = m;
  return 0;
}

void lr_local_file_open(lr_local *l, const char *dir, const char *key) {
  char where[4000];
  l->map = NULL;
  l->path[0] = l->detail[0] = '\0';
  if (folder(l, dir, where, sizeof where) != 0) return;
  uint64_t h[2];
  key_hash(key, h);
  lr_fmt(l->path, sizeof l->path, "%s/luaretry-fleet-%016llx%016llx-%08x", where,
         (unsigned long long)h[0], (unsigned long long)h[1], (unsigned)boot_hash());
  for (int tries = 0; tries < 3; tries++) {
    int fd = open(l->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ELOOP) {
      refuse(l, "%s", "a symbolic link, refused");
      l->file_refused = 1;
      return;
    }
    if (fd < 0 && errno == ENOENT) {
      if (create(l, key, h) != 0) return;
      continue;
    }
    if (fd < 0) {
      /* an entry there that is not ours to open (not writable, a
       * folder...): reset may remove it */
      int e = errno;
      l->file_refused = e == EACCES || e == EPERM || e == EISDIR || e == ENXIO || e == ETXTBSY;
      refuse(l, "cannot be opened: %s", strerror(e));
      return;
    }
    if (check_and_map(l, fd, h) != 0) l->file_refused = 1;
    close(fd);
    return;
  }
  refuse(l, "%s", "made and gone again three times: refused");
}

void lr_local_file_close(lr_local *l) {
  if (l->map) munmap(l->map, sizeof *l->map);
  l->map = NULL;
}
