/* list.c: `luaretry list`: the policies POLICY can name, folder by folder
 * in the order they are searched, each with the first comment line of its
 * file as its description.  A name an earlier folder already has is not
 * listed again: it cannot be reached by name. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define MAX_LISTED 10000 /* files looked at per folder, at most */
#define DESC_MAX   200
#define DESC_LINES 50 /* lines read for a description, at most */

/* Every name shown so far, for shadowing: an open-addressing hash set, so
 * a listing is linear in the number of files (sorting each folder aside). */
typedef struct {
  char **slots;
  size_t n, cap;  /* cap: a power of two, at least twice n */
  int names_only; /* --names: one name a line, for completion */
} listing;

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static size_t hash(const char *s) { /* FNV-1a */
  uint64_t h = 14695981039346656037u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
  return (size_t)h;
}

static char **slot(const listing *l, const char *name) {
  size_t i = hash(name) & (l->cap - 1);
  while (l->slots[i] && strcmp(l->slots[i], name) != 0) i = (i + 1) & (l->cap - 1);
  return &l->slots[i];
}

static int seen(const listing *l, const char *name) { return l->cap && *slot(l, name) != NULL; }

static int grow(listing *l) {
  size_t cap = l->cap ? l->cap * 2 : 128;
  listing bigger = { calloc(cap, sizeof(char *)), l->n, cap, l->names_only };
  if (!bigger.slots) return -1;
  for (size_t i = 0; i < l->cap; i++)
    if (l->slots[i]) *slot(&bigger, l->slots[i]) = l->slots[i];
  free(l->slots);
  *l = bigger;
  return 0;
}

static int remember(listing *l, const char *name) {
  if (2 * (l->n + 1) > l->cap && grow(l) != 0) return -1;
  char **s = slot(l, name);
  if (!(*s = strdup(name))) return -1;
  l->n++;
  return 0;
}

/* An open descriptor on path when it is a regular file (following a
 * symbolic link, as a lookup does), else -1.  O_NONBLOCK: a FIFO or a
 * device is looked at, never waited on. */
static int open_regular(const char *path) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  struct stat st;
  if (fd < 0) return -1;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return -1;
  }
  return fd;
}

/* The first "--" line of the file, without the dashes and without a
 * leading "policies/NAME.lua: ", which repeats what the listing shows. */
static void description(int fd, char *out, size_t size) {
  out[0] = '\0';
  FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return;
  }
  char line[512];
  for (int n = 0; n < DESC_LINES && fgets(line, sizeof line, f); n++) {
    char *s = line;
    if (n == 0 && strncmp(s, "\xEF\xBB\xBF", 3) == 0) s += 3; /* a UTF-8 BOM, as Lua skips it */
    while (*s == ' ' || *s == '\t') s++;
    if (strncmp(s, "--", 2) != 0) continue;
    while (*s == '-') s++;
    while (*s == ' ') s++;
    char *colon = strstr(s, ".lua:");
    if (colon && !memchr(s, ' ', (size_t)(colon - s))) s = colon + 5;
    while (*s == ' ') s++;
    size_t len = strcspn(s, "\r\n");
    if (len >= size) len = size - 1;
    memcpy(out, s, len);
    out[len] = '\0';
    break;
  }
  fclose(f);
}

/* The NAME.lua entries of dir that are policies, sorted; *n of them: not a
 * policy's spec beside it (NAME_spec.lua, which busted runs), nor a folder
 * (fault scripts live in a subfolder, which is not looked into).  Whether
 * each is a regular file is for the caller to see as it opens it. */
static char **lua_files(const char *dir, size_t *n) {
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return NULL;
  char **files = calloc(MAX_LISTED, sizeof *files);
  struct dirent *e;
  while (files && *n < MAX_LISTED && (e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len <= 4 || e->d_name[0] == '.' || strcmp(e->d_name + len - 4, ".lua") != 0) continue;
    if (len >= 9 && strcmp(e->d_name + len - 9, "_spec.lua") == 0) continue;
    /* what the folder says it is, when it says: no stat for the rest */
    if (e->d_type != DT_UNKNOWN && e->d_type != DT_REG && e->d_type != DT_LNK) continue;
    if ((files[*n] = strndup(e->d_name, len - 4))) (*n)++;
  }
  closedir(d);
  if (files) qsort(files, *n, sizeof *files, by_name);
  return files;
}

/* A name from a file system (any byte but '/', at most NAME_MAX), padded
 * to width columns as shown: escaped (a byte as \xHH takes four), a UTF-8
 * character one. */
static void padded(const char *s, int width) {
  char shown[4 * NAME_MAX + 1];
  cli_text_copy(shown, sizeof shown, s);
  fputs(shown, stdout);
  int w = 0;
  for (const unsigned char *p = (const unsigned char *)shown; *p; p++) w += (*p & 0xC0) != 0x80;
  for (; w < width; w++) putchar(' ');
}

static void list_dir(listing *l, const char *dir) {
  size_t n;
  char **files = lua_files(dir, &n);
  int header = 0;
  for (size_t i = 0; i < n; i++) {
    char path[CLI_PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/%s.lua", dir, files[i]);
    int fd = seen(l, files[i]) ? -1 : open_regular(path);
    if (fd >= 0 && remember(l, files[i]) == 0) {
      char desc[DESC_MAX];
      if (l->names_only) {
        close(fd);
        cli_text(stdout, files[i]);
        putchar('\n');
      } else {
        description(fd, desc, sizeof desc);
        if (!header++) {
          cli_text(stdout, dir);
          puts(":");
        }
        fputs("  ", stdout);
        padded(files[i], 22);
        putchar(' ');
        cli_text(stdout, desc);
        putchar('\n');
      }
    } else if (fd >= 0) {
      close(fd);
    }
    free(files[i]);
  }
  free(files);
}

/* --set-names: the fields --set takes, "NAME=" a line, read from the
 * schema table itself so that completion never lags behind it. */
static int set_names(void) {
  for (size_t i = 0; i < luaretry_field_count(); i++) {
    const luaretry_field *f = luaretry_field_at(i);
    if (f && f->settable && !f->host_only) printf("%s=\n", f->name);
  }
  return EXIT_OK;
}

int cli_list(int argc, char **argv) {
  listing l = { NULL, 0, 0, 0 };
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--names") == 0)
      l.names_only = 1;
    else if (strcmp(argv[i], "--set-names") == 0 && argc == 1)
      return set_names();
    else
      return cli_usage("list: unexpected argument %s", argv[i]);
  }
  char dir[CLI_PATH_MAX];
  luaretry_code rc;
  /* E_IO: a folder too long to open, skipped; E_ARG: past the last */
  for (size_t i = 0; (rc = luaretry_policy_dir(i, dir, sizeof dir)) != LUARETRY_E_ARG; i++)
    if (rc == LUARETRY_OK) list_dir(&l, dir);
  if (l.n == 0 && !l.names_only) {
    fprintf(stderr, "luaretry: no policy found in:");
    for (size_t i = 0; (rc = luaretry_policy_dir(i, dir, sizeof dir)) != LUARETRY_E_ARG; i++)
      if (rc == LUARETRY_OK) fprintf(stderr, " %s", dir);
    fputc('\n', stderr);
  }
  if (l.n && !l.names_only)
    puts(
      "\nA bare NAME is looked up in these folders, in this order, never in the current\n"
      "folder; a path with a / or a NAME.lua is a file.");
  for (size_t i = 0; i < l.cap; i++) free(l.slots[i]);
  free(l.slots);
  return EXIT_OK;
}
