/* simfleet.c: a fleet on the virtual clock, for simulations
 * (luaretry_simulate_herd).  The state Redis would hold is an lr_shared
 * updated by the local guards' own functions (the fleet's semantics are
 * the local guards' on the fleet's counts), and each client sees it the
 * way a process of the real fleet does (core/fleet/remote_guard.c):
 *   - a sync applies the client's unsent outcomes, in order, and takes a
 *     snapshot of the state; it happens when the call begins (the
 *     command's first sync), when an outcome comes sync seconds or more
 *     after the last sync (a batch), before every retry that has unsent
 *     outcomes (the pre-retry refresh), when a half-open breaker is asked
 *     for a probe permit, and when the client's process ends;
 *   - decisions read the snapshot, the tokens with the client's unsent
 *     counts added; the client-side throttle likewise: the window's
 *     requests and accepts at the last sync (the fleet's lr_shared counts
 *     them in pace.c's buckets, as Redis does in the same buckets) plus
 *     the client's unsent ones; a client's requests also make a batch go
 *     when one is due, as in the real fleet;
 *   - a hedge's token is an outcome of its own in the batch (SPEND).
 * Round trips take no time: the model leaves Redis's latency out. */
#include <math.h>
#include <stdlib.h>

#include "engine.h"

#define PENDING_MAX 64 /* a client's outcomes between syncs; more: sync */
#define SPEND       4  /* a hedge's token, in the batch (beside lr_remote_outcome's 0 to 3) */

/* A client as small as it can be: a simulation holds up to a million at
 * once (160 bytes each, beside its call; issue 30 wants 512 for both):
 * the unsent outcomes are four bits each, the unsent counts since the
 * last sync 32 bits (a sync is due every `sync` seconds of a client's own
 * attempts), and its process's kept sends (LR_CALL_LAZY_PACE) are here,
 * where its call would otherwise make a cold block of 168 bytes for them. */
typedef struct {
  lr_remote remote;
  lr_simfleet *fleet;
  double synced_at; /* < 0: never */
  long long tokens; /* milli-tokens at the last sync */
  double opened_at;
  long long net;                      /* milli-tokens since, unsent */
  double requests, accepts;           /* the throttle's window at the last sync */
  lr_lease *lease;                    /* the rate limiter's slots it holds; made on first use */
  double lazy_sent[LR_LAZY_SENDS];    /* remote.lazy_sent */
  unsigned new_requests, new_accepts; /* since, unsent */
  signed char state;
  unsigned char npending;
  unsigned char pending[PENDING_MAX / 2]; /* lr_remote_outcome values, or SPEND: a nibble each */
} sim_client;

_Static_assert(sizeof(void *) != 8 || sizeof(sim_client) <= 160,
               "a simulated client: at most 160 B beside its call (issue 30: 512 B in all)");

struct lr_simfleet {
  lr_shared *shared;
  lr_guards g;
  double sync;
  long clients;
  sim_client *client;
  double tat; /* the rate limiter's GCRA, as Redis holds it */
};

extern const lr_remote_ops lr_simfleet_ops;

lr_simfleet *lr_simfleet_new(const lr_guards *g, double sync, long clients) {
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
  for (long i = 0; i < clients; i++) {
    sim_client *c = &s->client[i];
    c->fleet = s;
    c->remote.ops = &lr_simfleet_ops;
    c->remote.ud = c;
    c->remote.lazy_sent = c->lazy_sent;
    c->synced_at = -1;
  }
  return s;
}

void lr_simfleet_free(lr_simfleet *s) {
  if (!s) return;
  free(s->shared);
  for (long i = 0; s->client && i < s->clients; i++) free(s->client[i].lease);
  free(s->client);
  free(s);
}

const lr_remote *lr_simfleet_client(lr_simfleet *s, long i) { return &s->client[i].remote; }

static void snapshot(sim_client *c, double now) {
  lr_shared *sh = c->fleet->shared;
  c->tokens = atomic_load(&sh->milli_tokens);
  c->state = (signed char)atomic_load(&sh->breaker_state);
  c->opened_at = (double)atomic_load(&sh->opened_at_ns) * 1e-9;
  lr_throttle_totals(sh, &c->fleet->g, now, &c->requests, &c->accepts);
  c->synced_at = now;
}

static void sync_client(sim_client *c, double now) {
  lr_shared *sh = c->fleet->shared;
  const lr_guards *g = &c->fleet->g;
  for (int k = 0; k < c->npending; k++) {
    switch ((c->pending[k / 2] >> (k % 2 * 4)) & 15) {
    case LR_REMOTE_SUCCESS: lr_guards_success(sh, g, now); break;
    case LR_REMOTE_FAILURE: lr_guards_failure(sh, g, now); break;
    case LR_REMOTE_THROTTLED: lr_guards_throttled(sh, g, now); break;
    case SPEND: lr_budget_spend(sh, g); break;
    default: lr_guards_answered(sh, g, now); break;
    }
  }
  lr_throttle_add(sh, g, c->new_requests, c->new_accepts, now);
  c->npending = 0;
  c->net = 0;
  c->new_requests = c->new_accepts = 0;
  snapshot(c, now);
}

