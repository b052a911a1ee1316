/* fleet_internal.h: what the files of core/fleet/ share.  Only this folder
 * includes hiredis; fleet.h, the engine's view of it, does not. */
#ifndef LUARETRY_FLEET_INTERNAL_H
#define LUARETRY_FLEET_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "engine/engine.h"
#include "fleet.h"

struct redisReply;
struct redisReader;
struct lr_lookup;

#define LR_FLEET_SAID_MAX 4
#define LR_SENTINEL_MAX   8 /* sentinels one URL may name */

/* What one round trip of the rate limiter asks for (redis_rate.c). */
typedef struct {
  long want, burst;
  double limit;
  long long horizon_us; /* slots no further ahead (the call's deadline's) */
  double u;             /* the asking call's draw, to spread a full fleet's asks */
} rate_ask_t;

/* The longest wait for a slot the rate script may answer, in µs: the
 * longest horizon and a whole block beyond it (2 µs for rounding).  The
 * rate script's reply past it is out of range (redis_rate.c), and `fleet`
 * says which asks a stored time that far ahead refuses (admin.c). */
static inline double lr_rate_wait_max_us(double interval_us) {
  return LR_LEASE_HORIZON * 1e6 + LR_LEASE_MAX * interval_us + 2;
}

/* ---- redis_url.c */

typedef struct {
  int is_unix;
  char host[256]; /* TCP: name or address, IPv6 without brackets */
  int port;
  char path[108]; /* Unix: the socket's path (sun_path's size) */
  char user[128], password[256];
  int db;
  char redacted[300]; /* the URL as messages show it */
  /* redis-sentinel://: the sentinels, asked in turn, and the master's
   * name; host and port above are unused (the master's come from them) */
  int sentinels; /* 0: a plain URL */
  char sentinel_host[LR_SENTINEL_MAX][256];
  int sentinel_port[LR_SENTINEL_MAX];
  char master[128];
} lr_redis_url;

lr_fleet_code lr_redis_url_parse(const char *url, lr_redis_url *u, char *err, size_t errlen);
/* Replaces every occurrence of the URL's user and password in msg by ***:
 * a server's error text is shown as it came, and must not leak them. */
void lr_redis_url_scrub(const lr_redis_url *u, char *msg);
/* An error reply's text as messages show it: the URL's user and password
 * replaced (before it is cut), control bytes escaped, at most 200 bytes;
 * with a password shorter than 3 bytes, only the error's code (a user
 * name is no secret: a short one is left where it stands). */
void lr_reply_quote(const lr_redis_url *u, const struct redisReply *r, char *out, size_t size);
/* The same of s[0..n). */
void lr_reply_quote_text(const lr_redis_url *u, const char *s, size_t n, char *out, size_t size);

/* ---- reply.c: replies read with hard limits; a server's text made fit
 * to show */

#define LR_REPLY_MAX_BYTES    (1 << 20) /* strings of one reply, and unparsed bytes */
#define LR_REPLY_MAX_ELEMENTS 4096      /* elements of one array */
#define LR_REPLY_MAX_OBJECTS  16384     /* values in one reply, nested ones too */
#define LR_REPLY_MAX_DEPTH    2         /* arrays in arrays in a reply */

/* A hiredis reader whose replies are bounded as above; NULL: no memory. */
struct redisReader *lr_reply_reader_new(void);
void lr_reply_reader_free(struct redisReader *r);
/* Feeds n bytes: E_PROTOCOL when more than LR_REPLY_MAX_BYTES would wait
 * unparsed (a line that never ends). */
lr_fleet_code lr_reply_feed(struct redisReader *r, const char *buf, size_t n, char *err,
                            size_t errlen);
/* The next whole reply (*out NULL: none yet), or E_PROTOCOL with why. */
lr_fleet_code lr_reply_next(struct redisReader *r, struct redisReply **out, char *err,
                            size_t errlen);
/* prefix, then s[0..n) with control bytes shown as \xNN and a backslash
 * doubled, cut to fit size (never inside an escape). */
void lr_reply_escape(const char *s, size_t n, char *out, size_t size, const char *prefix);
/* What a reply is, in words ("a nil", "an array"): for messages, which
 * name what came rather than hiredis's type number. */
