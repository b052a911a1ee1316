/* outfile.h: a file replaced whole or not at all, for -o, --output-dir and
 * --svg.
 *
 * The bytes go to a temporary beside the target (PATH.luaretry-XXXXXX: the
 * same folder, so the rename cannot cross file systems).  outfile_finish()
 * renames it into place when the caller keeps the result and removes it
 * otherwise: a reader never sees half a file, and a failed run leaves the
 * old file as it was.  Without a path the bytes go to standard output as
 * they come. */
#ifndef LUARETRY_CLI_OUTFILE_H
#define LUARETRY_CLI_OUTFILE_H

#include <stddef.h>

typedef enum {
  OUTFILE_PRIVATE,   /* 0600, mkstemp's: what -o and --output-dir have made */
  OUTFILE_UMASK      /* 0666 less the umask, as open() makes: --svg */
} outfile_mode;

typedef struct {
  const char *path;        /* the target, the caller's; NULL: standard output */
  const char *option;      /* messages say "OPTION PATH": "-o", "--svg", "[3]" */
  outfile_mode mode;
  char *tmp;               /* the temporary, while it exists */
  int fd;
  int failed;              /* creating or writing failed: the rest is dropped */
  int finished;
} outfile;

/* Names the target; creates nothing yet. */
void outfile_init(outfile *f, const char *path, const char *option, outfile_mode mode);
/* Creates the temporary now (a no-op for standard output or when it
 * exists), so that a bad path shows before any work; -1 after a message. */
int outfile_create(outfile *f);
/* A luaretry_sink_fn: appends, creating the temporary when needed.  Always
 * returns len: a failure is reported once and remembered, not passed on. */
size_t outfile_write(void *f, const char *data, size_t len);
/* keep: renames the temporary into place (an empty file when nothing was
 * written); otherwise removes it.  Later calls do nothing.  -1 when a
 * result to keep was lost (a write, fsync or rename failed), after a
 * message.  Standard output stays open: each call only says whether a
 * result to keep was lost, so a batch may ask once per call. */
int outfile_finish(outfile *f, int keep);

#endif
