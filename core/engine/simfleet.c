/* simfleet.c: a fleet on the virtual clock, for simulations
 * (luaretry_simulate_herd).  The state Redis would hold is an lr_shared
 * updated by the local guards' own functions (the fleet's semantics are
 * the local guards' on the fleet's counts), and each client sees it the
 * way a process of the real fleet does (core/fleet/remote_guard.c,
 * sync.c, budget_lease.c):
 *   - a sync applies the client's unsent outcomes, in order, and takes a
 *     snapshot of the state; it happens when the client's process starts
 *     (the command's first sync), when an outcome comes a sync period or
 *     more after the last sync (a batch), at once for a failure no block
 *     of the budget's tokens pays for while one could be had or without a
 *     budget (the worker's, counted then: the retry is decided on the view
 *     as it was, and the batch reaches the fleet by the client's next
 *     question, see sync_soon), before a
 *     retry unless the view is recent (synced within the period, nothing
 *     unsent) or a block pays for it, when a half-open breaker is asked for
 *     a probe permit, two periods after its last failure while it holds a
 *     block (the worker's timer gives the block back: modelled at the
 *     client's next step, or its end), and when its process ends owing
 *     something;
 *   - the budget's leases: each sync sizes the client's block (twice the
 *     failures since its last sync per sync period, doubled when a
 *     failure found it empty, at most max_tokens / 8) and the fleet grants
 *     it from its tokens above half that no block holds; a failure the
 *     block pays for needs no round trip.  The fleet's tokens are those
 *     free and those in blocks together (what every view reads), so a
 *     block moves no token a decision sees: leases change when round trips
 *     happen, not what the guards decide;
 *   - decisions read the snapshot, the tokens with the client's unsent
 *     counts added; the client-side throttle likewise: the window's
 *     requests and accepts at the last sync (the fleet's lr_shared counts
 *     them in pace.c's buckets, as Redis does in the same buckets) plus
 *     the client's unsent ones; a client's requests also make a batch go
 *     when one is due, as in the real fleet;
 *   - a hedge's token is an outcome of its own in the batch (SPEND).
 * Round trips take no time (the model leaves Redis's latency out); each is
 * counted as the real process counts its Redis commands (luaretry_metrics'
 * fleet_round_trips): one for each sync (a failure's at the latest at
 * the sync period's end, as the worker sends it), a block of rate slots, a probe
 * permit or the reserve when the sync before the retry did not ask it
 * (that sync carries the reserve's question for a retry the fleet's tokens
 * refused before its wait) (the connect sends no command of its own: the
 * scripts go by EVALSHA, their SHAs computed by the process), and one
 * more at each script's first use in the fleet (Redis answers NOSCRIPT,
 * then EVAL puts the script in its cache).  Clients start in
 * waves: client i's call clock starts at 0 at its start, fleet_time()'s
 * (i / wave) * every on the fleet's clock. */
#include <math.h>
#include <stdlib.h>

#include "engine.h"

#define PENDING_MAX 32 /* a client's outcomes between syncs; more: sync */
#define SPEND       4  /* a hedge's token, in the batch (beside lr_remote_outcome's 0 to 3) */
#define MILLI       1000

/* The fleet's scripts, each NOSCRIPT once (redis_script.c, redis_rate.c,
 * reserve.c) */
enum { SYNC_SCRIPT = 1, RATE_SCRIPT = 2, RESERVE_SCRIPT = 4 };

/* a failure found the block empty; the process ends; a batch is on its
 * way (sent at `spent_at`, its answer not back yet); a failure waits in
 * the batch, which the worker sends at the sync period's end */
enum { SHORT = 1, CLOSING = 2, IN_FLIGHT = 4, DUE = 8 };

