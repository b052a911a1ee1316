/* cmdout.h: a command's output passed on to one of ours (standard output
 * with --stdout=live, standard error always) without ever waiting for its
 * reader, so that the attempt's timeout and the deadline are watched while
 * that reader is slow or stuck (command.c).
 *
 * Up to CMDOUT_SIZE bytes are held, in the order they came; while that is
 * full the caller stops reading the command's pipe, and the command waits
 * to write as it would on a full pipe of its own.  The writes never block:
 * a pipe, FIFO or terminal is written through a description of our own
 * (/proc/self/fd/N reopened with O_NONBLOCK: the descriptor's own flags
 * are shared with the shell and every other process that has it, and must
 * not change), a socket with MSG_DONTWAIT; a regular file never fills.
 * Error output goes on in whole lines (a line ends at \n or \r; one longer
 * than CMDOUT_LINE passes in pieces), so luaretry's own lines, written
 * between attempts, never split one. */
#ifndef LUARETRY_CLI_CMDOUT_H
#define LUARETRY_CLI_CMDOUT_H

#include <poll.h>
#include <stddef.h>

#define CMDOUT_SIZE (64 * 1024)
#define CMDOUT_LINE 4096

typedef struct {
  int fd;                    /* ours, as given */
  int wfd;                   /* what is written: fd, or our own description of it */
  int own;                   /* wfd is ours to close */
  int how;                   /* how a write is made (cmdout.c) */
  int lines;                 /* whole lines at a time */
  char buf[CMDOUT_SIZE + 1]; /* +1: the line end a partial last line gets */
  size_t off, len;           /* held: buf[off, off + len) */
  size_t ready;              /* of them, what may be written now */
  int put_mid;               /* the last byte held does not end a line */
  int wrote_mid;             /* the last byte written does not end a line */
  int err;                   /* the first write error's errno; what follows is dropped */
} cmdout;

/* Sets o up to write to fd (whole lines if `lines`). */
void cmdout_open(cmdout *o, int fd, int lines);
void cmdout_close(cmdout *o);
/* How many bytes cmdout_put takes now (after a write error: any number,
 * dropped). */
size_t cmdout_room(const cmdout *o);
/* Holds n bytes (at most cmdout_room) and writes what can go now. */
void cmdout_put(cmdout *o, const char *s, size_t n);
/* The command's output ended: a partial last line gets its line end. */
void cmdout_end_line(cmdout *o);
/* Writes what is held and can go now. */
void cmdout_flush(cmdout *o);
/* 1 with *p filled when o waits for its descriptor to take more. */
int cmdout_poll(const cmdout *o, struct pollfd *p);
/* Drops what is held (one last try to end a line that was cut, so what
 * luaretry writes next starts its own); how many bytes were dropped. */
size_t cmdout_drop(cmdout *o);

#endif
