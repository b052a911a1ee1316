/* test_fleet_lease.c: the budget's leases (core/fleet/budget_lease.c)
 * against a real redis-server, where answers get lost and settings
 * change: each failure a block paid is charged to the fleet's tokens once,
 * however many sync answers are lost in a row (applied by Redis or not),
 * and a reload that lowers max_tokens below the tokens out in blocks takes
 * them back at its next sync instead of reading as a broken reply.
 *
 * Two ways to lose an answer: lease_round runs one sync as sync.c does
 * (the real take, script and settle) and skips the settle (LOST) or the
 * script (DROPPED); the dropper is a proxy on loopback that swallows the
 * fleet script's replies, so that the handle's own syncs time out after
 * Redis applied them.  Every loop is bounded in rounds and time. */
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fleet_internal.h" /* the lease's take, script and settle, run as a sync would */
#include "check.h"
#include "redis_helper.h"
#include "fleet_handle.h"

static lr_fleet_settings test_settings(void) {
  lr_fleet_settings s;
  lr_fleet_settings_init(&s);
  s.budget = 1;
  s.max_tokens = 100; /* half 50, a block of 12 at most */
  s.token_ratio = 0;
  s.breaker = 0;
  s.connect_timeout_ms = 300;
  s.command_timeout_ms = 250; /* generous: the ASan build is slower */
  s.sync_ms = 50;
  s.reconnect_min_ms = 50;
  s.reconnect_max_ms = 100;
  return s;
}

static redis_srv SRV;
static char URL[160];

static void reset(lr_fleet *f) {
  char err[300] = "";
  if (!CHECK_EQ_INT(lr_fleet_reset(f, err, sizeof err), LR_FLEET_OK))
    fprintf(stderr, "  reset: %s\n", err);
}

static lr_fleet_status status_of(lr_fleet *f) {
  lr_fleet_status st;
  char err[300] = "";
  if (!CHECK_EQ_INT(lr_fleet_status_get(f, &st, err, sizeof err), LR_FLEET_OK))
    fprintf(stderr, "  status: %s\n", err);
  return st;
}

/* One sync of f's lease as sync.c makes it (lr_budget_lease_take, the
 * script, lr_budget_lease_settle), wanting a block of `want` milli, with
 * f's own settings.  how: READ; LOST, Redis applied it but its answer
 * is never read; DROPPED, it never reached Redis.  f->lease_closing is
 * set by the caller, so no timer is armed. */
enum { READ, LOST, DROPPED };
static lr_fleet_code lease_round(lr_fleet *f, long long want, int how, lr_fleet_reply *out) {
  lr_fleet_limits l;
  memset(&l, 0, sizeof l);
  l.budget = 1; /* the handle's settings (sync.c's limits_of), so its cfg is theirs */
  l.max_milli = atomic_load(&f->max_milli);
  l.ratio_milli = atomic_load(&f->ratio_milli);
  l.open_ms = atomic_load(&f->open_ms);
  l.probes = atomic_load(&f->probes);
  l.reserve_milli = atomic_load(&f->reserve_milli);
  l.cost_milli = atomic_load(&f->cost_milli);
  l.ttl_ms = 3600000;
  lr_fleet_batch b;
  memset(&b, 0, sizeof b);
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&f->io);
  lr_budget_lease_take(f, &b, lr_monotonic_ms());
  b.lwant = want;
  b.spent = atomic_exchange(&f->spent, 0); /* failures no block paid */
  const char *keys[LR_FLEET_KEYS] = { f->key, f->procs_key, f->leases_key, f->lexp_key };
  char err[300] = "";
  lr_fleet_code rc = LR_FLEET_OK;
  if (how != DROPPED)
    rc = lr_redis_script_run(&f->script, &f->conn, &f->url, keys, f->member, f->owner, &l, &b,
                             lr_monotonic_ms() + 1000, out, err, sizeof err);
  if (rc == LR_FLEET_OK && how == READ) lr_budget_lease_settle(f, &b, out, NULL);
  pthread_mutex_unlock(&f->io);
  if (rc != LR_FLEET_OK) fprintf(stderr, "  lease_round: %s\n", err);
  return rc;
}

static void fail_times(lr_fleet *f, int n) {
  for (int i = 0; i < n; i++) lr_fleet_record(f, LR_FLEET_FAILURE);
}

/* One process's handle on an empty key, connected, its script loaded, and
 * no timer: the test makes each sync. */
