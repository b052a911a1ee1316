/* foreground.c: the terminal lent to a command's process group when it
 * asks for it (foreground.h says when and why). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "foreground.h"

void fg_open(fg_term *t) {
  memset(t, 0, sizeof *t);
  /* O_NONBLOCK: a terminal line that waits for its carrier never holds
   * the open; the descriptor is only for tcsetpgrp and the modes */
  t->fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
}

void fg_close(fg_term *t) {
  if (t->fd >= 0) close(t->fd);
  t->fd = -1;
}

/* The terminal to group pgid, when it is luaretry's group's now; 1 if so. */
static int lend(fg_term *t, pid_t pgid) {
  if (t->fd < 0 || t->lent_to || tcgetpgrp(t->fd) != getpgrp()) return 0;
  /* a process of a background group that sets the foreground (or writes
   * under `stty tostop`) is stopped unless it blocks SIGTTOU */
  sigset_t ttou;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  sigprocmask(SIG_BLOCK, &ttou, &t->mask);
  t->has_modes = tcgetattr(t->fd, &t->modes) == 0;
  if (tcsetpgrp(t->fd, pgid) != 0) { /* the group is gone already */
    sigprocmask(SIG_SETMASK, &t->mask, NULL);
    return 0;
  }
  t->lent_to = pgid;
  return 1;
}

/* The terminal luaretry's group's again, SIGTTOU as it was. */
static void reclaim(fg_term *t, int restore) {
  tcsetpgrp(t->fd, getpgrp());
  if (restore && t->has_modes) tcsetattr(t->fd, TCSANOW, &t->modes);
  sigprocmask(SIG_SETMASK, &t->mask, NULL);
  t->lent_to = 0;
}

int fg_take_back(fg_term *t, int restore) {
  if (!t->lent_to) return 0;
  reclaim(t, restore);
  /* a process of our own group that read the terminal meanwhile (a pager
   * after `|`) was stopped: continued, as a shell's `fg` continues its
   * job; one that was not stopped ignores SIGCONT */
  kill(0, SIGCONT);
  return 1;
}

/* Stops luaretry's job with `sig`, as the terminal would have stopped it;
 * 1 when a SIGCONT (`fg` or `bg`) ended that stop, 0 when the stop was
 * discarded (an orphaned group's, or a signal ignored since the start).
 * Every thread blocks SIGCONT (main.c), so the one that ended the stop is
 * pending when kill returns, however short the stop was. */
static int stop_job(int sig) {
  sigset_t cont;
  sigemptyset(&cont);
  sigaddset(&cont, SIGCONT);
  struct timespec zero = { 0, 0 };
  while (sigtimedwait(&cont, NULL, &zero) == SIGCONT) {
    /* one from before (fg_take_back's, a shell's) */
  }
  kill(0, sig); /* delivered to this thread, and the job stopped, before kill returns */
  return sigtimedwait(&cont, NULL, &zero) == SIGCONT;
}

/* Whether process pid is stopped now: a stop reported once a SIGCONT
 * ended it (a group's members all report the same Ctrl-Z) is no news. */
static int stopped_now(pid_t pid) {
  char path[64], stat[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, stat, sizeof stat - 1);
  close(fd);
  stat[n > 0 ? n : 0] = '\0';
  const char *end = strrchr(stat, ')'); /* the name may hold anything */
  return end && end[1] == ' ' && (end[2] == 'T' || end[2] == 't');
}

void fg_stopped(fg_term *t, pid_t pgid, pid_t pid, int sig) {
  int wants = sig == SIGTTIN || sig == SIGTTOU; /* the terminal, from the background */
  if (t->fd < 0 || (!t->lent_to && !wants) || !stopped_now(pid)) return;
  if (!t->lent_to && lend(t, pgid)) {
    kill(-pgid, SIGCONT);
    return;
  }
  /* the terminal's job stopped (Ctrl-Z, or a program suspending itself),
   * or it asks for the terminal while luaretry is in the background:
   * luaretry's job stops too.  The group's modes (a pager's raw mode) are
   * kept for its return; ours go back while the shell has the terminal. */
  struct termios theirs;
  int own_modes = t->lent_to && tcgetattr(t->fd, &theirs) == 0;
  if (t->lent_to) reclaim(t, 1);
  int continued = stop_job(wants ? sig : SIGTSTP);
  if (lend(t, pgid)) { /* `fg`, or the stop discarded in the foreground */
    if (own_modes) tcsetattr(t->fd, TCSANOW, &theirs);
  } else if (!continued) {
    return; /* in the background, and nobody can `fg` us: its timeout ends it */
  }
  kill(-pgid, SIGCONT);
}
