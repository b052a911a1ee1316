/* herd.c: luaretry_simulate_herd, N clients failing together, each one
 * call through the engine on the virtual clock: the one herd simulator,
 * for `simulate --clients` (with --fleet or --process too) and for hosts.
 * With `fleet` (a simulated fleet, engine/simfleet.c) or `shared` (the
 * guards of one process, fresh ones) the clients are driven in the order
 * of their attempts (a heap of next-attempt times; ties by client number,
 * so a seed gives the same result on every run); without either, each call
 * has guards of its own and nothing joins them, so the clients run one
 * after the other and memory stays flat whatever N.  Calls are isolated:
 * the policy's counters and the real fleet are never touched. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

#define HERD_MAX_CLIENTS 1000000L

/* Client k's start when k < 0 (client k + n), else its next attempt:
 * at one time, the clients that start then start first. */
typedef struct {
  double t;
  long k;
} herd_event;

typedef struct {
  herd_event *heap;
  long n;
  luaretry_call **calls;
  int *attempts; /* each client's, at most LUARETRY_SIMULATE_ATTEMPT_CAP */
  lr_simfleet *fleet;
  lr_shared *process; /* shared: the one process's guards; fleet: its
                         clients' local guards, which decide nothing */
  double outage;
  int status; /* the outage's answer */
  luaretry_herd_result *r;
  const luaretry_herd_options *o;
  long base;     /* calls[k], attempts[k] are client base + k's */
  int stopped;   /* `each` asked to stop */
  int lazy_pace; /* a fleet's clients: each one's adaptive rate made when needed */
} herd_run;

static int before(const herd_event *a, const herd_event *b) {
  return a->t < b->t || (a->t == b->t && a->k < b->k);
}

static void push(herd_run *h, double t, long i) {
  long k = h->n++;
  herd_event e = { t, i };
  if (!h->calls[i - h->base]) e.k = i - h->o->clients; /* its start */
  while (k > 0 && before(&e, &h->heap[(k - 1) / 2])) {
    h->heap[k] = h->heap[(k - 1) / 2];
    k = (k - 1) / 2;
  }
  h->heap[k] = e;
}

static herd_event pop(herd_run *h) {
  herd_event top = h->heap[0], last = h->heap[--h->n];
  long k = 0;
  for (;;) {
    long c = 2 * k + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && before(&h->heap[c + 1], &h->heap[c])) c++;
    if (!before(&h->heap[c], &last)) break;
    h->heap[k] = h->heap[c];
    k = c;
  }
  if (h->n) h->heap[k] = last;
  return top;
}

/* Client i's start: waves of o->wave clients every o->wave_every seconds
 * (processes started by a batch), or t=0.  A call's clock starts at 0 at
 * its client's start: the herd's time is start + the call's elapsed. */
static double start_of(const herd_run *h, long i) {
  return h->o->wave > 0 ? (double)(i / h->o->wave) * h->o->wave_every : 0;
}

/* Client i's call is over: its process ends (a fleet's client sends what
 * it still owes). */
static void finish(herd_run *h, long i, luaretry_reason reason, double t) {
  if ((size_t)reason < sizeof h->r->stops / sizeof h->r->stops[0]) h->r->stops[reason]++;
  h->r->client_seconds += t - start_of(h, i);
  if (h->fleet) lr_simfleet_end(h->fleet, i, t);
  luaretry_call_free(h->calls[i - h->base]);
  h->calls[i - h->base] = NULL;
}

/* Client i at time t: the pre-attempt check, one attempt, its decision. */
static luaretry_code step(herd_run *h, long i, double t) {
  luaretry_call *c = h->calls[i - h->base];
  int *attempts = &h->attempts[i - h->base];
  luaretry_decision d;
  luaretry_code rc = luaretry_call_next(c, &d);
  if (rc != LUARETRY_OK) return rc;
  if (!d.retry) return finish(h, i, d.reason, t), LUARETRY_OK;
  if (d.wait > 0) { /* the rate limiter's token comes later: back in line */
    luaretry_call_wait(c, d.wait);
    if (h->heap)
      push(h, start_of(h, i) + luaretry_call_elapsed(c), i); /* run_each: its loop asks again */
    return LUARETRY_OK;
  }
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = t < h->outage ? h->status : 200;
  o.body = "";
  o.method = "GET";
  if ((rc = luaretry_call_report(c, &o, &d)) != LUARETRY_OK) return rc;
  if ((*attempts)++ == 0) h->r->first_attempts++;
  h->r->attempts++;
  if (t > h->r->last_attempt) h->r->last_attempt = t;
  if (h->o->each && h->o->each(h->o->ud, i, t, o.status, &d)) h->stopped = 1;
  if (!d.retry || *attempts >= LUARETRY_SIMULATE_ATTEMPT_CAP || h->stopped)
    return finish(h, i, d.retry ? LUARETRY_REASON_NONE : d.reason, t), LUARETRY_OK;
  luaretry_call_wait(c, d.wait); /* advances the call's virtual clock */
  if (h->heap) push(h, start_of(h, i) + luaretry_call_elapsed(c), i);
  return LUARETRY_OK;
}

/* Begins client i's call at its start. */
static luaretry_code begin_one(herd_run *h, luaretry_policy *p, lr_gen *g, long i) {
  luaretry_call_options opt;
  luaretry_call_options_init(&opt);
  opt.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME |
              (h->process ? 0 : LUARETRY_CALL_ISOLATED) | (h->lazy_pace ? LR_CALL_LAZY_PACE : 0);
  opt.seed = h->o->seed + (uint64_t)i;
  lr_gen_ref(g); /* the call's; its judge gives it back */
  const lr_remote *remote = NULL;
  if (h->fleet) {
    lr_simfleet_begin(h->fleet, i, start_of(h, i)); /* as `run` does before its call */
    remote = lr_simfleet_client(h->fleet, i);
  }
  h->attempts[i - h->base] = 0;
  return lr_call_new(&g->judge, &g->rules, 0, h->process ? h->process : lr_policy_shared(p), remote,
                     &opt, &h->calls[i - h->base]);
}

