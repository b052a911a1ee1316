/* output.c: what the commands print on standard output, whose write
 * errors (a full disk, a closed stream) are said once at the end and never
 * end in a success.  A flush on the way keeps the first failure's errno,
 * which a later flush that finds nothing to write has lost: glibc then
 * answers 0 with the stream's error flag still set. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "output.h"

static int out_errno; /* the first failed flush's errno, or 0 */

int cli_out_flush(void) {
  errno = 0;
  if (fflush(stdout) == 0) return 0;
  if (!out_errno) out_errno = errno;
  return -1;
}

int cli_out_done(int status) {
  cli_out_flush();
  if (!out_errno && !ferror(stdout)) return status;
  /* a flush elsewhere that ignored its failure took the errno along */
  if (out_errno)
    fprintf(stderr, "luaretry: standard output: writing: %s\n", strerror(out_errno));
  else
    fprintf(stderr, "luaretry: standard output: writing failed\n");
  return status == EXIT_OK ? EXIT_FINAL : status;
}
