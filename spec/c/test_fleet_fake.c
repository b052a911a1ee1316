/* test_fleet_fake.c: the fleet against a fake Redis on loopback (a thread
 * here), for what a real redis-server cannot be made to do.
 *
 * A script's EVALSHA and the EVAL that follows its NOSCRIPT share one
 * fleet.command_timeout (luaretry(1) --stats; fleet.h's cost model): a
 * question to Redis never waits two timeouts.  The fake answers NOSCRIPT
 * to the question's EVALSHA after most of the command timeout and never
 * answers the EVAL; the question must end within one timeout of the
 * moment the EVALSHA reached the fake (asserted below 1.5 timeouts: two
 * timeouts would end past 1.6).  Both the sync's script and the
 * reserve's (reserve.c).  A run in which the NOSCRIPT came too late for
 * the EVAL to be sent (a very busy machine) proves nothing and is run
 * again, 4 times at most.
 *
 * The reserve's answer in the sync before a retry (redis_script.c, issue
 * 33): a value no script answers (3) is a broken reply, never a retry of
 * the reserve: the local guards decide, said once, and reserve.c's own
 * question is not asked of a Redis that garbles. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fleet_internal.h"
#include "remote_guard.h" /* lr_fleet_remote_ops */
#include "check.h"
#include "fleet_handle.h"

#define TIMEOUT_MS  1000 /* large, so that a busy machine cannot blur 1x from 2x */
#define NOSCRIPT_MS 600  /* most of it: two timeouts would end at 1.6x */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
  struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* What the fake answers the sync's script (4 keys): */
enum {
  SYNC_QUESTION, /* NOSCRIPT late, the EVAL never: the sync is the question */
  SYNC_GOOD,     /* well: the reserve's script (1 key) is the question */
  SYNC_GARBLED   /* the budget spent, and the reserve's answer 3 when asked */
};

typedef struct {
  int lfd;
  int mode; /* SYNC_* */
  pthread_t thread;
  atomic_int stop, eval_seen, reserve_asked, one_key;
  _Atomic double asked_at; /* when the question's EVALSHA came (CLOCK_MONOTONIC s), 0: not yet */
} fake;

/* One whole command at the start of buf[0..n): its length, its first and
 * third words (name, numkeys) in name and keys, and whether the sync
 * script's ARGV[22] (its 29th word: the reserve's interval) is above 0 in
 * *asked; 0 when incomplete. */
static size_t command(const char *buf, size_t n, char name[16], char keys[8], int *asked) {
  const char *p = buf, *end = buf + n;
  char *e;
  if (n < 4 || *p != '*') return 0;
  long argc = strtol(p + 1, &e, 10);
  if (e + 2 > end || e[0] != '\r') return 0;
  p = e + 2;
  name[0] = keys[0] = '\0';
  *asked = 0;
  for (long i = 0; i < argc; i++) {
    if (p >= end || *p != '$') return 0;
    long len = strtol(p + 1, &e, 10);
    if (e + 2 > end) return 0;
    p = e + 2;
    if (p + len + 2 > end) return 0;
    if (i == 0) snprintf(name, 16, "%.*s", (int)(len < 15 ? len : 15), p);
    if (i == 2) snprintf(keys, 8, "%.*s", (int)(len < 7 ? len : 7), p);
    if (i == 28) *asked = len > 0 && *p != '0';
    p += len + 2;
  }
  return (size_t)(p - buf);
}

static void say(int fd, const char *s) {
  if (write(fd, s, strlen(s)) < 0) perror("fake redis: write");
}

/* The fleet script's answer: `tokens` (milli) of 10, the breaker closed,
 * no block, `reserve` the reserve's answer. */
static void sync_answer(int fd, int tokens, int reserve) {
  char s[300];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  snprintf(s, sizeof s,
           "*12\r\n:%d\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:%lld\r\n:0\r\n:0\r\n:0\r\n:0\r\n:%d\r\n",
           tokens, now, reserve);
  say(fd, s);
}

static void *fake_run(void *arg) {
  fake *k = arg;
  int fd = -1;
  static char buf[1 << 18];
  size_t have = 0;
  for (int round = 0; round < 1000 && !atomic_load(&k->stop); round++) { /* 20 s at most */
    struct pollfd p = { fd >= 0 ? fd : k->lfd, POLLIN, 0 };
    if (poll(&p, 1, 20) <= 0) continue;
    if (fd < 0) {
      fd = accept(k->lfd, NULL, NULL);
      continue;
    }
    ssize_t got = read(fd, buf + have, sizeof buf - have);
    if (got <= 0) break;
    have += (size_t)got;
    char name[16], keys[8];
    int asked;
    size_t used;
    while ((used = command(buf, have, name, keys, &asked)) > 0) {
      memmove(buf, buf + used, have - used);
      have -= used;
      int sync = strcmp(keys, "4") == 0;
      if (!sync && strncmp(name, "EVAL", 4) == 0) atomic_store(&k->one_key, 1);
      if (k->mode == SYNC_GARBLED && sync) {
        if (asked) atomic_store(&k->reserve_asked, 1);
        sync_answer(fd, 0, asked ? 3 : 0);
      } else if (k->mode == SYNC_GARBLED) {
        say(fd, ":1\r\n"); /* the reserve's own question, which must not come */
      } else if (strcmp(name, "EVAL") == 0) {
        atomic_store(&k->eval_seen, 1); /* never answered */
      } else if (strcmp(name, "EVALSHA") == 0 && k->mode == SYNC_GOOD && sync) {
        sync_answer(fd, 10000, 0);
      } else if (strcmp(name, "EVALSHA") == 0) {
        atomic_store(&k->asked_at, now_s());
        sleep_ms(NOSCRIPT_MS);
        say(fd, "-NOSCRIPT No matching script. Please use EVAL.\r\n");
      } else {
        say(fd, "+OK\r\n");
      }
    }
  }
  if (fd >= 0) close(fd);
  return NULL;
}