const char *lr_reply_kind(const struct redisReply *r);

/* ---- redis_resolve.c: a name lookup a deadline bounds */

typedef struct {
  struct lr_lookup *pending; /* a lookup that outlived its deadline, or NULL */
} lr_resolver;

#define LR_RESOLVE_MAX 4

typedef struct {
  int count;
  struct sockaddr_storage addr[LR_RESOLVE_MAX];
  socklen_t len[LR_RESOLVE_MAX];
} lr_addresses;

/* OK and up to LR_RESOLVE_MAX addresses in the resolver's order, or an
 * error code with err; a cancel of w (NULL: none) ends the wait.  A lookup still running at the deadline is kept and
 * picked up by the next call for the same name. */
lr_fleet_code lr_resolve(lr_resolver *r, const char *host, int port, int64_t deadline_ms,
                         lr_waiter *w, lr_addresses *out, char *err, size_t errlen);
/* Waits for a lookup still running (the system resolver's own timeouts
 * bound it) and frees it. */
void lr_resolver_close(lr_resolver *r);

/* ---- redis_conn.c: one connection, every operation with a deadline */

typedef struct {
  int fd; /* -1: closed */
  struct redisReader *reader;
  char *out; /* formatted commands not yet sent */
  size_t out_len, out_sent;
  int awaited; /* replies owed by the server */
  lr_resolver resolver;
  lr_waiter *cancel;  /* the call whose round trip this is, or NULL:
                                   its cancel ends every wait at once */
  int sentinel_first; /* redis-sentinel://: the one that answered last */
  /* redis_cluster.c: the keys' slot (-1: none), where MOVED sent them
   * (port 0: the URL's node), where an ASK sends the next round trip */
  int slot;
  char moved_host[256], ask_host[256];
  int moved_port, ask_port;
  int redirected;     /* a MOVED or ASK for the slot was read */
  int asking;         /* this connection is an ASK's: ASKING before each command */
  int skip;           /* ASKING replies to read and drop */
  int dropped;        /* the last reply read was an ASKING's */
  atomic_llong *sent; /* counts every command sent (NULL: not counted) */
} lr_redis_conn;

void lr_conn_init(lr_redis_conn *c);
/* Connects (by connect_deadline) to u's HOST:PORT or path (not a
 * sentinel URL's: lr_redis_open) and says hello: AUTH and SELECT as the
 * URL asks, and with check_role INFO replication, whose role must be
 * master.  *command_deadline: in, a limit (0: none); out, the
 * connected moment plus command_timeout_ms, or the limit if earlier: the
 * hello and what follows it in the same round trip end by then. */
lr_fleet_code lr_conn_open(lr_redis_conn *c, const lr_redis_url *u, int check_role,
                           int64_t connect_deadline, int command_timeout_ms,
                           int64_t *command_deadline, char *err, size_t errlen);
void lr_conn_close(lr_redis_conn *c); /* keeps the resolver */
void lr_conn_free(lr_redis_conn *c);  /* closes the resolver too */
/* Queues one command; nothing is sent yet. */
lr_fleet_code lr_conn_append(lr_redis_conn *c, int argc, const char **argv, const size_t *lens);
/* Sends what is queued.  deadline_ms 0: only what goes without waiting. */
lr_fleet_code lr_conn_flush(lr_redis_conn *c, int64_t deadline_ms, char *err, size_t errlen);
/* The next reply.  deadline_ms 0: only if it has arrived (*reply NULL and
 * LR_FLEET_OK otherwise).  The caller frees it with freeReplyObject. */
lr_fleet_code lr_conn_read(lr_redis_conn *c, int64_t deadline_ms, struct redisReply **reply,
                           char *err, size_t errlen);
/* Classifies an error reply (AUTH, READONLY, NOSCRIPT...) as a code. */
lr_fleet_code lr_conn_error_code(const struct redisReply *r);

/* ---- redis_sentinel.c: the master's address, asked of the sentinels */

/* Asks u's sentinels in turn (the last that answered first; each gets an
 * equal share of what is left before deadline_ms) with SENTINEL
 * get-master-addr-by-name, on c (closed again after); OK and *master: a
 * copy of u naming the master's HOST:PORT as a plain URL, or an error
 * saying what the last one asked answered. */