void lr_simfleet_sync(lr_simfleet *s, long i, double now) { sync_client(&s->client[i], now); }

static long long view_tokens(const sim_client *c) {
  long long t = c->tokens + c->net, max = llround(c->fleet->g.max_tokens * 1000);
  return t < 0 ? 0 : t > max ? max : t;
}

static void first_sync(sim_client *c, double now) {
  if (c->synced_at < 0) sync_client(c, now);
}

static int budget_allows_retry(void *ud, double now) {
  sim_client *c = ud;
  first_sync(c, now);
  return view_tokens(c) * 2 > llround(c->fleet->g.max_tokens * 1000);
}

static int breaker_admits(void *ud, int first_attempt, double now, double left, lr_waiter *w) {
  (void)left, (void)w; /* a simulated round trip takes no time */
  sim_client *c = ud;
  first_sync(c, now);
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
  const lr_guards *g = &c->fleet->g;
  if (g->budget && o == LR_REMOTE_SUCCESS) c->net += llround(g->token_ratio * 1000);
  if (g->budget && (o == LR_REMOTE_FAILURE || o == SPEND)) c->net -= 1000;
  if (g->budget && o == LR_REMOTE_THROTTLED) c->net -= llround(g->throttle_cost * 1000);
  if (o == LR_REMOTE_SUCCESS || o == LR_REMOTE_ANSWERED) c->new_accepts++;
  if (c->npending == PENDING_MAX) sync_client(c, now);
  int k = c->npending++;
  if (k % 2 == 0) c->pending[k / 2] = 0;
  c->pending[k / 2] |= (unsigned char)((unsigned)o << (k % 2 * 4));
}

static void record(void *ud, lr_remote_outcome o, double now) {
  pend(ud, o, now);
  maybe_sync(ud, now);
}

static double refusal(const sim_client *c) {
  const lr_guards *g = &c->fleet->g;
  return lr_throttle_formula(g->throttle_k, c->requests + (double)c->new_requests,
                             c->accepts + (double)c->new_accepts);
}

static double throttle_request(void *ud, double now) {
  sim_client *c = ud;
  first_sync(c, now);
  double r = refusal(c);
  c->new_requests++;
  maybe_sync(c, now);
  return r;
}

static double throttle_refusal(void *ud, double now) {
  (void)now;
  return refusal(ud);
}

static void spend(void *ud, double now) { pend(ud, SPEND, now); }

static void refresh(void *ud, double now, double left, lr_waiter *w) {
  (void)left, (void)w; /* a simulated round trip takes no time */
  sim_client *c = ud;
  if (c->npending || c->synced_at < 0 || now - c->synced_at >= c->fleet->sync) sync_client(c, now);
}

static double tokens(void *ud) { return (double)view_tokens(ud) / 1000; }

/* The rate limiter as a process of the real fleet keeps it
 * (core/fleet/redis_rate.c): slots from its lease, a block leased from
 * the fleet's GCRA (a round trip) when none is left. */
static int rate_reserve(void *ud, double now, double at, double latest, double left, double u,
                        lr_waiter *w, double *wait) {
  (void)left, (void)w; /* a simulated round trip takes no time */
  sim_client *c = ud;
  const lr_guards *g = &c->fleet->g;
  if (!g->rate || g->rate_adaptive || !(g->rate_limit > 0)) return LR_REMOTE_LOCAL;
  if (!c->lease && (c->lease = malloc(sizeof *c->lease))) lr_lease_init(c->lease);
  if (!c->lease) return LR_REMOTE_LOCAL; /* out of memory: the local limiter */
  lr_lease *l = c->lease;
  int v = lr_lease_take(l, at, latest, wait);
  if (v == 0 && lr_lease_wait_full(l, now, at, u, wait)) return 0;
  if (v == 0) {
    double b, retry;
    long want = lr_lease_want(l, g->rate_limit);
    long n = lr_lease_grant(&c->fleet->tat, now, g->rate_limit, g->rate_burst, want,
                            lr_lease_horizon(now, latest), &b, &retry);
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
  return lr_budget_reserve_take(c->fleet->shared, &c->fleet->g, now);
}

const lr_remote_ops lr_simfleet_ops = {
  budget_allows_retry, breaker_admits, record,       refresh, tokens, throttle_request,
  throttle_refusal,    spend,          rate_reserve, NULL, /* the breaker's rate window: each client's own, as with Redis */
  reserve_take,
};
