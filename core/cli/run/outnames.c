/* outnames.c: --output-dir's file names, one per URL of a batch, each
 * unique: a name given before gets NAME.1, NAME.2 ... as curl's
 * --output-dir users expect of wget.  Every name is remembered with the
 * next suffix to try for it, so N URLs of one name cost N lookups, not
 * N^2/2 (24,000 URLs ending in "/", all "index", took 26 s to name).
 * And a name another option's file has in that folder (-c, --log-json,
 * --urls ...) is found before the batch begins: the body would replace
 * it, or it the body. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

static size_t name_hash(const char *s) {
  size_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static out_name *name_find(out_names *set, const char *name) {
  size_t i = name_hash(name) & set->mask;
  while (set->slot[i].name && strcmp(set->slot[i].name, name) != 0) i = (i + 1) & set->mask;
  return &set->slot[i];
}

/* Room for one more name; -1 when out of memory. */
static int name_room(out_names *set) {
  if (set->slot && (set->count + 1) * 2 <= set->mask + 1) return 0;
  size_t cap = set->slot ? (set->mask + 1) * 2 : 64;
  out_names bigger = { calloc(cap, sizeof *bigger.slot), cap - 1, set->count };
  if (!bigger.slot) return -1;
  for (size_t i = 0; set->slot && i <= set->mask; i++)
    if (set->slot[i].name) *name_find(&bigger, set->slot[i].name) = set->slot[i];
  free(set->slot);
  *set = bigger;
  return 0;
}

/* name, now in the set (which owns it); -1 when out of memory. */
static int name_add(out_names *set, char *name) {
  if (name_room(set) != 0) return -1;
  out_name *at = name_find(set, name);
  at->name = name;
  at->next = 1;
  set->count++;
  return 0;
}

char *out_names_unique(out_names *set, char *base) {
  if (!base || name_room(set) != 0) {
    free(base);
    return NULL;
  }
  out_name *at = name_find(set, base);
  if (!at->name) return name_add(set, base) == 0 ? base : (free(base), NULL);
  /* taken: base.K from the K its last repeat stopped at; a K taken by a
   * name of its own (a URL named "index.1") is passed, once */
  size_t len = strlen(base) + 24;
  char *name = malloc(len);
  for (long k = at->next; name; k++) {
    snprintf(name, len, "%s.%ld", base, k);
    if (name_find(set, name)->name) continue;
    name_find(set, base)->next = k + 1;
    free(base);
    if (name_add(set, name) == 0) return name;
    free(name);
    return NULL;
  }
  free(base);
  return NULL;
}

void out_names_free(out_names *set) {
  for (size_t i = 0; set->slot && i <= set->mask; i++) free(set->slot[i].name);
  free(set->slot);
  memset(set, 0, sizeof *set);
}

/* ---- the other files the options write, in the same folder */

int out_others_find(out_others *o, const run_args *a, const char *dir) {
  memset(o, 0, sizeof *o);
  char real[PATH_MAX];
  if (!realpath(dir, real)) return 0; /* no folder: said before */
  size_t len = strlen(real);
  run_output outs[RUN_OUTPUTS];
  int n = run_outputs(a, outs);
  for (int i = 0; i < n; i++) {
    /* --remote-name-all -o FILE: its name is the first URL's, reserved */
    if (outs[i].path == a->output) continue;
    char c[2 * PATH_MAX];
    run_canonical(outs[i].path, c, sizeof c);
    const char *base = c + len + 1;
    if (strncmp(c, real, len) != 0 || c[len] != '/' || !*base || strchr(base, '/')) continue;
    if (!(o->name[o->n] = strdup(base))) return -1;
    o->opt[o->n] = outs[i].opt;
    o->path[o->n++] = outs[i].path;
  }
  return 0;
}

int out_others_clash(const out_others *o, const char *name) {
  for (int i = 0; i < o->n; i++)
    if (strcmp(o->name[i], name) == 0) return i;
  return -1;
}

void out_others_free(out_others *o) {
  for (int i = 0; i < o->n; i++) free(o->name[i]);
  memset(o, 0, sizeof *o);
}
