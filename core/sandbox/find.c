/* find.c: a policy by name.  POLICY with a '/' or ending in ".lua" is a
 * file; a bare NAME is looked up, as NAME then NAME.lua, in the folders of
 * LUARETRY_PATH, the user's $XDG_CONFIG_HOME/luaretry/policies (~/.config
 * when unset) and the installed share/luaretry/policies, and never in the
 * current folder: as a shell looks up a command, so a file called `http`
 * in a shared folder cannot stand in for the shipped policy (and read the
 * caller's credentials), while a user's own gcs.lua on the path can.  No
 * Lua and no curl here: plain file names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "find.h"
#include "luaretry.h"

#ifndef LUARETRY_DATADIR
#define LUARETRY_DATADIR "/usr/local/share/luaretry"
#endif

/* Folders of LUARETRY_PATH read at most; more are ignored (a bound on the
 * work of one lookup, far above any real use). */
#define MAX_PATH_DIRS 64

const char *lr_datadir(void) {
  const char *d = getenv("LUARETRY_DATADIR");
  return d && *d ? d : LUARETRY_DATADIR;
}

static int is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* a, then b, into out; 0, or -1 when they did not fit. */
static int join(char *out, size_t size, const char *a, const char *b) {
  int n = snprintf(out, size, "%s%s", a, b);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* Folder i of LUARETRY_PATH (empty entries skipped, as PATH's are not:
 * an empty entry here means nothing); 1 found, 0 past its end, -1 cut. */
static int env_dir(size_t i, char *out, size_t size) {
  const char *s = getenv("LUARETRY_PATH");
  size_t k = 0;
  for (int n = 0; s && *s && n < MAX_PATH_DIRS; n++) {
    size_t len = strcspn(s, ":");
    if (len > 0 && k++ == i) {
      if (len >= size) return -1;
      memcpy(out, s, len);
      out[len] = '\0';
      return 1;
    }
    s += len + (s[len] == ':');
  }
  return 0;
}

/* The user's folder; 0 when neither XDG_CONFIG_HOME (absolute, as the XDG
 * spec wants) nor HOME says where it is. */
static int user_dir(char *out, size_t size) {
  const char *xdg = getenv("XDG_CONFIG_HOME");
  if (xdg && xdg[0] == '/') return join(out, size, xdg, "/luaretry/policies") ? -1 : 1;
  const char *home = getenv("HOME");
  if (home && *home) return join(out, size, home, "/.config/luaretry/policies") ? -1 : 1;
  return 0;
}

static size_t env_dir_count(void) {
  char scratch[8];
  size_t n = 0;
  while (n < MAX_PATH_DIRS && env_dir(n, scratch, sizeof scratch) != 0) n++;
  return n;
}

luaretry_code luaretry_policy_dir(size_t i, char *path, size_t size) {
  if (!path || size == 0) return LUARETRY_E_ARG;
  path[0] = '\0';
  size_t n_env = env_dir_count();
  int rc;
  if (i < n_env) {
    rc = env_dir(i, path, size);
  } else {
    i -= n_env;
    char user[4096];
    int has_user = user_dir(user, sizeof user);
    if (has_user < 0) has_user = 0; /* a HOME too long to use: skipped */
    if (has_user && i == 0)
      rc = join(path, size, user, "") ? -1 : 1;
    else if (i == (size_t)has_user)
      rc = join(path, size, lr_datadir(), "/policies") ? -1 : 1;
    else
      rc = 0;
  }
  if (rc < 0) path[0] = '\0';
  /* a folder cut would be another folder; one past the end stops a loop,
   * one too long must not (the folders after it still count) */
  return rc == 1 ? LUARETRY_OK : rc < 0 ? LUARETRY_E_IO : LUARETRY_E_ARG;
}

static int is_file_name(const char *policy) {
  size_t len = strlen(policy);
  return strchr(policy, '/') != NULL || (len >= 4 && strcmp(policy + len - 4, ".lua") == 0);
}

luaretry_code luaretry_policy_find(const char *policy, char *path, size_t size) {
  if (!policy || !*policy || !path || size == 0) return LUARETRY_E_ARG;
  path[0] = '\0';
  if (is_file_name(policy)) { /* a file, never looked up */
    if (!is_file(policy)) return LUARETRY_E_IO;
    return join(path, size, policy, "") ? LUARETRY_E_ARG : LUARETRY_OK;
  }
  char dir[4096], candidate[8192];
  luaretry_code rc;
  for (size_t i = 0; (rc = luaretry_policy_dir(i, dir, sizeof dir)) != LUARETRY_E_ARG; i++) {
    for (int ext = 0; rc == LUARETRY_OK && ext <= 1; ext++) {
      int n = snprintf(candidate, sizeof candidate, "%s/%s%s", dir, policy, ext ? ".lua" : "");
      if (n < 0 || (size_t)n >= sizeof candidate) continue;
      if (!is_file(candidate)) continue;
      return join(path, size, candidate, "") ? LUARETRY_E_ARG : LUARETRY_OK;
    }
  }
  return LUARETRY_E_IO;
}
