/* lines.c: one line of a list the command reads as it goes (-K's
 * options, --urls's URLs), grown as it comes and bounded, so a line of
 * gigabytes is refused as soon as it is too long and never held whole. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "run.h"

long run_read_line(FILE *f, char **line, size_t *size, int stops) {
  size_t n = 0;
  for (;;) {
    /* a stop signal that came between reads: the next read would not see it */
    if (stops && cli_interrupted()) {
      errno = EINTR;
      return 0;
    }
    int c = getc(f);
    if (c == EOF) {
      if (ferror(f) && errno == EINTR && !cli_interrupted()) { /* not ours: read on */
        clearerr(f);
        continue;
      }
      break;
    }
    if (n + 2 > *size) { /* room for c and the NUL: at most MAX + 3 */
      size_t cap = *size ? *size * 2 : 256;
      if (cap > RUN_LINE_MAX + 3) cap = RUN_LINE_MAX + 3;
      char *grown = realloc(*line, cap);
      if (!grown) return errno = ENOMEM, -1;
      *line = grown;
      *size = cap;
    }
    (*line)[n++] = (char)c;
    if (c == '\n') break;
    if (n > RUN_LINE_MAX) return -2; /* MAX + 1 bytes and no end yet */
  }
  if (n == 0) return 0;
  (*line)[n] = '\0';
  return (long)n;
}
