/* call_hedge.c: several attempts of one call in flight.  A hedge is
 * sent only for an idempotent request, and is an attempt for every guard:
 * it asks the whole chain (chain.c) now, and goes now or not at all. */
#include <stdlib.h>
#include <string.h>

#include "call_internal.h"

/* ---- hedging: several attempts of one call in flight */

luaretry_code luaretry_call_start(luaretry_call *c, int *attempt) {
  if (!lr_call_ok(c)) return LUARETRY_E_ARG;
  if (!attempt) return lr_call_refuse_null(c, "luaretry_call_start", "attempt");
  if (c->stopped) {
    lr_call_say(LR_COLD_SLOT(c, errmsg), "the call already stopped (%s); begin a new one",
                luaretry_reason_name(c->reason));
    return LUARETRY_E_STATE;
  }
  if (c->in_flight) {
    lr_call_say(LR_COLD_SLOT(c, errmsg),
                "attempt %d is still in flight: a second one is a hedge "
                "(luaretry_call_hedge)",
                c->flight[0].id);
    return LUARETRY_E_STATE;
  }
  double at = luaretry_call_elapsed(c);
  lr_chain_sent(c);
  c->flight[0] = (lr_flight){ ++c->started, 0, at };
  c->in_flight = 1;
  /* hedging's times in the cold block: most calls never hedge (none when
   * it cannot be had) */
  c->hedge_closed = c->rules->hedge.max <= 0 || c->no_hedge || !lr_call_cold_get(c);
  if (!c->hedge_closed) {
    c->cold->last_start = at;
    c->cold->hedge_delay = lr_latency_delay(&c->rules->hedge);
  }
  *attempt = c->started;
  return LUARETRY_OK;
}

double luaretry_call_hedge_in(const luaretry_call *c) {
  if (!lr_call_ok(c) || c->stopped || c->hedge_closed || c->in_flight == 0 ||
      c->hedges_in_flight >= c->rules->hedge.max)
    return -1;
  double left = c->cold->last_start + c->cold->hedge_delay - luaretry_call_elapsed(c);
  return left > 0 ? left : 0;
}

/* Why no hedge goes now (d filled, the round closed); 0 when one may. */
static int hedge_refused(luaretry_call *c, const luaretry_request *r, double now,
                         luaretry_decision *d) {
  const char *why = NULL;
  int idempotent = 1;
  char *err = lr_call_buffer(LR_COLD_SLOT(c, errmsg));
  lr_attempt_ctx ctx = lr_call_context(c, c->started + 1, now);
  if (!err) return -1;
  if (c->judge->is_idempotent(c->judge->ud, r, &idempotent, &ctx, err, MESSAGE_SIZE) != 0)
    return -1;
  lr_ask a = { LR_KIND_HEDGE, 0, 0, now, now, 0, NULL };
  if (!idempotent)
    why = "the request is not idempotent";
  else if (lr_chain_admit(c, &a, d))
    why = a.why;
  else
    lr_chain_sent(c); /* it goes now */
  if (!why) return 0;
  c->hedge_closed = 1;
  d->retry = 0;
  d->reason = LUARETRY_REASON_NONE;
  d->message = lr_call_say(LR_COLD_SLOT(c, message), "no hedge: %s", why);
  d->in_flight = c->in_flight;
  return 1;
}

luaretry_code luaretry_call_hedge(luaretry_call *c, const luaretry_request *r,
                                  luaretry_decision *d) {
  if (!lr_call_ok(c)) return LUARETRY_E_ARG;
  if (!r || !d) return lr_call_refuse_null(c, "luaretry_call_hedge", !r ? "the request" : "d");
  memset(d, 0, sizeof *d);
  d->attempt = c->started;
  d->elapsed = luaretry_call_elapsed(c);
  if (luaretry_call_hedge_in(c) != 0) {
    d->in_flight = c->in_flight;
    d->message = c->stopped ? NULL : "no hedge due";
    d->reason = c->stopped ? c->reason : LUARETRY_REASON_NONE;
    return LUARETRY_OK;
  }
  if (c->flight == &c->one) { /* before the guards: what they give is spent at once */
    lr_flight *more = malloc(LR_FLIGHT_MAX * sizeof *more);
    if (!more) return LUARETRY_E_NOMEM;
    more[0] = c->one;
    c->flight = more;
  }
  int refused = hedge_refused(c, r, d->elapsed, d);
  if (refused < 0) return LUARETRY_E_POLICY;
  if (refused) return LUARETRY_OK;
  lr_count(c->shared, LR_M_HEDGES, 1);
  c->flight[c->in_flight++] = (lr_flight){ ++c->started, 1, d->elapsed };
  c->hedges_in_flight++;
  c->cold->last_start = d->elapsed;
  d->retry = 1;
  d->hedge = 1;
  d->attempt = c->started;
  d->next_timeout = c->next_timeout = lr_call_timeout_at(c, d->elapsed); /* the hedge's */
  d->in_flight = c->in_flight;
  d->rule = "hedge";
  return LUARETRY_OK;
}
