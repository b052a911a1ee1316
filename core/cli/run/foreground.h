/* foreground.h: the terminal lent to a command's process group when it
 * asks for it, as a job-control shell lends it to a job.
 *
 * Each attempt runs in a process group of its own (command.c), so that
 * its timeout can stop the whole group.  A group that is not the
 * terminal's foreground and reads the terminal (a password prompt), or
 * sets its modes (echo off), is stopped by the kernel: SIGTTIN or SIGTTOU
 * to the whole group, so its leader, luaretry's child, stops too.  When
 * luaretry's own group is the terminal's foreground, that stop lends the
 * terminal to the attempt's group (tcsetpgrp, SIGTTOU blocked meanwhile,
 * as shells do), which is continued; it has the terminal until it is
 * gone, however it ended, and its modes are put back when it did not end
 * on its own (a prompt killed at its timeout leaves echo off).
 *
 * Only on demand: a command that never touches the terminal leaves it to
 * luaretry's group, where a pager after `luaretry ... |` reads it (lent
 * from the start, the pager would stop, and a command writing to it
 * through --stdout=live would wait on its full pipe until its timeout).
 *
 * While the group has the terminal what it sends is the group's: Ctrl-C
 * reaches the command, not luaretry, so a command that Ctrl-C (SIGINT) or
 * Ctrl-\ (SIGQUIT) killed is taken for the user's stop of the run, as
 * bash takes a foreground job's (command.c); Ctrl-Z stops the group, and
 * luaretry's own group stops with it, so the shell sees its job stopped
 * (`fg` lends the terminal again and continues the group).  A group that
 * asks for the terminal while luaretry is in the background stops
 * luaretry's job the same way, as a background job that reads it stops. */
#ifndef LUARETRY_CLI_FOREGROUND_H
#define LUARETRY_CLI_FOREGROUND_H

#include <signal.h>
#include <sys/types.h>
#include <termios.h>

typedef struct {
  int fd;        /* the controlling terminal (/dev/tty); -1: none */
  pid_t lent_to; /* the group that has it; 0: luaretry's */
  int has_modes; /* `modes` read when it was lent */
  struct termios modes;
  sigset_t mask; /* luaretry's signal mask before SIGTTOU was blocked */
} fg_term;

/* Opens the controlling terminal, if there is one (t->fd -1 if not). */
void fg_open(fg_term *t);
void fg_close(fg_term *t);
/* Process pid of group pgid, a child of luaretry's (the group's leader,
 * or an orphan it adopted), stopped with signal `sig`: the terminal lent
 * and the group continued, or luaretry's job stopped with it (above).  A
 * stop of a group that neither has the terminal nor asks for it
 * (someone's kill -STOP) is left as it is: its timeout ends it. */
void fg_stopped(fg_term *t, pid_t pgid, pid_t pid, int sig);
/* The group is gone: the terminal is luaretry's again (its modes put
 * back if `restore`), and a process of luaretry's own group stopped for
 * reading it meanwhile (a pager) is continued.  1 when the group had it. */
int fg_take_back(fg_term *t, int restore);

#endif