lr_fleet_code lr_sentinel_master(lr_redis_conn *c, const lr_redis_url *u, int64_t deadline_ms,
                                 lr_redis_url *master, char *err, size_t errlen);
/* Connects as lr_conn_open does; a redis-sentinel:// URL's master
 * asked of its sentinels first (within the same connect deadline), then
 * connected to with its role checked (a replica the sentinels still name
 * during a failover is refused: the next connect asks them again). */
lr_fleet_code lr_redis_open(lr_redis_conn *c, const lr_redis_url *u, int64_t connect_deadline,
                            int command_timeout_ms, int64_t *command_deadline, char *err,
                            size_t errlen);

/* ---- redis_cluster.c: MOVED and ASK followed */

#define LR_CLUSTER_REDIRECTS 3 /* in one round trip */

/* The key's hash slot (its {tag}'s when it has one), 0-16383. */
int lr_cluster_slot(const char *key, size_t n);
/* An error reply read on c: a MOVED or ASK naming c->slot is noted (the
 * target kept, c->redirected set). */
void lr_cluster_note(lr_redis_conn *c, const struct redisReply *r);
/* After a failed round trip: 1 when a redirect was read and another may
 * be followed (the caller closes the connection, connects again, to the
 * target, and repeats the round trip), 0 otherwise. */
int lr_cluster_again(lr_redis_conn *c, int *redirects);
/* After a round trip: the ASK's target forgotten (its connection stays). */
void lr_cluster_done(lr_redis_conn *c);

/* ---- redis_script.c: the atomic update, EVALSHA with EVAL behind it */

typedef struct {
  long long spent, earned;     /* milli-tokens */
  long long trail;             /* failures after the batch's last success or answer */
  long long resets;            /* > 0: the batch holds a success or an answer */
  long long want;              /* probe permits asked */
  long long requests, accepts; /* the throttle's */
  long long throttled;         /* throttling answers: throttle_cost each */
  /* the budget's lease (budget_lease.c), milli-tokens: what this
   * process has drawn from its blocks in all (it only grows), the block it
   * wants after the sync, how long Redis keeps it (ms) */
  long long ldrawn, lwant, lttl_ms;
  /* the reserve's question (reserve.c), asked for the call whose sync
   * this is: its interval and span in ms as reserve.c sends them; 0: none */
  double rinterval_ms, rspan_ms;
  /* probe permits handed back to the fleet (the handle's end), of the
   * half-open period that opened at `rperiod` (Redis ms); 0: none */
  long long returned, rperiod;
} lr_fleet_batch;

typedef struct {
  long long max_milli, failures, open_ms, probes, ttl_ms;
  long long ratio_milli; /* not sent but as part of cfg */
  int budget, breaker;
  long long cost_milli; /* a throttling answer's tokens */
  long long k_milli;    /* the throttle's K; not sent but as part of cfg */
  long long bucket_ms;  /* a tenth of the throttle's window; 0: no throttle */
  /* the budget's floor (reserve.c): not sent but as part of cfg */
  long long reserve_milli;
} lr_fleet_limits;

/* The guard settings as text, the same in every process that may share a
 * key ("budget=1 max_tokens=10.000 ..."). */
void lr_fleet_cfg_text(const lr_fleet_limits *l, char *buf, size_t size);

typedef struct {
  long long tokens, state, fails, opened_at, probes_left, granted, now_ms;
  long long requests, accepts; /* the throttle's window, this batch in */
  long long lease, leased;     /* this process's block after the sync, all blocks out */
  long long reserve;           /* the reserve's question: 0 not asked of it, 1 a retry
                                  taken, 2 spent (LR_RESERVE_*) */
} lr_fleet_reply;

#define LR_RESERVE_NONE  0 /* not asked, or the fleet's tokens allow the retry */
#define LR_RESERVE_TAKEN 1
#define LR_RESERVE_SPENT 2

typedef struct {
  char sha[41]; /* its SHA1, computed at the first use ("": libcrypto failed) */
  int use_eval; /* the server does not hold it: EVAL next time */
} lr_fleet_script;

extern const char LR_FLEET_SCRIPT[];

