/* redis_helper.h: a real redis-server (Debian's) for the fleet tests, on a
 * loopback port and a Unix socket in a temporary folder, without
 * persistence (--save '' --appendonly no), stopped by its PID.  Every wait
 * is bounded in rounds and time.  The server dies with the test (parent
 * death signal), so a crashed test leaves none behind.
 *
 *   redis_srv s;  redis_start(&s, extra_args..., NULL)   0 or -1 (message on stderr)
 *   s.auth = "pw" after --requirepass pw, for redis_cmd
 *   redis_cmd(&s, "SCRIPT FLUSH")                  a reply via hiredis, or NULL
 *   redis_signal(&s, SIGSTOP / SIGCONT)
 *   redis_stop(&s)  (SIGTERM, then SIGKILL after 5 s), redis_restart(&s)
 * Include from one translation unit. */
#ifndef LUARETRY_REDIS_HELPER_H
#define LUARETRY_REDIS_HELPER_H

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#define REDIS_EXTRA_MAX 8

typedef struct {
  pid_t pid;
  int port;
  char dir[64], sock[128];
  const char *extra[REDIS_EXTRA_MAX + 1];
  const char *auth; /* the helper's own AUTH password, or NULL */
} redis_srv;

static double redis_now_(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void redis_sleep_ms(int ms) {
  struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* A loopback port nobody listens on right now. */
static int redis_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

static redisContext *redis_connect_(const redis_srv *s) {
  struct timeval tv = { 1, 0 };
  redisContext *c = redisConnectUnixWithTimeout(s->sock, tv);
  if (!c || c->err || redisSetTimeout(c, tv) != REDIS_OK) {
    if (c) redisFree(c);
    return NULL;
  }
  if (s->auth) {
    redisReply *r = redisCommand(c, "AUTH %s", s->auth);
    if (r) freeReplyObject(r);
  }
  return c;
}

/* One command (printf-like, hiredis's format); NULL when it failed. */
static redisReply *redis_cmd(const redis_srv *s, const char *fmt, ...) __attribute__((unused));
static redisReply *redis_cmd(const redis_srv *s, const char *fmt, ...) {
  redisContext *c = redis_connect_(s);
  if (!c) return NULL;
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(c, fmt, ap);
  va_end(ap);
  redisFree(c);
  return r;
}

static int redis_ready_(const redis_srv *s) {
  redisContext *c = redis_connect_(s);
  if (!c) return 0;
  redisReply *r = redisCommand(c, "PING");
  int ok = r != NULL; /* PONG, or NOAUTH from a server with a password: up */
  if (r) freeReplyObject(r);
  redisFree(c);
  return ok;
}

static int redis_spawn_(redis_srv *s) {
  char port[16], logfile[96];
  snprintf(port, sizeof port, "%d", s->port);
  snprintf(logfile, sizeof logfile, "%s/redis.log", s->dir);
  const char *argv[32] = { "redis-server",
                           "--port",
                           port,
                           "--bind",
                           "127.0.0.1",
                           "--save",
                           "",
                           "--appendonly",
                           "no",
                           "--dir",
                           s->dir,
                           "--unixsocket",
                           s->sock,
                           "--unixsocketperm",
                           "700",
                           "--logfile",
                           logfile,
                           "--daemonize",
                           "no" };
  int n = 19;
  for (int i = 0; s->extra[i] && n < 31; i++) argv[n++] = s->extra[i];
  argv[n] = NULL;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    execvp("redis-server", (char *const *)argv);
    _exit(127);
  }
  s->pid = pid;
  double until = redis_now_() + 5;
  for (int i = 0; i < 500 && redis_now_() < until; i++) {
    if (redis_ready_(s)) return 0;
    if (waitpid(pid, NULL, WNOHANG) == pid) break;
    redis_sleep_ms(10);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  s->pid = 0;
  return -1;
}

/* Extra arguments (e.g. "--requirepass", "pw"), NULL-terminated. */
static int redis_start(redis_srv *s, ...) __attribute__((unused, sentinel));
static int redis_start(redis_srv *s, ...) {
  memset(s, 0, sizeof *s);
  snprintf(s->dir, sizeof s->dir, "/tmp/luaretry-redis-XXXXXX");
  if (!mkdtemp(s->dir)) return -1;
  snprintf(s->sock, sizeof s->sock, "%s/redis.sock", s->dir);
  va_list ap;
  va_start(ap, s);
  for (int i = 0; i < REDIS_EXTRA_MAX; i++)
    if (!(s->extra[i] = va_arg(ap, const char *))) break;
  va_end(ap);
  for (int tries = 0; tries < 3; tries++) { /* a port may be taken meanwhile */
    s->port = redis_free_port();
    if (s->port > 0 && redis_spawn_(s) == 0) return 0;
  }
  fprintf(stderr, "redis_helper: redis-server did not start (see %s/redis.log)\n", s->dir);
  return -1;
}

static void redis_signal(redis_srv *s, int sig) __attribute__((unused));
static void redis_signal(redis_srv *s, int sig) {
  if (s->pid > 0) kill(s->pid, sig);
}

/* Stops it by its PID: SIGTERM (SIGKILL with hard), bounded. */
static void redis_halt(redis_srv *s, int hard) {
  if (s->pid <= 0) return;
  kill(s->pid, SIGCONT); /* a stopped server cannot act on SIGTERM */
  kill(s->pid, hard ? SIGKILL : SIGTERM);
  double until = redis_now_() + 5;
  for (int i = 0; i < 1000; i++) {
    if (waitpid(s->pid, NULL, WNOHANG) == s->pid) break;
    if (redis_now_() > until) {
      kill(s->pid, SIGKILL);
      waitpid(s->pid, NULL, 0);
      break;
    }
    redis_sleep_ms(5);
  }
  s->pid = 0;
  unlink(s->sock);
}

/* The same server again, same port and socket. */
static int redis_restart(redis_srv *s) __attribute__((unused));
static int redis_restart(redis_srv *s) {
  redis_halt(s, 1);
  return redis_spawn_(s);
}

static void redis_stop(redis_srv *s) {
  redis_halt(s, 0);
  char path[128];
  snprintf(path, sizeof path, "%s/redis.log", s->dir);
  unlink(path);
  unlink(s->sock);
  rmdir(s->dir);
}

#endif