static int fake_start(fake *k, int mode, int *port) {
  memset(k, 0, sizeof *k);
  k->mode = mode;
  k->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (k->lfd < 0 || bind(k->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(k->lfd, 4) != 0 ||
      getsockname(k->lfd, (struct sockaddr *)&a, &len) != 0 ||
      pthread_create(&k->thread, NULL, fake_run, k) != 0) {
    if (k->lfd >= 0) close(k->lfd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return 0;
}

static void fake_stop(fake *k) {
  atomic_store(&k->stop, 1);
  pthread_join(k->thread, NULL);
  close(k->lfd);
}

/* The budget both cases share (10 tokens, 0.1 back per success), with
 * the fake's timeouts, and the reserve on or off. */
static lr_fleet_settings budget_settings(int reserve) {
  lr_fleet_settings s;
  lr_fleet_settings_init(&s);
  s.budget = 1;
  s.max_tokens = 10;
  s.token_ratio = 0.1;
  s.reserve = reserve ? 1 : 0;
  s.connect_timeout_ms = TIMEOUT_MS;
  s.command_timeout_ms = TIMEOUT_MS;
  return s;
}

/* One question (the sync's script, or with reserve the reserve's after a
 * good sync) against the fake: 1 when it proved something (the EVAL was
 * sent), and then its end within one timeout of the EVALSHA checked. */
static int one_question(int reserve) {
  fake k;
  int port = 0;
  if (!CHECK(fake_start(&k, reserve ? SYNC_GOOD : SYNC_QUESTION, &port) == 0)) return 1;
  char url[100];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
  lr_fleet_settings s = budget_settings(reserve);
  s.member = "host-a:1";
  lr_fleet *f = NULL;
  char err[300] = "";
  if (!CHECK_EQ_INT(lr_fleet_new(url, "noscript", &s, &f, err, sizeof err), LR_FLEET_OK)) {
    fake_stop(&k);
    return 1;
  }
  if (reserve) {
    CHECK_EQ_INT(lr_fleet_sync_now(f), LR_FLEET_OK);
    CHECK_EQ_INT(lr_fleet_reserve_take(f, 0, NULL), LR_FLEET_LOCAL); /* timed out: local */
  } else {
    CHECK_EQ_INT(lr_fleet_sync_now(f), LR_FLEET_E_TIMEOUT);
  }
  double ended = now_s(), asked = atomic_load(&k.asked_at);
  int proved = atomic_load(&k.eval_seen);
  fake_stop(&k);
  lr_fleet_free(f);
  if (!proved) {
    fprintf(stderr, "  %s: the NOSCRIPT came too late for an EVAL (a busy machine): again\n",
            reserve ? "reserve" : "sync");
    return 0;
  }
  double took = ended - asked, bound = 1.5 * TIMEOUT_MS / 1000.0;
  if (!CHECK(asked > 0 && took < bound))
    fprintf(stderr, "  %s: ended %.3f s after the EVALSHA reached Redis (bound %.3f s)\n",
            reserve ? "reserve" : "sync", took, bound);
  /* it did wait for the NOSCRIPT and the EVAL: not cut short */
  CHECK(took >= NOSCRIPT_MS / 1000.0);
  return 1;
}

static void shared_timeout(int reserve) {
  int proved = 0;
  for (int i = 0; i < 4 && !proved; i++) proved = one_question(reserve);
  CHECK(proved);
}

static void garbled_reserve(void) {
  fake k;
  int port = 0;
  if (!CHECK(fake_start(&k, SYNC_GARBLED, &port) == 0)) return;
  char url[100];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
  lr_fleet_settings s = budget_settings(1);
  s.sync_ms = 10000;
  logbook log;
  logbook_init(&log);
  lr_fleet *f = handle(url, "garbled", "host-a:1", s, &log);
  if (!f) {
    fake_stop(&k);
    return;
  }
  lr_waiter w;
  lr_waiter_init(&w);
  atomic_store(&w.blocking, 1);
  const lr_remote_ops *ops = &lr_fleet_remote_ops;
  CHECK_EQ_INT(lr_fleet_sync_now(f), LR_FLEET_OK); /* the budget spent, nothing asked */
  CHECK_EQ_INT(lr_fleet_budget_allows_retry(f), 0);
  /* a retry the tokens refused, after its wait: its sync asks the
   * reserve, and the answer is 3 */
  lr_fleet_record(f, LR_FLEET_FAILURE);
  CHECK_EQ_INT(ops->refresh(f, 0, 0, &w, 1), LR_REMOTE_LOCAL);
  CHECK(atomic_load(&k.reserve_asked));
  CHECK_EQ_INT(lr_fleet_budget_allows_retry(f), LR_FLEET_LOCAL);
  CHECK_EQ_INT(ops->reserve_take(f, 0, 0, &w), LR_REMOTE_LOCAL); /* not asked: local */
  lr_fleet_tell(f);
  CHECK_EQ_INT(log.n, 1);
  CHECK_CONTAINS(log.line[0], "a reserve answer other than 0, 1 or 2");
  CHECK_CONTAINS(log.line[0], "local guards decide");
  fake_stop(&k);
  CHECK(!atomic_load(&k.one_key)); /* reserve.c's script never reached the fake */
  lr_waiter_close(&w);
  lr_fleet_free(f);
}

int main(void) {
  shared_timeout(0);
  shared_timeout(1);
  garbled_reserve();
  return check_done();
}