/* A client as small as it can be: a simulation holds up to a million at
 * once (160 bytes each, beside its call; issue 30 wants 512 for both):
 * the unsent outcomes are four bits each, the unsent counts since the
 * last sync 32 bits (a sync is due every `sync` seconds of a client's own
 * attempts), its process's kept sends (LR_CALL_LAZY_PACE, an adaptive
 * rate) or its leased rate slots (a fixed rate) in one place, where its
 * call would otherwise make a cold block of 168 bytes for the sends. */
typedef struct {
  lr_remote remote;
  lr_simfleet *fleet;
  double synced_at; /* the fleet's clock; < 0: never */
  long long tokens; /* milli-tokens at the last sync, free and in blocks */
  double opened_at;
  long long net;            /* milli-tokens since, unsent */
  double requests, accepts; /* the throttle's window at the last sync */
  union {
    lr_lease *lease;                 /* a fixed rate: its slots; made on first use */
    double lazy_sent[LR_LAZY_SENDS]; /* an adaptive one: remote.lazy_sent */
  } rate;
  double spent_at;                    /* the last sync that counted a failure */
  unsigned new_requests, new_accepts; /* since, unsent */
  int free_tokens;                    /* milli-tokens at the last sync in no block */
  int held;                           /* milli-tokens of its block left */
  int redis_held;                     /* its block as the fleet holds it, at the last sync */
  unsigned short block;               /* the block's size it asks, tokens */
  signed char state;
  unsigned char npending, flags;
  unsigned char pending[PENDING_MAX / 2]; /* lr_remote_outcome values, or SPEND: a nibble each */
} sim_client;

_Static_assert(sizeof(void *) != 8 || sizeof(sim_client) <= 160,
               "a simulated client: at most 160 B beside its call (issue 30: 512 B in all)");

struct lr_simfleet {
  lr_shared *shared;
  lr_guards g;
  double sync;
  long clients;
  long wave; /* clients start `wave` at a time, `every` seconds apart */
  double every;
  sim_client *client;
  double tat;       /* the rate limiter's GCRA, as Redis holds it */
  long long leased; /* milli-tokens out in blocks */
  unsigned long long round_trips;
  int redis;  /* 0: the local store (no leases, no round trips) */
  int loaded; /* the scripts Redis holds (SYNC_SCRIPT...) */
};

/* A round trip of `script`, counted: two at its first use (NOSCRIPT,
 * then EVAL). */
static void count_trip(lr_simfleet *f, int script) {
  if (!f->redis) return;
  f->round_trips += 1 + !(f->loaded & script);
  f->loaded |= script;
}

extern const lr_remote_ops lr_simfleet_ops;

lr_simfleet *lr_simfleet_new(const lr_guards *g, double sync, long clients, long wave, double every,
                             int redis) {
  lr_simfleet *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->shared = lr_aligned_calloc(sizeof *s->shared);
  s->client = calloc((size_t)clients, sizeof *s->client);
  if (!s->shared || !s->client) {
    lr_simfleet_free(s);
    return NULL;
  }
  lr_shared_init(s->shared, g);
  s->g = *g;
  s->sync = sync;
  s->clients = clients;
  s->wave = wave;
  s->every = every;
  s->redis = redis;
  for (long i = 0; i < clients; i++) {
    sim_client *c = &s->client[i];
    c->fleet = s;
    c->remote.ops = &lr_simfleet_ops;
    c->remote.ud = c;
    if (g->rate_adaptive) c->remote.lazy_sent = c->rate.lazy_sent;
    c->synced_at = -1;
    c->spent_at = -1e300;
  }
  return s;
}

void lr_simfleet_free(lr_simfleet *s) {
  if (!s) return;
  free(s->shared);
  for (long i = 0; s->client && !s->g.rate_adaptive && i < s->clients; i++)
    free(s->client[i].rate.lease);
  free(s->client);
  free(s);
}

const lr_remote *lr_simfleet_client(lr_simfleet *s, long i) { return &s->client[i].remote; }

unsigned long long lr_simfleet_round_trips(const lr_simfleet *s) { return s ? s->round_trips : 0; }

