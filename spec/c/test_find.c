/* test_find.c: luaretry_policy_find() and luaretry_policy_dir() as
 * luaretry.h promises them: the search path's order (LUARETRY_PATH's
 * folders, empty entries skipped; $XDG_CONFIG_HOME, or ~/.config when it is
 * unset or not absolute; LUARETRY_DATADIR/policies last), NAME before
 * NAME.lua, a bare name never taken from the current folder, a path or a
 * NAME.lua that is a file and never looked up, and the error codes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "luaretry.h"

static char root[256];

static void touch(const char *rel) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  FILE *f = fopen(path, "w");
  if (f) fclose(f);
}

static void folder(const char *rel) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  mkdir(path, 0700);
}

static const char *at(const char *rel) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  return path;
}

static void test_dirs(void) {
  char env[600], dir[512];
  snprintf(env, sizeof env, "%s/a::%s/b:", root, root);
  setenv("LUARETRY_PATH", env, 1);
  setenv("XDG_CONFIG_HOME", at("xdg"), 1);
  setenv("LUARETRY_DATADIR", at("data"), 1);
  const char *want[] = { "a", "b", "xdg/luaretry/policies", "data/policies" };
  for (size_t i = 0; i < 4; i++) {
    if (CHECK_CODE(luaretry_policy_dir(i, dir, sizeof dir), LUARETRY_OK))
      CHECK_EQ_STR(dir, at(want[i]));
  }
  CHECK_CODE(luaretry_policy_dir(4, dir, sizeof dir), LUARETRY_E_ARG);
  /* too small: never cut (another folder), skipped with E_IO, not the end */
  CHECK_CODE(luaretry_policy_dir(0, dir, 4), LUARETRY_E_IO);
  CHECK_EQ_STR(dir, "");
  CHECK_CODE(luaretry_policy_dir(4, dir, 4), LUARETRY_E_ARG);
  /* XDG_CONFIG_HOME relative: ignored, as the XDG spec says; HOME's .config */
  setenv("XDG_CONFIG_HOME", "relative", 1);
  setenv("HOME", at("home"), 1);
  if (CHECK_CODE(luaretry_policy_dir(2, dir, sizeof dir), LUARETRY_OK))
    CHECK_EQ_STR(dir, at("home/.config/luaretry/policies"));
  /* neither: that folder is left out */
  unsetenv("XDG_CONFIG_HOME");
  unsetenv("HOME");
  unsetenv("LUARETRY_PATH");
  if (CHECK_CODE(luaretry_policy_dir(0, dir, sizeof dir), LUARETRY_OK))
    CHECK_EQ_STR(dir, at("data/policies"));
  CHECK_CODE(luaretry_policy_dir(1, dir, sizeof dir), LUARETRY_E_ARG);
}

static void test_find(void) {
  char env[600], path[512];
  snprintf(env, sizeof env, "%s/a:%s/b", root, root);
  setenv("LUARETRY_PATH", env, 1);
  setenv("XDG_CONFIG_HOME", at("xdg"), 1);
  setenv("LUARETRY_DATADIR", at("data"), 1);
  touch("b/gcs.lua");
  touch("data/policies/gcs.lua");
  touch("data/policies/http.lua");
  touch("a/plain");
  touch("a/plain.lua");
  /* the first folder that has it wins */
  if (CHECK_CODE(luaretry_policy_find("gcs", path, sizeof path), LUARETRY_OK))
    CHECK_EQ_STR(path, at("b/gcs.lua"));
  /* NAME.lua is a file, relative to the current folder: never looked up */
  CHECK_CODE(luaretry_policy_find("http.lua", path, sizeof path), LUARETRY_E_IO);
  /* NAME before NAME.lua in one folder */
  if (CHECK_CODE(luaretry_policy_find("plain", path, sizeof path), LUARETRY_OK))
    CHECK_EQ_STR(path, at("a/plain"));
  /* a path is that file, never looked up */
  if (CHECK_CODE(luaretry_policy_find(at("data/policies/gcs.lua"), path, sizeof path), LUARETRY_OK))
    CHECK_EQ_STR(path, at("data/policies/gcs.lua"));
  CHECK_CODE(luaretry_policy_find("./gcs", path, sizeof path), LUARETRY_E_IO);
  /* a bare name is looked up as a shell looks up a command: files called
   * gcs, gcs.lua and nosuch in the current folder change nothing, while
   * ./gcs and gcs.lua name them */
  char cwd[512];
  if (CHECK(getcwd(cwd, sizeof cwd) != NULL) && CHECK(chdir(root) == 0)) {
    touch("gcs");
    touch("gcs.lua");
    touch("nosuch");
    if (CHECK_CODE(luaretry_policy_find("gcs", path, sizeof path), LUARETRY_OK))
      CHECK_EQ_STR(path, at("b/gcs.lua"));
    CHECK_CODE(luaretry_policy_find("nosuch", path, sizeof path), LUARETRY_E_IO);
    if (CHECK_CODE(luaretry_policy_find("./gcs", path, sizeof path), LUARETRY_OK))
      CHECK_EQ_STR(path, "./gcs");
    if (CHECK_CODE(luaretry_policy_find("gcs.lua", path, sizeof path), LUARETRY_OK))
      CHECK_EQ_STR(path, "gcs.lua");
    /* a FIFO is not a policy file: refused, never opened (it would block) */
    mkfifo(at("pipe.lua"), 0600);
    CHECK_CODE(luaretry_policy_find("pipe.lua", path, sizeof path), LUARETRY_E_IO);
    CHECK(chdir(cwd) == 0);
  }
  CHECK_CODE(luaretry_policy_find("nosuch", path, sizeof path), LUARETRY_E_IO);
  CHECK_EQ_STR(path, "");
  /* a folder too long to open, first on the path: the ones after it are
   * still searched (it ended the search, and the shipped policies with it) */
  static char longer[6000];
  memset(longer, 'x', 5000);
  snprintf(longer + 5000, sizeof longer - 5000, ":%s/b", root);
  longer[0] = '/';
  setenv("LUARETRY_PATH", longer, 1);
  if (CHECK_CODE(luaretry_policy_find("gcs", path, sizeof path), LUARETRY_OK))
    CHECK_EQ_STR(path, at("b/gcs.lua"));
  if (CHECK_CODE(luaretry_policy_find("http", path, sizeof path), LUARETRY_OK))
    CHECK_EQ_STR(path, at("data/policies/http.lua"));
  setenv("LUARETRY_PATH", env, 1);
  /* a folder is not a policy */
  folder("a/dir.lua");
  CHECK_CODE(luaretry_policy_find("dir", path, sizeof path), LUARETRY_E_IO);
  CHECK_CODE(luaretry_policy_find("", path, sizeof path), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_find(NULL, path, sizeof path), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_find("gcs", path, 8), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_find("gcs", NULL, 0), LUARETRY_E_ARG);
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/luaretry-find-XXXXXX");
  if (!mkdtemp(root)) return 1;
  const char *dirs[] = {
    "a", "b", "xdg", "xdg/luaretry", "xdg/luaretry/policies", "data", "data/policies", "home"
  };
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) folder(dirs[i]);
  test_dirs();
  test_find();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
  return check_done();
}
