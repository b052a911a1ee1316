/* chunk.c: a script's text compiled, for the policy's loader and for
 * require.  Text only (a binary chunk skips the parser's checks), and an
 * error that names the file: Lua's own refusal of a binary chunk and the
 * parser's "C stack overflow" (a nesting too deep) name no chunk, so the
 * name and the line the parser had reached are put in front.  A module is
 * read from a regular file only: a FIFO would block in the kernel, where
 * no time limit reaches. */
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox.h"

/* Hands the text out a line at a time, so that the line the parser had
 * reached is known when it fails without saying. */
typedef struct {
  const char *p, *end;
  int line; /* the line of the piece handed out last */
  int next; /* the line of the next piece */
} line_reader;

static const char *read_line(lua_State *L, void *ud, size_t *size) {
  (void)L;
  line_reader *r = ud;
  if (r->p == r->end) {
    *size = 0;
    return NULL;
  }
  const char *piece = r->p, *nl = memchr(r->p, '\n', (size_t)(r->end - r->p));
  r->p = nl ? nl + 1 : r->end;
  r->line = r->next;
  r->next += nl != NULL;
  *size = (size_t)(r->p - piece);
  return piece;
}

/* lua_load, text only: it raises nothing (the parser runs protected). */
static int compile(lua_State *L, const char *text, size_t len, const char *chunkname, int *line) {
  line_reader r = { text, text + len, 1, 1 };
  int status = lua_load(L, read_line, &r, chunkname, "t");
  *line = r.line;
  return status;
}

/* The message on top, after a failed compile of `source` (the file as
 * messages show it), names the chunk where Lua's did not. */
static void name_chunk(lua_State *L, int status, const char *source, int binary, int line) {
  if (status == LUA_OK || status == LUA_ERRMEM || lr_sandbox_of(L)->killed) return;
  const char *msg = lua_tostring(L, -1);
  if (!msg) return;
  if (status == LUA_ERRSYNTAX && binary) /* the parser's errors say where; this one not */
    lua_pushfstring(L, "%s: %s", source, msg);
  else if (status == LUA_ERRRUN) /* raised in the parser, whose frame has no line */
    lua_pushfstring(L, "%s:%d: %s%s", source, line, msg,
                    strcmp(msg, "C stack overflow") == 0 ? " (nested too deeply)" : "");
  else
    return;
  lua_remove(L, -2);
}

static const char *source_of(const char *chunkname) {
  return chunkname[0] == '@' || chunkname[0] == '=' ? chunkname + 1 : chunkname;
}

int lr_chunk_load(lua_State *L, const char *text, size_t len, const char *chunkname) {
  int line;
  int status = compile(L, text, len, chunkname, &line);
  name_chunk(L, status, source_of(chunkname), len && text[0] == LUA_SIGNATURE[0], line);
  return status;
}

/* An open descriptor on the regular file at path, of at most `limit`
 * bytes (0: any), blocking again; -1 with errno, or with *why set. */
static int open_regular(const char *path, size_t limit, off_t *size, const char **why) {
  *why = NULL;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return -1;
  struct stat st;
  int flags;
  if (fstat(fd, &st) != 0 || (flags = fcntl(fd, F_GETFL)) < 0 ||
      fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    *why = strerror(errno);
  else if (!S_ISREG(st.st_mode))
    *why = "not a regular file";
  else if (limit && (unsigned long long)st.st_size > limit)
    *why = "larger than the memory limit";
  if (!*why) {
    *size = st.st_size;
    return fd;
  }
  close(fd);
  return -1;
}

int lr_chunk_load_file(lua_State *L, const char *path, size_t limit, int *missing) {
  *missing = 0;
  const char *why;
  off_t size = 0;
  int fd = open_regular(path, limit, &size, &why);
  if (fd < 0 && !why && (errno == ENOENT || errno == ENOTDIR)) {
    *missing = 1;
    return LUA_ERRFILE;
  }
  if (fd < 0 && !why) why = strerror(errno);
  /* the text, then its chunk name "@path": malloc'd, as nothing may raise
   * while it is held */
  size_t plen = strlen(path), n = 0;
  char *text = fd < 0 ? NULL : malloc((size_t)size + plen + 2);
  if (fd >= 0 && !text) {
    close(fd);
    lua_pushliteral(L, "not enough memory"); /* Lua's words: the host's memory, no script's error */
    return LUA_ERRMEM;
  }
  while (text && n < (size_t)size) { /* a file that grows meanwhile is read to its size then */
    ssize_t got = read(fd, text + n, (size_t)size - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) why = strerror(errno);
    if (got <= 0) break;
    n += (size_t)got;
  }
  if (fd >= 0) close(fd);
  if (why) {
    free(text);
    lua_pushfstring(L, "%s: cannot read: %s", path, why);
    return LUA_ERRFILE;
  }
  char *chunkname = text + size;
  chunkname[0] = '@';
  memcpy(chunkname + 1, path, plen + 1);
  /* as luaL_loadfile: a UTF-8 BOM and a first "#" line skipped, the lines
   * numbered as in the file */
  size_t at = n >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
  memset(text, ' ', at);
  if (at < n && text[at] == '#')
    for (size_t i = at; i < n && text[i] != '\n'; i++) text[i] = ' ';
  int binary = n && text[0] == LUA_SIGNATURE[0], line;
  int status = compile(L, text, n, chunkname, &line);
  free(text);
  name_chunk(L, status, path, binary, line);
  return status;
}
