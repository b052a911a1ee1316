/* list.c: `luaretry list`: the policies POLICY can name, folder by folder
 * in the order they are searched, each with the first comment line of its
 * file as its description.  A name an earlier folder already has is not
 * listed again: it cannot be reached by name. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MAX_LISTED 10000   /* files looked at per folder, at most */
#define DESC_MAX 200

typedef struct {
  char **names;            /* every name shown so far, for shadowing */
  size_t n, cap;
  int names_only;          /* --names: one name a line, for completion */
} listing;

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The first "--" line of the file, without the dashes and without a
 * leading "policies/NAME.lua: ", which repeats what the listing shows. */
static void description(const char *path, char *out, size_t size) {
  out[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[512];
  for (int n = 0; n < 50 && fgets(line, sizeof line, f); n++) {
    char *s = line;
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

static int seen(const listing *l, const char *name) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->names[i], name) == 0) return 1;
  return 0;
}

static int remember(listing *l, const char *name) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    char **d = realloc(l->names, cap * sizeof *d);
    if (!d) return -1;
    l->names = d;
    l->cap = cap;
  }
  return (l->names[l->n] = strdup(name)) ? (int)(l->n++, 0) : -1;
}

/* The NAME.lua files of dir that are policies, sorted; *n of them: not a
 * policy's spec beside it (NAME_spec.lua, which busted runs), nor a folder
 * (fault scripts live in a subfolder, which is not looked into). */
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
    if (e->d_type == DT_DIR) continue;
    if ((files[*n] = strndup(e->d_name, len - 4))) (*n)++;
  }
  closedir(d);
  if (files) qsort(files, *n, sizeof *files, by_name);
  return files;
}

static void list_dir(listing *l, const char *dir) {
  size_t n;
  char **files = lua_files(dir, &n);
  int header = 0;
  for (size_t i = 0; i < n; i++) {
    if (!seen(l, files[i]) && remember(l, files[i]) == 0) {
      if (l->names_only) {
        printf("%s\n", files[i]);
      } else {
        char path[CLI_PATH_MAX + 300], desc[DESC_MAX];
        snprintf(path, sizeof path, "%s/%s.lua", dir, files[i]);
        description(path, desc, sizeof desc);
        if (!header++) printf("%s:\n", dir);
        printf("  %-22s %s\n", files[i], desc);
      }
    }
    free(files[i]);
  }
  free(files);
}

int cli_list(int argc, char **argv) {
  listing l = { NULL, 0, 0, 0 };
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--names") == 0) l.names_only = 1;
    else return cli_usage("list: unexpected argument %s", argv[i]);
  }
  char dir[CLI_PATH_MAX];
  for (size_t i = 0; luaretry_policy_dir(i, dir, sizeof dir) == LUARETRY_OK; i++) list_dir(&l, dir);
  if (l.n == 0 && !l.names_only) {
    fprintf(stderr, "luaretry: no policy found in:");
    for (size_t i = 0; luaretry_policy_dir(i, dir, sizeof dir) == LUARETRY_OK; i++)
      fprintf(stderr, " %s", dir);
    fputc('\n', stderr);
  }
  for (size_t i = 0; i < l.n; i++) free(l.names[i]);
  free(l.names);
  return EXIT_OK;
}