static lr_fleet *lone_handle(const char *key) {
  lr_fleet *f = handle(URL, key, "host-a:1", test_settings(), NULL);
  reset(f);
  CHECK_EQ_INT(lr_fleet_sync_now(f), LR_FLEET_OK);
  f->lease_closing = 1;
  return f;
}

/* One answer lost at a time: a grant (not taken for spending), a
 * give-back that never reached Redis, a give-back applied whose answer
 * was lost (what was paid meanwhile is charged). */
static void test_lease_lost_answer(void) {
  lr_fleet *f = lone_handle("lease-lost");
  lr_fleet_reply r;
  /* a grant whose answer is lost: the process holds none, and the next
   * sync does not take the grant for spending */
  CHECK_EQ_INT(lease_round(f, 10000, LOST, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.lease, 10000);
  CHECK_EQ_INT(lease_round(f, 10000, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.lease, 10000);
  CHECK_EQ_INT(r.tokens + r.leased, 100000);
  /* 4 spent; a give-back that never reached Redis: the next sync
   * reckons from the block Redis kept */
  fail_times(f, 4);
  CHECK_EQ_INT(lease_round(f, 6000, DROPPED, &r), LR_FLEET_OK);
  CHECK_EQ_INT(lease_round(f, 6000, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.lease, 6000);
  CHECK_EQ_INT(r.tokens + r.leased, 96000);
  /* 2 spent, all given back, the answer lost; 1 spent since on the block
   * as the process saw it: counted, once */
  fail_times(f, 2);
  CHECK_EQ_INT(lease_round(f, 0, LOST, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.lease, 0);
  fail_times(f, 1);
  CHECK_EQ_INT(lease_round(f, 0, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.lease, 0);
  CHECK_EQ_INT(r.leased, 0);
  CHECK_EQ_INT(r.tokens, 100000 - 4000 - 2000 - 1000);
  lr_fleet_view v;
  lr_fleet_view_get(f, &v);
  CHECK_NEAR(v.lease, 0, 1e-9);
  lr_fleet_free(f);
}

/* Two answers lost in a row, the first a give-back: every failure the
 * process counted is charged to the fleet's tokens exactly once, those
 * it paid from a block Redis had already taken back too (issue 33). */
static void test_lease_two_lost_answers(void) {
  lr_fleet *f = lone_handle("lease-lost2");
  lr_fleet_reply r;
  CHECK_EQ_INT(lease_round(f, 10000, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.lease, 10000);
  fail_times(f, 2);                                       /* paid by the block: 8 left */
  CHECK_EQ_INT(lease_round(f, 0, LOST, &r), LR_FLEET_OK); /* all back; answer lost */
  CHECK_EQ_INT(r.lease, 0);
  fail_times(f, 3);                                       /* paid from 8 as the process sees it */
  CHECK_EQ_INT(lease_round(f, 0, LOST, &r), LR_FLEET_OK); /* lost again */
  fail_times(f, 1);
  CHECK_EQ_INT(lease_round(f, 0, READ, &r), LR_FLEET_OK); /* read */
  CHECK_EQ_INT(r.lease, 0);
  CHECK_EQ_INT(r.leased, 0);
  CHECK_EQ_INT(r.tokens, 100000 - 6 * 1000); /* 6 failures, each charged once */
  /* nothing is charged twice on later syncs */
  CHECK_EQ_INT(lease_round(f, 5000, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(lease_round(f, 5000, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.tokens + r.leased, 94000);
  /* grants lost twice, then failures no block paid (the process saw
   * none): charged once, and the grants are not taken for spending */
  CHECK_EQ_INT(lease_round(f, 0, READ, &r), LR_FLEET_OK);
  fail_times(f, 1);
  CHECK_EQ_INT(lease_round(f, 8000, LOST, &r), LR_FLEET_OK);
  CHECK_EQ_INT(lease_round(f, 12000, LOST, &r), LR_FLEET_OK);
  fail_times(f, 2);
  CHECK_EQ_INT(lease_round(f, 12000, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.lease, 12000);
  CHECK_EQ_INT(r.tokens + r.leased, 94000 - 3000);
  lr_fleet_status st = status_of(f);
  CHECK_EQ_INT(st.lease_holders, 1);
  lr_fleet_status_free(&st);
  fail_times(f, 4); /* paid by the block now read */
  CHECK_EQ_INT(lease_round(f, 0, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.leased, 0);
  CHECK_EQ_INT(r.tokens, 91000 - 4000);
  /* its empty block's entry stays with its total (10 paid by blocks), and holds none */
  redisReply *e = redis_cmd(&SRV, "HGET luaretry:{lease-lost2}:leases host-a:1");
  CHECK(e && e->type == REDIS_REPLY_STRING && strcmp(e->str, "0 10000") == 0);
  if (e) freeReplyObject(e);
  st = status_of(f);
  CHECK_EQ_INT(st.lease_holders, 0);
  lr_fleet_status_free(&st);
  lr_fleet_free(f);
}

/* A process's first block, given back before it drew on it, by a sync
 * whose answer is lost (or still on its way: a failure counted between
 * the sync's take and its answer is the same to Redis): the block is
 * still the process's as it sees it, and a failure it pays for is charged
 * at the next sync.  Redis had let the member's entry go with the block
 * (it had drawn nothing), and the next sync, finding no entry, took the
 * draw for one made while its entry expired and dropped it: the fleet's
 * tokens read one too many (fleet_lease_spec's "leases only the tokens
 * above half", final85: 15 for 14 after 2 failures). */
static void test_lease_given_back_before_any_draw(void) {
  lr_fleet *f = lone_handle("lease-first");
  lr_fleet_reply r;
  CHECK_EQ_INT(lease_round(f, 10000, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.lease, 10000);
  CHECK_EQ_INT(lease_round(f, 0, LOST, &r), LR_FLEET_OK); /* all back, nothing drawn */
  CHECK_EQ_INT(r.lease, 0);
  fail_times(f, 1); /* paid by the block as the process sees it */
  CHECK_EQ_INT(lease_round(f, 0, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.leased, 0);
  CHECK_EQ_INT(r.tokens, 100000 - 1000);
  /* charged once: later syncs leave it */
  CHECK_EQ_INT(lease_round(f, 0, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.tokens, 100000 - 1000);
  lr_fleet_free(f);
}

/* A reload lowers max_tokens below the tokens already out in blocks:
 * the next sync takes them back down to the tokens above its new half
 * (the fleet's bound holds at once), its reply is good (no "out of
 * range", the fleet's guards stay) (issue 33). */
static void test_lease_max_lowered(void) {
  lr_fleet_settings s = test_settings();
  logbook log;
  logbook_init(&log);
  lr_fleet *a = handle(URL, "lease-shrink", "host-a:1", s, &log);
  lr_fleet *b = handle(URL, "lease-shrink", "host-b:1", s, NULL);
  reset(a);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  a->lease_closing = b->lease_closing = 1;
  lr_fleet_reply r;
  CHECK_EQ_INT(lease_round(b, 12000, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(lease_round(a, 12000, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.leased, 24000);
  /* a reload of both to max_tokens 10: a syncs first (it synced last, so
   * its new settings stand) */
  s.max_tokens = 10;
  lr_fleet_configure(a, &s);
  lr_fleet_configure(b, &s);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  lr_fleet_view v;
  lr_fleet_view_get(a, &v);
  CHECK_EQ_INT(v.health, LR_FLEET_HEALTHY);
  CHECK(v.leased <= 5 + 1e-9);
  CHECK_EQ_INT(log.n, 0); /* nothing said: no broken reply */
  if (log.n) fprintf(stderr, "  said: %s\n", log.line[0]);
  lr_fleet_status st = status_of(a);
  /* down to the tokens above half (5): a's block back first, then 7 of
   * b's; the fleet's tokens cut to the new max_tokens */
  CHECK_NEAR(st.leased, 5, 1e-9);
  CHECK_NEAR(st.tokens, 10, 1e-9); /* (status's tokens count those out in leases) */
  CHECK_EQ_INT(st.lease_holders, 1);
  lr_fleet_status_free(&st);
  /* b spends 3 of the 12 it still thinks it holds; its next sync: the 3
   * from the 5 Redis kept, and back to a block of 1 */
  fail_times(b, 3);
  CHECK_EQ_INT(lease_round(b, 1000, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.lease, 1000);
  CHECK_EQ_INT(r.leased, 1000);
  CHECK_EQ_INT(r.tokens + r.leased, 10000 - 3000);
  /* a block sized before the reload (12) and kept while failures go on
   * is asked for within the new cap (10 / 8: 1) */
  lr_fleet_batch bt;
  memset(&bt, 0, sizeof bt);
  pthread_mutex_lock(&b->io);
  b->lease_closing = 0, b->lease_block = 12, b->lease_spent_at = lr_monotonic_ms();
  lr_budget_lease_take(b, &bt, lr_monotonic_ms());
  b->lease_closing = 1;
  pthread_mutex_unlock(&b->io);
  CHECK_EQ_INT(bt.lwant, 1000);
  lr_fleet_view_get(b, &v);
  CHECK(v.lease <= 1 + 1e-9);
  lr_fleet_free(a);
  lr_fleet_free(b);
}

/* ---- the dropper: a proxy that loses the fleet script's answers */

#define DROPPER_CONNS 8

typedef struct {
  int lfd, port;
  atomic_int drop; /* set: replies that are arrays (the script's) are swallowed */
  atomic_int stop;
  atomic_llong dropped;
  pthread_t thread;
} dropper;

static int listen_loopback(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 8) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

static int connect_redis(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)SRV.port);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

/* One thread, every connection polled: client to Redis as it comes; Redis
 * to client too, but for a reply that begins an array while drop is set
 * (one command is in flight on a connection at a time, so a read from
 * Redis on loopback is one whole reply).  A connection either side
 * closes is closed both sides. */
static void *dropper_run(void *arg) {
  dropper *d = arg;
  int cfd[DROPPER_CONNS], ufd[DROPPER_CONNS];
  for (int i = 0; i < DROPPER_CONNS; i++) cfd[i] = ufd[i] = -1;
  char buf[65536];
  while (!atomic_load(&d->stop)) {
    struct pollfd p[1 + 2 * DROPPER_CONNS];
    int n = 0;
    p[n++] = (struct pollfd){ .fd = d->lfd, .events = POLLIN };
    for (int i = 0; i < DROPPER_CONNS; i++) {
      p[n++] = (struct pollfd){ .fd = cfd[i], .events = POLLIN };
      p[n++] = (struct pollfd){ .fd = ufd[i], .events = POLLIN };
    }
    if (poll(p, (nfds_t)n, 50) <= 0) continue;
    if (p[0].revents & POLLIN) {
      int c = accept(d->lfd, NULL, NULL), slot = -1;
      for (int i = 0; i < DROPPER_CONNS && slot < 0; i++)
        if (cfd[i] < 0) slot = i;
      int u = c >= 0 && slot >= 0 ? connect_redis() : -1;
      if (u >= 0)
        cfd[slot] = c, ufd[slot] = u;
      else if (c >= 0)
        close(c);
    }
    for (int i = 0; i < DROPPER_CONNS; i++) {
      int from_client = p[1 + 2 * i].revents != 0, from_redis = p[2 + 2 * i].revents != 0;
      if (cfd[i] < 0 || (!from_client && !from_redis)) continue;
      int src = from_client ? cfd[i] : ufd[i], dst = from_client ? ufd[i] : cfd[i];
      ssize_t got = read(src, buf, sizeof buf);
      int ok = got > 0;
      if (ok && !from_client && buf[0] == '*' && atomic_load(&d->drop))
        atomic_fetch_add(&d->dropped, 1);
      else if (ok)
        ok = write(dst, buf, (size_t)got) == got;
      if (!ok) {
        close(cfd[i]), close(ufd[i]);
        cfd[i] = ufd[i] = -1;
      }
    }
  }
  for (int i = 0; i < DROPPER_CONNS; i++)
    if (cfd[i] >= 0) close(cfd[i]), close(ufd[i]);
  return NULL;
}

static int dropper_start(dropper *d) {
  memset(d, 0, sizeof *d);
  d->lfd = listen_loopback(&d->port);
  if (d->lfd < 0) return -1;
  if (pthread_create(&d->thread, NULL, dropper_run, d) != 0) {
    close(d->lfd);
    return -1;
  }
  return 0;
}

static void dropper_stop(dropper *d) {
  atomic_store(&d->stop, 1);
  pthread_join(d->thread, NULL);
  close(d->lfd);
}

/* lr_fleet_sync_now until it returns `want` (a reconnect's backoff says
 * E_BACKOFF meanwhile), 40 rounds of 30 ms at most; whether it did. */
static int sync_until(lr_fleet *f, lr_fleet_code want) {
  for (int round = 0; round < 40; round++) {
    lr_fleet_code rc = lr_fleet_sync_now(f);
    if (rc == want) return 1;
    redis_sleep_ms(30);
  }
  return 0;
}

/* The handle's own syncs, through the dropper: a block taken, 2 of it
 * spent, then its give-back's answer lost (the worker's timer or ours,
 * both timed out after Redis applied them), 3 more spent on the block the
 * process still thinks it holds, another sync lost, 1 more: once the
 * answers come again the fleet has lost exactly the 40 failures of the
 * start and the 6 the block paid. */
static void test_lease_answers_lost_for_real(void) {
  dropper d;
  if (!CHECK_EQ_INT(dropper_start(&d), 0)) return;
  char url[80];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", d.port);
  lr_fleet_settings s = test_settings();
  s.max_tokens = 1000; /* a block of 125 at most */
  lr_fleet *f = handle(url, "lease-dropped", "host-a:1", s, NULL);
  reset(f);
  CHECK_EQ_INT(lr_fleet_sync_now(f), LR_FLEET_OK);
  for (int i = 0; i < 40; i++) lr_fleet_record(f, LR_FLEET_FAILURE); /* no block: spent */
  CHECK_EQ_INT(lr_fleet_sync_now(f), LR_FLEET_OK);
  lr_fleet_view v;
  lr_fleet_view_get(f, &v);
  /* twice a sync period's failures: 40 counted within 400 ms make 10 */
  CHECK(v.lease >= 6);
  for (int i = 0; i < 2; i++) CHECK_EQ_INT(lr_fleet_record(f, LR_FLEET_FAILURE), 1); /* paid */
  atomic_store(&d.drop, 1);
  CHECK(sync_until(f, LR_FLEET_E_TIMEOUT)); /* the 2 told; the answer lost */
  redis_sleep_ms(150); /* two sync periods without a failure: the block goes back */
  CHECK(sync_until(f, LR_FLEET_E_TIMEOUT)); /* the give-back, its answer lost */
  for (int i = 0; i < 3; i++) CHECK_EQ_INT(lr_fleet_record(f, LR_FLEET_FAILURE), 1);
  CHECK(sync_until(f, LR_FLEET_E_TIMEOUT)); /* lost again */
  CHECK_EQ_INT(lr_fleet_record(f, LR_FLEET_FAILURE), 1);
  CHECK(atomic_load(&d.dropped) >= 3);
  atomic_store(&d.drop, 0);
  CHECK(sync_until(f, LR_FLEET_OK));
  CHECK(sync_until(f, LR_FLEET_OK)); /* a block given back, if the last took one */
  redis_sleep_ms(150);
  CHECK(sync_until(f, LR_FLEET_OK));
  lr_fleet_status st = status_of(f);
  CHECK_NEAR(st.tokens, 1000 - 40 - 6, 1e-9); /* those out in leases among them */
  lr_fleet_status_free(&st);
  lr_fleet_free(f);
  dropper_stop(&d);
}

/* Two handles of one process on one key (two policies naming it, or a
 * reload that made a new handle while the old one still flushes): each
 * is a member of its own, so their totals never mix and every failure is
 * charged once (with one member, a handle's total read as the other's
 * took 8 tokens for one draw). */
static void test_lease_two_handles(void) {
  lr_fleet_settings s = test_settings();
  lr_fleet *a = handle(URL, "lease-two", NULL, s, NULL);
  lr_fleet *b = handle(URL, "lease-two", NULL, s, NULL);
  reset(a);
  CHECK(strcmp(a->member, b->member) != 0);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  a->lease_closing = b->lease_closing = 1;
  lr_fleet_reply r;
  CHECK_EQ_INT(lease_round(a, 10000, READ, &r), LR_FLEET_OK);
  fail_times(a, 8);
  CHECK_EQ_INT(lease_round(a, 10000, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(lease_round(b, 10000, READ, &r), LR_FLEET_OK);
  fail_times(b, 1);
  CHECK_EQ_INT(lease_round(b, 0, READ, &r), LR_FLEET_OK);
  fail_times(a, 1);
  CHECK_EQ_INT(lease_round(a, 0, READ, &r), LR_FLEET_OK);
  CHECK_EQ_INT(r.leased, 0);
  CHECK_EQ_INT(r.tokens, 100000 - 10 * 1000);
  lr_fleet_free(a);
  lr_fleet_free(b);
}

int main(void) {
  if (redis_start(&SRV, (const char *)NULL) != 0) {
    fprintf(stderr, "cannot start redis-server (make deps installs it)\n");
    return 1;
  }
  snprintf(URL, sizeof URL, "redis://127.0.0.1:%d/0", SRV.port);
  test_lease_lost_answer();
  test_lease_two_lost_answers();
  test_lease_given_back_before_any_draw();
  test_lease_max_lowered();
  test_lease_answers_lost_for_real();
  test_lease_two_handles();
  redis_stop(&SRV);
  return check_done();
}