/* The fleet's clock at a client's call clock `now`. */
static double fleet_time(const sim_client *c, double now) {
  const lr_simfleet *s = c->fleet;
  return s->wave > 0 ? (double)((c - s->client) / s->wave) * s->every + now : now;
}

static void snapshot(sim_client *c, double now) {
  lr_shared *sh = c->fleet->shared;
  c->tokens = lr_budget_milli(sh);
  c->free_tokens = (int)(c->tokens - c->fleet->leased);
  c->state = (signed char)atomic_load(&sh->breaker_state);
  c->opened_at = (double)atomic_load(&sh->opened_at_ns) * 1e-9;
  lr_throttle_totals(sh, &c->fleet->g, now, &c->requests, &c->accepts);
  c->synced_at = now;
}

/* The block a sync asks for (budget_lease.c's lr_budget_lease_take), from
 * the `fails` counted since the last sync: twice a sync period's, so that
 * the period's sync tops it up before it runs dry. */
static long block_for(sim_client *c, int fails, double now) {
  const lr_simfleet *s = c->fleet;
  long cap = (long)(s->g.max_tokens / 8);
  if (cap < 1) cap = 1;
  if (!s->redis || !s->g.budget || (c->flags & CLOSING)) return 0;
  if (fails == 0) return now - c->spent_at >= 2 * s->sync ? 0 : c->block;
  double elapsed = c->synced_at < 0 ? s->sync : now - c->synced_at, floor = s->sync / 4 + 0.001;
  double two = 2.0 * fails * s->sync / (elapsed < floor ? floor : elapsed);
  long block = two >= (double)cap ? cap : (long)ceil(two);
  if ((c->flags & SHORT) && block < 2L * c->block) block = 2L * c->block;
  return block < 1 ? 1 : block > cap ? cap : block;
}

/* The fleet's side of a sync's lease: what the block paid for is gone
 * from the blocks (those failures are in the batch), then the block grows
 * from the tokens above half that no block holds, in whole tokens, or
 * gives back what it no longer needs. */
static void lease_settle(sim_client *c, long block) {
  lr_simfleet *s = c->fleet;
  s->leased -= c->redis_held - c->held; /* what it paid for: in the batch, gone */
  long long moved = (long long)block * MILLI - c->held;
  if (moved > 0) {
    long long above = lr_budget_milli(s->shared) - s->leased - llround(s->g.max_tokens * MILLI) / 2;
    long long whole = above >= MILLI ? above / MILLI * MILLI : 0;
    if (moved > whole) moved = whole;
  }
  c->held += (int)moved;
  s->leased += moved;
  c->redis_held = c->held;
  c->block = (unsigned short)block;
  c->flags &= (unsigned char)~SHORT;
}

/* What an outcome does to the budget's tokens, milli. */
static long long cost(const lr_guards *g, int o) {
  if (!g->budget) return 0;
  if (o == LR_REMOTE_SUCCESS) return llround(g->token_ratio * MILLI);
  if (o == LR_REMOTE_FAILURE || o == SPEND) return -MILLI;
  if (o == LR_REMOTE_THROTTLED) return -llround(g->throttle_cost * MILLI);
  return 0;
}

/* The batch applied to the fleet, in order; the failures in it. */
static int apply(sim_client *c, double now) {
  lr_shared *sh = c->fleet->shared;
  const lr_guards *g = &c->fleet->g;
  int fails = 0;
  for (int k = 0; k < c->npending; k++) {
    switch ((c->pending[k / 2] >> (k % 2 * 4)) & 15) {
    case LR_REMOTE_SUCCESS: lr_guards_success(sh, g, now); break;
    case LR_REMOTE_FAILURE: lr_guards_failure(sh, g, now), fails++; break;
    case LR_REMOTE_THROTTLED: lr_guards_throttled(sh, g, now); break;
    case SPEND: lr_budget_spend(sh, g); break;
    default: lr_guards_answered(sh, g, now); break;
    }
  }
  lr_throttle_add(sh, g, c->new_requests, c->new_accepts, now);
  c->new_requests = c->new_accepts = 0;
  c->npending = 0;
  return fails;
}