/* The SHA1 of a script as Redis names it (40 hex digits): 1, or 0 with
 * sha "" (libcrypto refused SHA1, a FIPS setting: EVAL every time). */
int lr_script_sha(const char *script, char sha[41]);
/* A WRONGTYPE error: one of the fleet's keys holds a value of another
 * kind (another program uses the name); said with WRONGTYPE_HINT, since
 * Redis's own words name no key and it will not mend itself. */
int lr_reply_wrongtype(const struct redisReply *r);
#define WRONGTYPE_HINT                                                                        \
  " (a key of this fleet holds another program's value: choose another fleet.key, or delete " \
  "the fleet's keys: luaretry fleet POLICY --reset)"
/* A script's error reply r, quoted in err as "WHAT refused: ...", saying
 * what the fleet needs when it means this server or user runs no scripts
 * (NOPERM, an unknown command) or the user's ACL refuses a command the
 * script (its text: NULL for none) runs; its code. */
lr_fleet_code lr_script_refused(const lr_redis_url *u, const struct redisReply *r, const char *what,
                                const char *script, char *err, size_t errlen);

/* ---- redis_acl.c */

/* The commands an ACL user of the fleet runs (ACL SETUSER's words): the
 * scripts' redis.call, and EVALSHA and EVAL to run them; beside them
 * SELECT for a database other than 0, ASKING in a Cluster that migrates
 * the fleet's slot; `luaretry fleet` adds LR_ACL_ADMIN.  luaretry(1)
 * --redis lists the same. */
#define LR_ACL_RUN                                                                     \
  "+evalsha +eval +time +hget +hmget +hset +hdel +pexpire +zadd +zrangebyscore +zrem " \
  "+zremrangebyscore"
#define LR_ACL_ADMIN "+zrevrange +zcount +hlen, and +del for --reset"
/* 1 when the error reply r is the ACL's refusal of a command (not of a
 * key), in a script or not: cmd then names it when Redis's words do not
 * (upper-cased, from the line of `script` that Redis 7.0 names; else ""),
 * and *shown is how much of r's text is worth showing (a script's
 * " script: SHA, on @user_script:LINE." cut off). */
int lr_acl_refused(const struct redisReply *r, const char *script, char *cmd, size_t size,
                   size_t *shown);
/* Queues EVALSHA (or EVAL) of the update with this batch.  keys: the
 * hash, the registry, the leases' hash and their expiry (LR_FLEET_KEYS). */
#define LR_FLEET_KEYS 4
lr_fleet_code lr_redis_script_append(lr_fleet_script *s, lr_redis_conn *c, const char *keys[4],
                                     const char *member, const char *owner,
                                     const lr_fleet_limits *l, const lr_fleet_batch *b);
/* Decodes its reply; *noscript set when the server had forgotten the
 * script (the batch was not applied).  Every number is checked against
 * what the script can answer to the limits l, `want` and `lwant` sent and
 * whether the reserve was asked (rasked): any other is E_PROTOCOL (a
 * broken reply), never used.  Error text shown as lr_reply_quote shows it. */
lr_fleet_code lr_redis_script_decode(lr_fleet_script *s, const lr_redis_url *u,
                                     const struct redisReply *r, const lr_fleet_limits *l,
                                     long long want, long long lwant, int rasked,
                                     lr_fleet_reply *out, int *noscript, char *err, size_t errlen);
/* Append, send, read, decode; on NOSCRIPT once more with EVAL, all within
 * the deadline. */
lr_fleet_code lr_redis_script_run(lr_fleet_script *s, lr_redis_conn *c, const lr_redis_url *u,
                                  const char *keys[4], const char *member, const char *owner,
                                  const lr_fleet_limits *l, const lr_fleet_batch *b,
                                  int64_t deadline_ms, lr_fleet_reply *out, char *err,
                                  size_t errlen);

/* ---- handle.c: the handle, its health and connection */

struct lr_fleet {
  lr_fleet_settings set; /* set.member points at member */
  lr_redis_url url;
  char key[220], procs_key[230], member[128];
  char owner[128];                     /* whose settings these are (cfg_by): the process (HOST:PID)
                      for a default member, so a reload's new handle may
                      change them at once; else the member */
  char leases_key[230], lexp_key[230]; /* budget_lease.c */

