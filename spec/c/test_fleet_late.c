/* test_fleet_late.c: a Redis reply that arrived within its round trip's
 * deadline while the reading thread was not running (a busy machine, a
 * SIGSTOP, a paused VM) is read, not called "no reply in time"; a reply
 * that never came still is.  On a socketpair, the server's side written
 * by the test: no Redis. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#include "fleet.h"
#include "fleet_internal.h"
#include "check.h"

static const char PONG[] = "+PONG\r\n";

static void conn_on(lr_redis_conn *c, int fd) {
  lr_conn_init(c);
  c->fd = fd;
  c->reader = lr_reply_reader_new();
}

static void sleep_ms(long ms) {
  struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
  while (nanosleep(&t, &t) != 0) {
  }
}

/* The process's state letter in /proc/PID/stat ('S': asleep), or 0. */
static char state_of(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')'); /* the name may hold spaces */
  return paren && paren[1] == ' ' ? paren[2] : 0;
}

/* The reader's deadline passed with the reply already in the socket: a
 * round trip with a cancel looks at the clock before its first read. */
static void test_reply_there_at_the_deadline(void) {
  int sv[2];
  if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0)) return;
  lr_redis_conn c;
  conn_on(&c, sv[0]);
  lr_waiter w;
  lr_waiter_init(&w);
  c.cancel = &w;
  CHECK(write(sv[1], PONG, sizeof PONG - 1) == (ssize_t)(sizeof PONG - 1));
  redisReply *r = NULL;
  char err[200] = "";
  CHECK_EQ_INT(lr_conn_read(&c, lr_monotonic_ms() - 1, &r, err, sizeof err), LR_FLEET_OK);
  if (CHECK(r != NULL)) {
    CHECK_EQ_STR(r->str, "PONG");
    freeReplyObject(r);
  }
  /* nothing sent: late is late, at once */
  r = NULL;
  CHECK_EQ_INT(lr_conn_read(&c, lr_monotonic_ms() - 1, &r, err, sizeof err), LR_FLEET_E_TIMEOUT);
  CHECK(r == NULL);
  CHECK_CONTAINS(err, "receiving: no reply in time");
  lr_waiter_close(&w);
  lr_conn_free(&c);
  close(sv[1]);
}

/* The reader, in a child, waits with a 300 ms deadline; it is stopped
 * once asleep in that wait, the reply written at once, and the child let
 * go on 1 s later.  Its exit: 0 the reply read, 1 anything else. */
static int reader_child(int fd, int ready_fd) {
  lr_redis_conn c;
  conn_on(&c, fd);
  int64_t deadline = lr_monotonic_ms() + 300;
  if (write(ready_fd, "r", 1) != 1) return 2;
  redisReply *r = NULL;
  char err[200] = "";
  lr_fleet_code rc = lr_conn_read(&c, deadline, &r, err, sizeof err);
  int ok = rc == LR_FLEET_OK && r && r->str && strcmp(r->str, "PONG") == 0;
  if (!ok) fprintf(stderr, "test_fleet_late: the stopped reader: code %d: %s\n", (int)rc, err);
  if (r) freeReplyObject(r);
  lr_conn_free(&c);
  return ok ? 0 : 1;
}

static void test_reader_stopped_while_the_reply_came(void) {
  int sv[2], ready[2];
  if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0 && pipe(ready) == 0)) return;
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[1]), close(ready[0]);
    _exit(reader_child(sv[0], ready[1]));
  }
  if (!CHECK(pid > 0)) return;
  close(sv[0]), close(ready[1]);
  char b;
  int waiting = read(ready[0], &b, 1) == 1;
  /* asleep in its wait for the reply: bounded, 10 s */
  for (int i = 0; waiting && i < 2000 && state_of(pid) != 'S'; i++) sleep_ms(5);
  CHECK(waiting && state_of(pid) == 'S');
  CHECK(kill(pid, SIGSTOP) == 0);
  CHECK(write(sv[1], PONG, sizeof PONG - 1) == (ssize_t)(sizeof PONG - 1));
  sleep_ms(1000); /* past the child's deadline, its reply long there */
  CHECK(kill(pid, SIGCONT) == 0);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(sv[1]), close(ready[0]);
}

int main(void) {
  alarm(60);
  test_reply_there_at_the_deadline();
  test_reader_stopped_while_the_reply_came();
  return check_done();
}