/* A round trip counted, and the lease it carries, sized on `fails`. */
static void trip(sim_client *c, int fails, double now) {
  count_trip(c->fleet, SYNC_SCRIPT);
  c->flags &= (unsigned char)~DUE;
  lease_settle(c, block_for(c, fails, now));
  if (fails) c->spent_at = now;
}

/* The state as the fleet holds it now; a failure's batch (IN_FLIGHT)
 * reaches it first, its sync's time kept (its period, its timer). */
static void land(sim_client *c, double now) {
  double sent_at = c->synced_at;
  if (c->flags & IN_FLIGHT) apply(c, now);
  c->net = 0;
  snapshot(c, now);
  if (c->flags & IN_FLIGHT) c->synced_at = sent_at;
  c->flags &= (unsigned char)~IN_FLIGHT;
}

/* One round trip: the batch, the lease, the state. */
static void sync_client(sim_client *c, double now) {
  int fails = apply(c, now);
  trip(c, fails, now);
  land(c, now);
}

/* A failure's round trip, which the worker makes while the call goes on:
 * counted now, with its lease; the retry is decided on the view as it was
 * (the batch still counted in it, as a process counts its batch in
 * flight), and the batch reaches the fleet by the client's next question
 * (Redis's latency left out; as the model did before the leases, whose
 * pre-retry sync carried it: a herd that starts at one instant is not
 * told of each other's failures before a retry's wait ends, as processes
 * started apart are not). */
static void sync_soon(sim_client *c, double now) {
  int fails = 0;
  for (int k = 0; k < c->npending; k++)
    fails += ((c->pending[k / 2] >> (k % 2 * 4)) & 15) == LR_REMOTE_FAILURE;
  trip(c, fails, now);
  c->synced_at = now;
  c->flags |= IN_FLIGHT;
}

static int owes(const sim_client *c) {
  return c->npending || c->new_requests || c->new_accepts || c->held > 0 || c->redis_held > 0;
}

/* The worker's timer: a failure's batch goes at the sync period's end
 * (sync.c, lr_fleet_sync_within_period), and a block held two sync
 * periods after the last sync goes back then (lr_budget_lease_settle), if
 * nothing synced the client since.  Each reaches the fleet by the
 * client's next question, as sync_soon's batch does. */
static void timer(sim_client *c, double now) {
  double due = c->synced_at + c->fleet->sync;
  if ((c->flags & DUE) && c->synced_at >= 0 && now >= due) sync_client(c, due);
  double at = c->synced_at + 2 * c->fleet->sync + 0.001;
  if (c->redis_held > 0 && c->synced_at >= 0 && now >= at) sync_client(c, at);
}

void lr_simfleet_begin(lr_simfleet *s, long i, double now) { sync_client(&s->client[i], now); }

void lr_simfleet_end(lr_simfleet *s, long i, double now) {
  sim_client *c = &s->client[i];
  timer(c, now);
  c->flags |= CLOSING;
  if (owes(c)) sync_client(c, now);
}

static long long view_tokens(const sim_client *c) {
  long long t = c->tokens + c->net, max = llround(c->fleet->g.max_tokens * MILLI);
  return t < 0 ? 0 : t > max ? max : t;
}

/* The view is fresh for stale_ms (fleet.stale's default: ten periods). */
static int fresh(const sim_client *c, double now) {
  return c->synced_at >= 0 && now - c->synced_at <= 10 * c->fleet->sync;
}

/* Whether a failure no block paid for is worth a round trip now: a block
 * could come of it (tokens above half in no block), or the view is old. */