  /* The guard numbers, read by decisions without a lock. */
  atomic_int budget, breaker, failures, probes;
  atomic_llong max_milli, ratio_milli, open_ms;
  atomic_int throttle;
  atomic_llong k_milli, bucket_ms, cost_milli;
  atomic_llong reserve_milli; /* budget.reserve, thousandths of a retry per second */

  /* The batch being gathered: lr_fleet_record adds, a sync takes. */
  atomic_llong spent, earned, trail, resets;
  atomic_llong requests, accepts, throttled;
  atomic_llong unrequested; /* requests uncounted after their batch went */

  /* The last known state of the fleet, written after each sync. */
  atomic_int health, state, fails, probes_left;
  atomic_llong tokens, opened_at, clock_offset; /* Redis ms - our monotonic ms */
  atomic_llong last_ok_ms, inflight_net, next_sync_at, permit_asked_at;
  atomic_llong fleet_requests, fleet_accepts;       /* the throttle's window */
  atomic_llong inflight_requests, inflight_accepts; /* sent, reply unread */
  atomic_llong syncs, sync_failures;
  atomic_llong permits;  /* probe permits the worker brought, not yet taken */
  atomic_llong rtt_us;   /* the round trips' time, a moving average */
  atomic_llong commands; /* sent to Redis by this handle (conn.sent) */

  /* The budget's lease (budget_lease.c), milli: what the blocks paid in
   * all (drawn, it only grows) and drawn plus the block Redis kept at the
   * last answer read (allot: the block held now is allot - drawn), the
   * fleet's tokens out in leases at the last sync and those of them other
   * processes hold, failures counted since the last sync, and whether one
   * found the block empty. */
  atomic_llong drawn, allot, leased, others, lfails;
  atomic_int lshort;
  /* under io: the block's size (tokens), and whether the handle is
   * closing (its block and its probe permits go back: sync.c) */
  long lease_block;
  int64_t lease_taken_at, lease_spent_at; /* the last sync's, the last with failures */
  long long lease_redis;                  /* the block Redis kept at the last sync */
  long long lease_acked;                  /* drawn as the last sync whose answer was read sent it */
  int lease_closing;
  /* under io: the stop cut the worker's round trip short before Redis was
   * late by the patience (its health untold): the flush waits one patience */
  int cut_early;

  /* Everything below belongs to whoever holds io. */
  pthread_mutex_t io;
  lr_redis_conn conn;
  lr_fleet_script script;
  char reserve_sha[41]; /* reserve.c's script's SHA1 ("": not computed yet) */
  int64_t last_sent_at;
  int64_t next_connect_at, backoff_ms;
  uint64_t rng;

  pthread_mutex_t note_lock; /* guards detail and the lines to say */
  char detail[300];
  char said[LR_FLEET_SAID_MAX][1024]; /* health changes not yet told */
  int said_count;
  atomic_int said_pending;
  pthread_mutex_t say_lock; /* one thread tells them at a time, in order */

  /* worker.c: the handle's thread, which makes the engine's round trips */
  unsigned forks; /* lr_fleet_forks() when made: a fork's child does no I/O */
  pthread_mutex_t wlock;
  pthread_cond_t wcond;
  int wstate; /* 0: not started, 1: running, -1: could not start */
  int wstop, wwork;
  atomic_int wpending; /* wwork's bits, read without the lock */
  pthread_t wthread;
  void (*wfn[3])(struct lr_fleet *f, int work); /* who does each LR_WORK_* bit */
  atomic_llong wtimer_at;                       /* CLOCK_MONOTONIC ms of a sync the worker makes
                             unasked (0: none): a lease's return */
  void (*wtimer_fn)(struct lr_fleet *f, int work);
  lr_waiter stopper; /* cancelled by lr_fleet_worker_stop: ends its round trip */

  /* The rate limiter (redis_rate.c): its settings and this process's
   * slots under rate_lock; its script's SHA belongs to whoever holds io. */
  atomic_int rate;
  pthread_mutex_t rate_lock;
  double rate_limit;
  long rate_burst;
  lr_lease lease;
  rate_ask_t rate_ask;   /* the block the worker is to lease */
  int64_t rate_asked_at; /* when it was asked (0: nothing asked) */
  double rate_first;     /* none granted: the fleet's next slot then (0: not so) */
  char rate_key[230];
  char rate_sha[41];
};

