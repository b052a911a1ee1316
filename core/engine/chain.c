/* chain.c: one attempt, every guard.  The guards (guard_*.c, one unit
 * each, behind lr_guard_ops) in luaretry-policy(5)'s order: max
 * attempts, deadline, breaker, admission, budget (not for a first
 * attempt), hedging's bound (hedges), rate limiter and header pacing.  An
 * attempt of any kind asks them once, in that order; when one refuses,
 * what the earlier ones gave it (a half-open permit, a counted request, a
 * hedge's credit) is handed back.  An outcome is recorded once by each,
 * then once by the fleet's view.  The table of what each cell does is in
 * luaretry-policy(5), "One attempt, every guard". */
#include <string.h>

#include "call_internal.h"

static const lr_guard_ops *const CHAIN[LR_G_COUNT] = {
  [LR_G_ATTEMPTS] = &lr_guard_attempts, [LR_G_DEADLINE] = &lr_guard_deadline,
  [LR_G_BREAKER] = &lr_guard_breaker,   [LR_G_ADMISSION] = &lr_guard_admission,
  [LR_G_BUDGET] = &lr_guard_budget,     [LR_G_HEDGING] = &lr_guard_hedging,
  [LR_G_RATE] = &lr_guard_rate,
};

#define BIT(g) (1u << (g))

/* The guards that record outcomes (max attempts, the deadline and
 * hedging's bound record nothing). */
#define RECORDING (BIT(LR_G_BREAKER) | BIT(LR_G_ADMISSION) | BIT(LR_G_BUDGET) | BIT(LR_G_RATE))

/* What every outcome would otherwise work out again from chain_on and the
 * rules: who records which class of outcome (a fixed rate records
 * nothing; an adaptive one, without the headers, only successes and
 * throttling answers). */
static void derive(luaretry_call *c) {
  const lr_guards *g = &c->rules->guards;
  unsigned rec = c->chain_on & RECORDING;
  c->rec_told = (unsigned char)(g->rate_headers || g->rate_adaptive ? rec : rec & ~BIT(LR_G_RATE));
  c->rec_plain = (unsigned char)(g->rate_headers ? rec : rec & ~BIT(LR_G_RATE));
}

void lr_chain_narrow(luaretry_call *c, unsigned off) {
  c->chain_on &= (unsigned char)~off;
  derive(c);
}

/* Once per call, from its rules: which guards are on.  A guard that is
 * off is never asked nor told, so it costs nothing after this. */
void lr_chain_init(luaretry_call *c) {
  const lr_rules *r = c->rules;
  const lr_guards *g = &r->guards;
  unsigned on = (c->max_attempts > 0 ? BIT(LR_G_ATTEMPTS) : 0) |
                (c->deadline > 0 ? BIT(LR_G_DEADLINE) : 0) | (g->breaker ? BIT(LR_G_BREAKER) : 0) |
                (g->throttle_k > 0 ? BIT(LR_G_ADMISSION) : 0) | (g->budget ? BIT(LR_G_BUDGET) : 0) |
                /* share 1: every call may hedge, the bound is off */
                (r->hedge.max > 0 && !c->no_hedge && r->hedge.share < 1 ? BIT(LR_G_HEDGING) : 0) |
                (g->rate ? BIT(LR_G_RATE) : 0);
  c->chain_on = (unsigned char)on;
  derive(c);
  lr_call_rate_prepare(c);
}

/* What the guards before `upto` hold for the attempt, handed back. */
static void give_back(luaretry_call *c, int upto) {
  unsigned held = c->held & ((1u << upto) - 1);
  c->held = 0;
  for (; held; held &= held - 1) { /* the guards that hold something, in order */
    int i = __builtin_ctz(held);
    if (CHAIN[i]->give_back) CHAIN[i]->give_back(c);
  }
}

void lr_chain_give_back(luaretry_call *c) { give_back(c, LR_G_COUNT); }