static int worth_asking(const sim_client *c, double now) {
  const lr_guards *g = &c->fleet->g;
  if (!g->budget || !fresh(c, now)) return 1;
  long long unpaid = c->net + (c->redis_held - c->held); /* net counts the block's failures */
  return c->free_tokens + unpaid - (llround(g->max_tokens * MILLI) + 1) / 2 >= MILLI;
}

static int covered(const sim_client *c, double now) {
  return c->fleet->g.budget && c->held >= MILLI && fresh(c, now);
}

/* At every question: the process's first sync if none yet, and its timer. */
static double enter(sim_client *c, double now) {
  double t = fleet_time(c, now);
  if (c->synced_at < 0)
    sync_client(c, t);
  else if ((c->flags & IN_FLIGHT) && t > c->synced_at)
    land(c, t);
  timer(c, t);
  return t;
}

static int budget_allows_retry(void *ud, double now) {
  sim_client *c = ud;
  enter(c, now);
  return view_tokens(c) * 2 > llround(c->fleet->g.max_tokens * MILLI);
}

static int breaker_admits(void *ud, int first_attempt, double now, double left, lr_waiter *w) {
  (void)left, (void)w; /* a simulated round trip takes no time */
  sim_client *c = ud;
  now = enter(c, now);
  if (c->state == LUARETRY_BREAKER_CLOSED) return 1;
  if (c->state == LUARETRY_BREAKER_OPEN && now - c->opened_at < c->fleet->g.open_seconds) return 0;
  if (!first_attempt) return 1;
  /* a probe permit: a round trip to the fleet's own breaker */
  sync_client(c, now);
  int admitted = lr_breaker_admits(c->fleet->shared, &c->fleet->g, 1, now);
  snapshot(c, now);
  return admitted;
}

/* A batch goes when one is due (or the client never synced). */
static void maybe_sync(sim_client *c, double now) {
  if (c->synced_at < 0 || now - c->synced_at >= c->fleet->sync) sync_client(c, now);
}

static void pend(sim_client *c, lr_remote_outcome o, double now) {
  c->net += cost(&c->fleet->g, (int)o);
  if (c->npending == PENDING_MAX) sync_client(c, now);
  int k = c->npending++;
  if (k % 2 == 0) c->pending[k / 2] = 0;
  c->pending[k / 2] |= (unsigned char)((unsigned)o << (k % 2 * 4));
}

/* A failure is paid from the block when it holds a token (no round trip
 * soon); one it does not pay for goes at once when a block could come of
 * it, else with the period's batch. */
static void record(void *ud, lr_remote_outcome o, double now) {
  sim_client *c = ud;
  now = enter(c, now);
  int paid = 0;
  if (o == LR_REMOTE_FAILURE && c->fleet->g.budget) {
    if (c->held >= MILLI)
      c->held -= MILLI, paid = 1;
    else
      c->flags |= SHORT;
  }
  pend(c, o, now);
  if (o == LR_REMOTE_FAILURE && !paid && c->fleet->redis && worth_asking(c, now))
    sync_soon(c, now);
  else {
    maybe_sync(c, now);
    if (o == LR_REMOTE_FAILURE && c->npending) c->flags |= DUE; /* see timer() */
  }
}

static double refusal(const sim_client *c) {
  const lr_guards *g = &c->fleet->g;
  return lr_throttle_formula(g->throttle_k, c->requests + (double)c->new_requests,
                             c->accepts + (double)c->new_accepts);
}

static double throttle_request(void *ud, double now) {
  sim_client *c = ud;
  now = enter(c, now);
  double r = refusal(c);
  c->new_requests++;
  maybe_sync(c, now);
  return r;
}

static double throttle_refusal(void *ud, double now) {
  (void)now;
  return refusal(ud);
}

static void throttle_accept(void *ud, double now) {
  sim_client *c = ud;
  enter(c, now);
  c->new_accepts++;
}

static void spend(void *ud, double now) {
  sim_client *c = ud;
  pend(c, SPEND, enter(c, now));
}

