/* guard_hedging.c: hedging's own bound as a guard of the chain: at most
 * hedge.share of the policy's recent calls hedge ("The Tail at Scale":
 * hedge a few percent of requests), so that a slow but healthy service
 * never sends a hedge with every call.  Each call (or workflow request)
 * of a hedging policy adds `share` of a hedge to the credit, each hedge
 * takes a whole one (handed back when a later guard refuses it). */
#include "call_internal.h"

static int admit(luaretry_call *c, lr_ask *a, luaretry_decision *d) {
  (void)d;
  if (a->after_wait) return 0;
  if (a->kind == LR_KIND_FIRST || a->kind == LR_KIND_REQUEST) {
    lr_hedge_credit(c->shared, c->rules->hedge.share);
    return 0;
  }
  if (a->kind != LR_KIND_HEDGE) return 0;
  if (lr_hedge_take(c->shared)) {
    c->held |= 1u << LR_G_HEDGING;
    return 0;
  }
  a->why = "hedging's bound (hedge.share of recent calls) is reached";
  return 1;
}

static void give_back(luaretry_call *c) { lr_hedge_refund(c->shared); }

const lr_guard_ops lr_guard_hedging = { "hedging", admit, give_back, NULL };