/* Asks the guards of `on`, in order (one step each, not one per guard). */
/* The guards of `on` after the first (on: more than one), in order. */
static __attribute__((noinline)) int ask_each(luaretry_call *c, unsigned on, lr_ask *a,
                                              luaretry_decision *d) {
  for (; on; on &= on - 1) {
    int i = __builtin_ctz(on);
    if (!CHAIN[i]->admit(c, a, d)) continue;
    give_back(c, i);
    return 1;
  }
  return 0;
}

/* One guard left (a retry's usual case, its rate limiter): asked with no
 * loop to keep registers for. */
int lr_chain_ask(luaretry_call *c, unsigned on, lr_ask *a, luaretry_decision *d) {
  if (on & (on - 1)) return ask_each(c, on, a, d);
  if (!on) return 0;
  int i = __builtin_ctz(on);
  if (!CHAIN[i]->admit(c, a, d)) return 0;
  give_back(c, i);
  return 1;
}

/* The guards of `on`, in order, then the fleet's view once. */
static __attribute__((noinline)) void record_each(luaretry_call *c, unsigned on,
                                                  const lr_record *r) {
  for (; on; on &= on - 1) {
    int i = __builtin_ctz(on);
    if (CHAIN[i]->record) CHAIN[i]->record(c, r);
  }
  if (!c->remote || r->round) return;
  const lr_guards *g = &c->rules->guards;
  if (!(g->budget || g->breaker || g->throttle_k > 0)) return;
  static const lr_remote_outcome AS[] = { [LR_REC_SUCCESS] = LR_REMOTE_SUCCESS,
                                          [LR_REC_ANSWERED] = LR_REMOTE_ANSWERED,
                                          [LR_REC_FAILURE] = LR_REMOTE_FAILURE,
                                          [LR_REC_THROTTLED] = LR_REMOTE_THROTTLED };
  c->remote->ops->record(c->remote->ud, AS[r->cls], r->now);
}

void lr_chain_record_each(luaretry_call *c, const lr_record *r) {
  unsigned on = r->cls == LR_REC_FAILURE || r->cls == LR_REC_ANSWERED ? c->rec_plain : c->rec_told;
  if ((on & (on - 1)) || c->remote) {
    record_each(c, on, r);
    return;
  }
  /* one guard at most and no fleet's view (a retry's usual case, its
   * budget): told with no loop to keep registers for */
  const lr_guard_ops *g = on ? CHAIN[__builtin_ctz(on)] : NULL;
  if (g && g->record) g->record(c, r);
}

/* After a probe permit's round trip (lr_call_new): the first attempt has
 * what is left of the deadline, or the call stops if nothing is. */
void lr_call_started_late(luaretry_call *c) {
  double elapsed = lr_clock_now(&c->clock) - c->start;
  if (elapsed <= lr_latest_start(c)) {
    double t = lr_call_timeout_at(c, elapsed);
    if (t < c->next_timeout) c->next_timeout = t;
    return;
  }
  luaretry_decision d;
  memset(&d, 0, sizeof d);
  lr_call_stop_saying(c, &d, LUARETRY_REASON_DEADLINE, "deadline",
                      "the deadline (%.*f s) %s while the fleet was asked for a probe permit",
                      lr_deadline_digits(c), c->deadline, lr_deadline_came(c, elapsed));
  lr_chain_give_back(c);
  lr_count_unattempted(c);
}

/* A call the guards refuse before its first attempt (an open circuit,
 * admission) stops before it touches anything; a workflow's request asks
 * admission and adds to hedging's credit (the breaker counts its rounds),
 * and its rate token comes at luaretry_call_next, as a first attempt's. */