/* ---- reserve.c: the budget's floor, the fleet's.  1: a retry the
 * fleet's tokens refuse may go; 0: the fleet's reserve is spent;
 * LR_FLEET_LOCAL: not known now (the local reserve decides).  One round
 * trip within limit_ms (0: none), ended by a cancel of w. */
int lr_fleet_reserve_take(lr_fleet *f, int64_t limit_ms, lr_waiter *w);
/* The same question for a sync to carry (redis_script.c): 1 and b's
 * rinterval_ms and rspan_ms set when the fleet has a reserve to ask (its
 * budget on, a reserve), 0 and none otherwise. */
int lr_fleet_reserve_ask(lr_fleet *f, lr_fleet_batch *b);

/* ---- redis_rate.c */

extern const char LR_RATE_SCRIPT[];

/* The settings' text the rate key's processes must share. */
void lr_fleet_rate_cfg_text(double limit, long burst, char *buf, size_t size);

/* ---- handle.c (beside its functions below) */

/* New rate settings (with rate_lock taken inside): slots held go when
 * they change. */
void lr_fleet_rate_install(lr_fleet *f, const lr_fleet_settings *s);
/* A caller's finding that the worker's round trip is overdue (Redis slower
 * than usual): degraded without the io lock, said once; the worker's
 * reply, when it comes, makes it healthy again (said: back). */
void lr_fleet_slow(lr_fleet *f, const char *detail);
/* How late a reply may be before Redis counts as slow: eight usual round
 * trips, at least 50 ms. */
int64_t lr_fleet_patience_ms(lr_fleet *f);
/* A good reply, from whichever script: health back (said once). */
void lr_fleet_healthy_locked(lr_fleet *f);
/* Healthy and synced within stale_ms at `now` (CLOCK_MONOTONIC ms): the
 * view may decide. */
int lr_fleet_fresh(lr_fleet *f, int64_t now);

/* With f->io held.  Connects when not connected (force: whatever the
 * backoff); OK at once when connected.  *deadline: in, the latest any
 * wait may end (0: none); out, when the round trip must be over: the
 * command timeout from the moment the socket is connected (AUTH and
 * SELECT are part of it), never past the limit given.  The
 * connection's cancel (f->conn.cancel) ends any wait at once. */
lr_fleet_code lr_fleet_connect_locked(lr_fleet *f, int force, int64_t *deadline, char *err,
                                      size_t errlen);
/* A round trip's end: a cancelled one, or one that timed out when the
 * call's limit_ms (0: none) left it less than 10 ms from `start`, drops the
 * connection (a late reply would be out of step) and nothing else (but a
 * cancelled one that had waited past the patience: Redis is slow); any
 * other failure goes to lr_fleet_fail_locked (a Redis slower than the time
 * a call could give it is slow: local guards). */
void lr_fleet_failed_locked(lr_fleet *f, lr_fleet_code rc, const char *detail, int64_t start,
                            int64_t limit_ms);
/* Marks the handle degraded (logging on the change), closes the
 * connection and schedules the next attempt. */
void lr_fleet_fail_locked(lr_fleet *f, lr_fleet_code rc, const char *detail);
/* A good reply: the view, the clock offset, health (logging "back"). */
void lr_fleet_succeeded_locked(lr_fleet *f, const lr_fleet_reply *r, int64_t now);

/* Tells the host's log the health changes noted (any thread may note
 * one; only a caller's thread tells it, never the worker).  Cheap when
 * there are none: one atomic load. */
void lr_fleet_tell(lr_fleet *f);

/* ---- worker.c: one thread per handle, started by the first kick */

#define LR_WORK_SYNC   1 /* send the batch, learn the fleet's state */
#define LR_WORK_PERMIT 2 /* ask for a probe permit (half-open) */
#define LR_WORK_RATE   4 /* lease a block of the rate limiter's slots */

/* Asks the worker for `work` (LR_WORK_* bits), which it does by calling
 * fn(f, work) (the kicker's own function: the worker depends on no other
 * file), and returns at once (a lock held for a few instructions, a
 * condition signalled).  Nothing in a fork's child. */
