/* outfile.h: where a body goes, written as curl writes it, and only when
 * the caller keeps it (-o, --output-dir, standard output, --svg).
 *
 * - A regular file (or a new one) is replaced whole or not at all: the
 *   bytes go to a temporary beside it (TARGET.luaretry-XXXXXX, the same
 *   folder, so the rename cannot cross file systems), renamed into place
 *   when kept.  A new file gets 0666 less the umask, as curl's open()
 *   gives it; a file replaced keeps its mode (and its owner, where we may).
 * - A symlink is followed: its target is what is replaced or written.
 * - Anything else (a device such as /dev/null, a FIFO, standard output,
 *   "-") is never replaced: the bytes are spooled (in memory up to
 *   OUTFILE_MEMORY, then to an unlinked temporary file in $TMPDIR) and
 *   written into it, in place, once kept: a retried attempt's bytes must
 *   never reach a reader that cannot take them back.  The spool file never
 *   takes the last 1/20 of its file system (an endless body would fill it
 *   until the deadline): past that the body is not kept, which is said and
 *   the spool's space given back at once.
 * So a reader never sees half a file, a failed run leaves the old one as
 * it was, and nothing is left behind: the spool has no name, and the
 * temporary is removed however the run ends (the stop signals unwind to
 * outfile_finish()). */
#ifndef LUARETRY_CLI_OUTFILE_H
#define LUARETRY_CLI_OUTFILE_H

#include <stddef.h>
#include <sys/types.h>

#define OUTFILE_MEMORY (64 * 1024)

typedef struct {
  const char *path;   /* as given, the caller's; NULL: standard output */
  const char *option; /* messages say "OPTION PATH": "-o", "--svg", "[3]" */
  char *target;       /* path with its symlinks followed */
  int in_place;       /* not a regular file: spooled, then written into */
  char *tmp;          /* the temporary beside target, while it exists */
  int fd;             /* the temporary or the spool; -1 before */
  char *mem;          /* in place: the first OUTFILE_MEMORY bytes are
                              kept here, a spool file made only past them */
  size_t mem_len;
  unsigned long long spooled;    /* bytes in the spool file */
  unsigned long long spool_look; /* its file system's free space is
                                    looked at again from this many */
  int failed;                    /* creating or writing failed: the rest is dropped */
  int finished;
  int existed; /* target is a regular file that is replaced */
  mode_t mode; /* the mode the file gets */
  uid_t uid;   /* the replaced file's owner, kept where we may */
  gid_t gid;
  int append;        /* -C -: written into the file itself, after
                              what it held; kept whatever the outcome */
  off_t held_from;   /* -C - or a partial: the length it had at the start */
  char *partial;     /* .NAME.luaretry-partial beside target: the temporary
                    is it (resumed across runs), or NULL */
  char *validator;   /* the partial's, as its sidecar says */
  int across_runs;   /* the caller keeps a partial when the call is cut */
  int restarted;     /* outfile_restart() since the caller last cleared it:
                      the bytes held before (a partial's) are not the
                      temporary's any more */
  int partial_aside; /* the partial is closed on disk, no longer the
                        temporary: this run's new bytes have their own */
  int partial_stale; /* it no longer matches (the download started over):
                        removed at the finish */
  int partial_hold;  /* it stays for the next run, as it is on disk */
  int out_fd;        /* standard output's (path NULL): where the bytes go
                        when kept; STDOUT_FILENO unless the caller says
                        (a batch's body waiting for its turn, order.c) */
} outfile;

/* Names the target ("-" is standard output); creates nothing yet. */
void outfile_init(outfile *f, const char *path, const char *option);
/* Creates the temporary or the spool now (a no-op when it exists), so that
 * a bad path shows before any work; -1 after a message. */
int outfile_create(outfile *f);
/* A luaretry_sink_fn: appends, creating the temporary when needed.  Always
 * returns len: a failure is reported once and remembered, not passed on. */