void lr_chain_begin(luaretry_call *c) {
  if (!(c->chain_on & (BIT(LR_G_BREAKER) | BIT(LR_G_ADMISSION) | BIT(LR_G_HEDGING)))) return;
  luaretry_decision d;
  memset(&d, 0, sizeof d);
  lr_ask a = { c->one_round ? LR_KIND_REQUEST : LR_KIND_FIRST, 0, 0, 0, 0, 0, NULL };
  if (lr_chain_admit(c, &a, &d)) lr_count_unattempted(c);
}

/* The fleet's view brought up to date before a retry; a retry that its
 * tokens refused before the wait has the same round trip ask the fleet's
 * reserve for it (its answer kept in c->reserve_asked for the budget's
 * admit: no round trip of its own). */
static int refresh_remote(luaretry_call *c, double *now, luaretry_decision *d) {
  double left = c->deadline > 0 ? c->deadline - (*now - c->start) : 0;
  int asked = c->reserve_asked == LR_RESERVE_ASKED;
  if (c->deadline <= 0 || left > 0) {
    int v = c->remote->ops->refresh(c->remote->ud, *now, left, &c->waiter, asked);
    if (asked && v != LR_REMOTE_LOCAL) c->reserve_asked = v ? LR_RESERVE_GOT : LR_RESERVE_GONE;
  }
  *now = lr_clock_now(&c->clock);
  double elapsed = *now - c->start;
  if (atomic_load(&c->waiter.cancelled)) {
    lr_call_stop(c, d, LUARETRY_REASON_CANCELLED, "cancel");
    return 1;
  }
  if (c->deadline > 0 && elapsed > lr_latest_start(c)) {
    lr_call_stop_saying(c, d, LUARETRY_REASON_DEADLINE, "deadline",
                        "the deadline (%.*f s) %s while the fleet's counts were brought up to date",
                        lr_deadline_digits(c), c->deadline, lr_deadline_came(c, elapsed));
    return 1;
  }
  double t = lr_call_timeout_at(c, elapsed);
  if (c->deadline > 0 && t < c->next_timeout) c->next_timeout = t;
  return 0;
}

/* As an attempt goes (luaretry_call_next): after a retry's wait the
 * fleet's view is brought up to date and the guards asked again (a retry
 * decided on counts that were stale is not made once the circuit opened
 * or the fleet's budget is spent), and the rate limiter gives a token not
 * asked for yet (the first attempt's; one whose time had not come). */
int lr_chain_going(luaretry_call *c, luaretry_decision *d) {
  const lr_guards *g = &c->rules->guards;
  lr_kind kind = c->attempts > 0 ? LR_KIND_RETRY : LR_KIND_FIRST;
  int refresh = c->attempts > 0 && c->remote && (g->budget || g->breaker || g->throttle_k > 0);
  /* Asked again as the attempt goes, only the guards with something to
   * say then (the others' admit returns 0 at once when after_wait): the
   * breaker for a retry holding no permit, the fleet's budget, the rate
   * limiter for a token not asked for yet. */
  unsigned ask = c->chain_on & (BIT(LR_G_BREAKER) | BIT(LR_G_BUDGET) | BIT(LR_G_RATE));
  if (kind != LR_KIND_RETRY || (c->held & BIT(LR_G_BREAKER))) ask &= ~BIT(LR_G_BREAKER);
  if (!c->remote) ask &= ~BIT(LR_G_BUDGET);
  if (c->admitted > c->attempts) ask &= ~BIT(LR_G_RATE);
  if (!ask && !refresh) return 0;
  double now = lr_clock_now(&c->clock);
  int stopped = 0;
  if (refresh) stopped = refresh_remote(c, &now, d);
  lr_ask a = { kind, 1, 0, 0, 0, 0, NULL };
  a.at = d->elapsed;
  a.now = now - c->start;
  if (!stopped && !lr_chain_ask(c, ask, &a, d)) return 0;
  lr_chain_give_back(c);
  lr_count_unattempted(c);
  lr_call_observe(c, NULL, d);
  return 1;
}