typedef void (*lr_fleet_work_fn)(lr_fleet *f, int work);
void lr_fleet_kick(lr_fleet *f, int work, lr_fleet_work_fn fn);
/* Asks the worker to call fn(f, 0) at CLOCK_MONOTONIC ms `at`, unless it
 * is to sooner (the earlier wins; once called, the timer is unset);
 * starts it if needed.  A lock held for a few instructions, never a wait. */
void lr_fleet_timer(lr_fleet *f, int64_t at, lr_fleet_work_fn fn);
/* Ends the worker (its round trip in progress first). */
void lr_fleet_worker_stop(lr_fleet *f);
/* Forks counted so far in this process's line (made at a handle's birth). */
unsigned lr_fleet_forks(void);

/* ---- admin.c */

/* The replies to TIME, HMGET of the hash and ZREVRANGE of the registry
 * as a status (st->processes: lr_fleet_status_free), or E_PROTOCOL. */
lr_fleet_code lr_fleet_status_decode(struct redisReply *r[3], lr_fleet_status *st, char *err,
                                     size_t errlen);

/* ---- budget_lease.c: the budget's block of tokens */

/* The fleet's tokens as this process sees them (milli): the last sync's,
 * its own block, its counts since. */
long long lr_fleet_tokens_milli(lr_fleet *f);

/* A failure counted against the block: 1 when the block covered it
 * (nothing to send now), 0 when it did not (the caller counts it into
 * the batch).  Lock-free. */
int lr_budget_lease_draw(lr_fleet *f);
/* Whether a failure the block did not cover (or that emptied it) is worth
 * a round trip at once: the view shows tokens above half a block could
 * come from, or it is not fresh. */
int lr_budget_lease_worth_asking(lr_fleet *f);
/* The view may decide the retry without a round trip: it is fresh and the
 * block holds a token. */
int lr_budget_lease_covers(lr_fleet *f);
/* The block this process holds now (milli): less than nothing when it
 * drew more than Redis kept (the next sync charges that). */
long long lr_budget_lease_held(lr_fleet *f);
/* With io held, as a sync takes its batch: what the blocks paid in all,
 * and the block wanted (b->ldrawn, b->lwant, b->lttl_ms). */
void lr_budget_lease_take(lr_fleet *f, lr_fleet_batch *b, int64_t now);
/* With io held, after a good reply: the block as Redis keeps it; the
 * worker's timer set to give it back when spending stops. */
void lr_budget_lease_settle(lr_fleet *f, const lr_fleet_batch *b, const lr_fleet_reply *r,
                            lr_fleet_work_fn sync_fn);
/* The block's cap in tokens for max_milli: a quarter of the tokens above
 * half, at least 1. */
long lr_budget_lease_cap(long long max_milli);

/* ---- sync.c */

/* lr_fleet_refresh within limit_ms (CLOCK_MONOTONIC ms, 0: none), ended
 * at once by a cancel of w (NULL: none): a blocking call's.  reserve
 * (NULL: none) asks the fleet's reserve too, for the calling call alone
 * (a retry the fleet's tokens refused before its wait): out, 1 when the
 * round trip took a retry of the reserve for it, 0 when it found the
 * reserve spent, LR_FLEET_LOCAL when it did not answer (no round trip
 * made: Redis away; or the fleet's tokens allowed a retry as Redis saw
 * them): lr_fleet_reserve_take then, if still needed.  With reserve, the
 * round trip is made even when the view is recent. */
lr_fleet_code lr_fleet_refresh_by(lr_fleet *f, int64_t limit_ms, lr_waiter *w, int *reserve);

/* Kicks the worker to ask for a probe permit (with the batch): what it
 * brings goes to f->permits. */
void lr_fleet_ask_permit(lr_fleet *f);

/* A failure's count (the budget's block paid it, or no block could come
 * now): lr_fleet_maybe_sync_at, and when the sync period is not over,
 * the worker's timer set for its end (unless set sooner), so that the
 * count is sent within the period even when no outcome follows.  Before
 * leases a failure made its round trip at once; a success's count still
 * waits for the next outcome after the period. */
void lr_fleet_sync_within_period(lr_fleet *f, int64_t now_ms);

#endif
