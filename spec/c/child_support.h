/* child_support.h: the fork tests' wait for a child, bounded: a child
 * that hangs (the defect some of them look for) is killed and fails. */
#ifndef CHILD_SUPPORT_H
#define CHILD_SUPPORT_H

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>

static inline void sleep_ms(long ms) {
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
}

/* The child's exit status, 0 when it passed (exit 0); one still running
 * after limit_s seconds is killed: it hung. */
static inline int child_status_within(pid_t pid, const char *what, int limit_s) {
  int status = 0;
  for (int i = 0; i < limit_s * 100; i++) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
      fprintf(stderr, "  %s: the child ended with status %d\n", what, status);
      return 1;
    }
    sleep_ms(10);
  }
  fprintf(stderr, "  %s: the child still runs after %d s: it hung\n", what, limit_s);
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return 1;
}

#endif