static double fleet_sync(luaretry_policy *p, const luaretry_herd_options *o) {
  if (o->sync > 0) return o->sync;
  pthread_mutex_lock(&p->lock);
  double s = (double)p->tuning.fleet_sync / 1000;
  pthread_mutex_unlock(&p->lock);
  return s;
}

/* A fleet or one process: every call begins at its start (t=0, or its
 * wave's), and the heap drives them in order; a call is made when its
 * client starts and freed when it ends. */
static luaretry_code run_heap(herd_run *h, luaretry_policy *p, lr_gen *g) {
  long n = h->o->clients;
  h->heap = malloc(sizeof *h->heap * (size_t)n);
  h->calls = calloc((size_t)n, sizeof *h->calls);
  h->attempts = calloc((size_t)n, sizeof *h->attempts);
  if (h->o->fleet)
    h->fleet = lr_simfleet_new(&g->rules.guards, fleet_sync(p, h->o), n, h->o->wave,
                               h->o->wave_every, !h->o->local);
  /* A fleet's clients: while the simulated fleet answers (it always does)
   * their local guards decide nothing, so they share one lr_shared (4 KiB)
   * instead of one each; but each process keeps a pace of its own (an
   * adaptive rate, the server's RateLimit quota): an adaptive rate that
   * starts unlimited is made when the client first needs it
   * (LR_CALL_LAZY_PACE), other paces are each client's from the start. */
  const lr_guards *gd = &g->rules.guards;
  h->lazy_pace = h->o->fleet && !h->o->shared && gd->rate && gd->rate_adaptive &&
                 !gd->rate_headers && !(gd->rate_limit > 0);
  int one_local =
    h->o->shared || (h->o->fleet && (h->lazy_pace || !(gd->rate_adaptive || gd->rate_headers)));
  if (one_local && (h->process = lr_aligned_calloc(sizeof *h->process)))
    lr_shared_init(h->process, gd);
  if ((one_local && !h->process) || (h->o->fleet && !h->fleet)) return LUARETRY_E_NOMEM;
  if (!h->heap || !h->calls || !h->attempts) return LUARETRY_E_NOMEM;
  luaretry_code rc = LUARETRY_OK;
  for (long i = 0; i < n; i++) push(h, start_of(h, i), i);
  while (rc == LUARETRY_OK && h->n > 0 && !h->stopped) {
    herd_event e = pop(h);
    if (e.k < 0) { /* client e.k + n starts: its first attempt after every start at e.t */
      rc = begin_one(h, p, g, e.k + n);
      if (rc == LUARETRY_OK) push(h, e.t, e.k + n);
    } else {
      rc = step(h, e.k, e.t);
    }
  }
  return rc;
}

/* Clients with guards of their own: one after the other, one call alive. */
static luaretry_code run_each(herd_run *h, luaretry_policy *p, lr_gen *g) {
  luaretry_call *call = NULL;
  int attempts = 0;
  h->calls = &call;
  h->attempts = &attempts;
  luaretry_code rc = LUARETRY_OK;
  for (long i = 0; i < h->o->clients && rc == LUARETRY_OK && !h->stopped; i++) {
    h->base = i;
    rc = begin_one(h, p, g, i);
    while (rc == LUARETRY_OK && call) rc = step(h, i, start_of(h, i) + luaretry_call_elapsed(call));
    luaretry_call_free(call);
    call = NULL;
  }
  h->calls = NULL; /* not ours to free */
  h->attempts = NULL;
  return rc;
}

luaretry_code luaretry_simulate_herd(luaretry_policy *p, const luaretry_herd_options *o,
                                     luaretry_herd_result *r) {
  if (!lr_policy_ok(p) || !o || !r || o->clients < 1 || o->clients > HERD_MAX_CLIENTS ||
      !(o->outage >= 0 && o->outage <= 1e6) || !(o->sync >= 0 && o->sync <= 3600) || o->wave < 0 ||
      (o->wave && o->shared) || !(o->wave_every >= 0 && o->wave_every <= 1e6) ||
      (o->outage_status && (o->outage_status < 100 || o->outage_status > 599)))
    return LUARETRY_E_ARG;
  memset(r, 0, sizeof *r);
  lr_gen *g = lr_policy_current(p);
  if (!g) return LUARETRY_E_STATE;
  herd_run h;
  memset(&h, 0, sizeof h);
  h.outage = o->outage;
  h.status = o->outage_status ? o->outage_status : 503;
  h.r = r;
  h.o = o;
  r->clients = (uint64_t)o->clients;
  luaretry_code rc = o->fleet || o->shared ? run_heap(&h, p, g) : run_each(&h, p, g);
  if (rc == LUARETRY_OK && h.stopped) rc = LUARETRY_E_CANCELLED;
  for (long i = 0; h.calls && i < o->clients; i++) luaretry_call_free(h.calls[i]);
  r->round_trips = lr_simfleet_round_trips(h.fleet);
  lr_simfleet_free(h.fleet);
  free(h.process);
  free(h.heap);
  free(h.calls);
  free(h.attempts);
  lr_gen_unref(g);
  if (r->first_attempts) r->amplification = (double)r->attempts / (double)r->first_attempts;
  return rc;
}