/* Before a retry: none when the view is recent or the block pays for it.
 * A retry the fleet's tokens refused before its wait has its sync ask the
 * reserve too (redis_script.c: one round trip), when the fleet's tokens,
 * the batch applied, still refuse it. */
static int refresh(void *ud, double now, double left, lr_waiter *w, int reserve) {
  (void)left, (void)w; /* a simulated round trip takes no time */
  sim_client *c = ud;
  now = enter(c, now);
  if (covered(c, now)) return LR_REMOTE_LOCAL;
  if (!c->npending && !c->new_requests && !c->new_accepts && now - c->synced_at < c->fleet->sync)
    return LR_REMOTE_LOCAL;
  sync_client(c, now);
  const lr_guards *g = &c->fleet->g;
  if (!reserve || !c->fleet->redis || !g->budget || !(g->reserve > 0) ||
      view_tokens(c) * 2 > llround(g->max_tokens * MILLI))
    return LR_REMOTE_LOCAL;
  return lr_budget_reserve_take(c->fleet->shared, g, now);
}

static double tokens(void *ud) { return (double)view_tokens(ud) / MILLI; }

/* The rate limiter as a process of the real fleet keeps it
 * (core/fleet/redis_rate.c): slots from its lease, a block leased from
 * the fleet's GCRA (a round trip) when none is left. */
static int rate_reserve(void *ud, double now, double at, double latest, double left, double u,
                        lr_waiter *w, double *wait) {
  (void)left, (void)w; /* a simulated round trip takes no time */
  sim_client *c = ud;
  const lr_guards *g = &c->fleet->g;
  if (!g->rate || g->rate_adaptive || !(g->rate_limit > 0)) return LR_REMOTE_LOCAL;
  double shift = fleet_time(c, 0);
  now = enter(c, now), at += shift;
  if (latest >= 0) latest += shift;
  if (!c->rate.lease && (c->rate.lease = malloc(sizeof *c->rate.lease)))
    lr_lease_init(c->rate.lease);
  if (!c->rate.lease) return LR_REMOTE_LOCAL; /* out of memory: the local limiter */
  lr_lease *l = c->rate.lease;
  int v = lr_lease_take(l, at, latest, wait);
  if (v == 0 && lr_lease_wait_full(l, now, at, u, wait)) return 0;
  if (v == 0) {
    double b, retry;
    long want = lr_lease_want(l, g->rate_limit);
    long n = lr_lease_grant(&c->fleet->tat, now, g->rate_limit, g->rate_burst, want,
                            lr_lease_horizon(now, latest), &b, &retry);
    count_trip(c->fleet, RATE_SCRIPT);
    lr_lease_add(l, n, now, b, 1 / g->rate_limit);
    v = lr_lease_take(l, at, latest, wait);
    if (v == 0 && latest >= 0 && b > latest) return *wait = -1, 1; /* after the deadline */
    if (v == 0) {
      lr_lease_full(l, now, retry, want, 1 / g->rate_limit);
      lr_lease_wait_full(l, now, at, u, wait);
      return 0;
    }
  }
  if (v < 0) *wait = -1;
  return 1;
}

/* The budget's floor is the fleet's: one reserve (a round trip). */
static int reserve_take(void *ud, double now, double left, lr_waiter *w) {
  (void)left, (void)w; /* a simulated round trip takes no time */
  sim_client *c = ud;
  now = enter(c, now);
  count_trip(c->fleet, RESERVE_SCRIPT);
  return lr_budget_reserve_take(c->fleet->shared, &c->fleet->g, now);
}

const lr_remote_ops lr_simfleet_ops = {
  budget_allows_retry,
  breaker_admits,
  record,
  refresh,
  tokens,
  throttle_request,
  throttle_refusal,
  spend,
  rate_reserve,
  NULL, /* the breaker's rate window: each client's own, as with Redis */
  reserve_take,
  NULL, /* a request or permit a later guard refused: not modelled (Redis's are handed back) */
  NULL,
  throttle_accept,
};