size_t outfile_write(void *f, const char *data, size_t len);
/* A luaretry_restart_fn: a new attempt begins, what was written is
 * dropped (the file emptied, a remembered write failure forgotten). */
int outfile_restart(void *f);
/* The same, and `stale` says whether the bytes held before no longer
 * match the resource (a new answer from zero) or merely give way to what
 * is written next (an error page that ends the call).  An earlier run's
 * partial is never emptied: it is set aside as it is on disk, and the new
 * bytes go to a temporary of their own. */
int outfile_start_over(outfile *f, int stale);
/* While a call waits for its retry: what was written is dropped and the
 * descriptor closed (a temporary removed), so a waiting call holds none;
 * the next write makes it again. */
void outfile_release(outfile *f);
/* keep: puts the bytes in place (an empty file when nothing was written);
 * otherwise drops them.  Later calls do nothing.  -1 when a result to keep
 * was lost (a write, fsync, copy or rename failed), after a message.
 * Standard output stays open. */
int outfile_finish(outfile *f, int keep);

/* -C -: the bytes go straight into the file (made when missing), after
 * the *size bytes it holds; what a failed run wrote stays, for the next
 * -C -, as curl leaves it.  A restart (a download from zero) moves to a
 * temporary beside it, which replaces it only when kept: the file is
 * never emptied by a download that then fails.  -1 after a message. */
int outfile_continue(outfile *f, unsigned long long *size);
/* -C -: what this run appended is taken back (--max-filesize refused the
 * body): the file is as it was at the start. */
void outfile_append_undo(outfile *f);
/* What this run wrote after the bytes it started with (-C -'s file, an
 * earlier run's partial) is taken back: 1 when the sink holds exactly
 * those again, 0 when it holds none of them (it started over, or there
 * were none). */
int outfile_take_back(outfile *f);

/* Resume across runs (a -o FILE GET, see luaretry(1)): a download that
 * ended by a stop signal or its deadline keeps its bytes under a hidden
 * name beside FILE, .FILE.luaretry-partial, with .FILE.luaretry-partial.url
 * holding the URL and the server's validator; FILE itself never holds
 * half a file.
 * outfile_partial_open: when both are there and name `url`, the partial
 * becomes the temporary (appended to, renamed into place when kept): 1,
 * its validator in f->validator; 0 when there is none to continue (one of
 * another URL, or unreadable, is removed; one this user did not make, or
 * others may write, is left as it is, said once); -1 after a message. */
int outfile_partial_open(outfile *f, const char *url);
/* Keeps what the temporary holds as the partial of url and validator,
 * instead of dropping it; the outfile is finished.  -1 after a message
 * (nothing is left then). */
int outfile_partial_keep(outfile *f, const char *url, const char *validator);

/* The call ended without success, but not on a final answer nor a
 * mismatch (refused before attempt 1, attempts or retries spent on
 * transient errors, a usage error): the earlier run's partial, unless it
 * went stale, stays as it is on disk with its .url file, for the next run.
 * When it was still the temporary, the outfile is finished (FILE is not
 * touched); otherwise the temporary of this run's new bytes is finished as
 * outfile_finish() says.  A no-op without such a partial. */
void outfile_partial_hold(outfile *f);

/* An unlinked temporary file in $TMPDIR (or /tmp), read-write, close on
 * exec; -1 with errno. */
int outfile_spool_fd(void);
/* Where those go: $TMPDIR (a relative one from the current folder, as
 * mktemp(1) and sort(1) take it: luaretry never changes folder), else
 * /tmp. */
const char *outfile_spool_dir(void);
/* The same for a message: "DIR (TMPDIR)", "DIR (TMPDIR, relative to
 * CWD)" or "/tmp", escaped; valid until the next call. */
const char *outfile_spool_named(void);
/* Whether the file system of spool fd keeps room to grow by `more` bytes
 * (the next look's 16 MiB, or a body about to be copied in) and still
 * have 1/20 of it free; 1 when it cannot be told. */
int outfile_spool_room(int fd, unsigned long long more);

#endif
