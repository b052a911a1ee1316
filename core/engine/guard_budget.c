/* guard_budget.c: the retry budget (gRPC's retry throttling) as a guard
 * of the chain.  It gates retries and hedges (none while more than half
 * its tokens are gone), never a first attempt nor a workflow's request
 * (it counts the workflow's rounds), and is charged by failures only: a
 * hedge takes nothing as it goes (gRPC A6), a failed attempt one token,
 * a throttling answer throttle_cost, a success gives token_ratio back.
 * The fleet's budget is asked first, and again after a retry's wait (its
 * counts were brought up to date); the local one was current when the
 * retry was decided. */
#include "call_internal.h"

static double tokens(luaretry_call *c, int remote) {
  return remote ? c->remote->ops->tokens(c->remote->ud) : lr_budget_tokens(c->shared);
}

/* A retry the tokens refuse: the budget's floor (budget.reserve).  The
 * fleet's reserve is the fleet's, asked after the wait: deciding now, a
 * retry the fleet's tokens refuse goes on to its wait (LR_RESERVE_ASKED),
 * and the sync after the wait asks the reserve for it (chain.c); its
 * answer (`asked`: LR_RESERVE_GOT or _GONE) decides, else the reserve's
 * own question (a round trip): never two retries of the reserve for one. */
static int reserve_allows(luaretry_call *c, double now, int remote, int after_wait, int asked) {
  const lr_guards *g = &c->rules->guards;
  if (!(g->reserve > 0)) return 0;
  if (remote && c->remote->ops->reserve_take) {
    if (!after_wait) return c->reserve_asked = LR_RESERVE_ASKED;
    if (asked == LR_RESERVE_GOT || asked == LR_RESERVE_GONE) return asked == LR_RESERVE_GOT;
    double d = c->deadline, left = d > 0 ? d - (now - c->start) : 0;
    if (d > 0 && left <= 0) left = 1e-9;
    int v = c->remote->ops->reserve_take(c->remote->ud, now, left, &c->waiter);
    if (v != LR_REMOTE_LOCAL) return v;
  }
  return lr_budget_reserve_take(c->shared, g, c->guard_origin + now);
}

/* The fleet's budget, or a retry or hedge the local tokens refuse: out
 * of line, so that a retry they allow (nearly every one) costs a load
 * and a comparison. */
static __attribute__((noinline)) int admit_slow(luaretry_call *c, lr_ask *a, luaretry_decision *d) {
  const lr_guards *g = &c->rules->guards;
  double now = c->start + a->now;
  if (a->after_wait) { /* the fleet's budget again, its counts brought up to date */
    if (!c->remote) return 0;
    int asked = c->reserve_asked, w = c->remote->ops->budget_allows_retry(c->remote->ud, now);
    c->reserve_asked = 0;
    /* a retry of the fleet's reserve taken for it lets it go, whatever
     * the view says now */
    int refused = asked == LR_RESERVE_GOT ? 0
                  : w == 0                ? !reserve_allows(c, now, 1, 1, asked)
                  : w != LR_REMOTE_LOCAL || !asked
                    ? 0
                    : !lr_budget_allows_retry(c->shared, g) &&
                        !lr_budget_reserve_take(c->shared, g, c->guard_origin + now);
    if (!refused) return 0;
    lr_call_stop_saying(c, d, LUARETRY_REASON_BUDGET, "budget",
                        "%sretry budget was spent while the call waited to retry: %.3f of %g "
                        "tokens left, retries need more than half%s",
                        lr_whose(w != LR_REMOTE_LOCAL), tokens(c, w != LR_REMOTE_LOCAL),
                        g->max_tokens, g->reserve > 0 ? ", and its reserve is spent" : "");
    return 1;
  }
  int v = LR_REMOTE_LOCAL, remote = 0;
  if (c->remote) v = c->remote->ops->budget_allows_retry(c->remote->ud, now);
  if (v != LR_REMOTE_LOCAL)
    remote = 1;
  else
    v = lr_budget_allows_retry(c->shared, g);
  if (v) return 0;
  if (a->kind == LR_KIND_HEDGE) return a->why = "the retry budget refuses", 1;
  if (reserve_allows(c, now, remote, a->after_wait, 0)) return 0; /* the floor */
  {
    char floor[80] = "";
    if (g->reserve > 0)
      lr_fmt(floor, sizeof floor, ", and its reserve (%g retries per second) is spent", g->reserve);
    lr_call_stop_saying(c, d, LUARETRY_REASON_BUDGET, "budget",
                        "%sretry budget refuses: %.3f of %g tokens left, retries need more "
                        "than half%s",
                        lr_whose(remote), tokens(c, remote), g->max_tokens, floor);
  }
  return 1;
}

static int admit(luaretry_call *c, lr_ask *a, luaretry_decision *d) {
  if (lr_budget_allows(c, a)) return 0;
  return admit_slow(c, a, d);
}

static void record(luaretry_call *c, const lr_record *r) {
  if (r->round) return;
  const lr_guards *g = &c->rules->guards;
  switch (r->cls) {
  case LR_REC_SUCCESS: lr_budget_success(c->shared, g); break;
  case LR_REC_FAILURE: lr_budget_failure(c->shared, g); break;
  case LR_REC_THROTTLED: lr_budget_throttled(c->shared, g); break;
  case LR_REC_ANSWERED: break;
  }
}

const lr_guard_ops lr_guard_budget = { "budget", admit, NULL, record };
