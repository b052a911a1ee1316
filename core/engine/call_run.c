/* call_run.c: the blocking call, the step API driven by the engine's own
 * waits for a host that gives it an operation. */
#include <string.h>

#include "call_internal.h"

_Thread_local luaretry_call *lr_operation_call;

/* The host's operation gave up on attempt `attempt` with code rc. */
static void gave_up(luaretry_call *c, int attempt, luaretry_code rc, luaretry_decision *d) {
  d->attempt = attempt;
  d->elapsed = luaretry_call_elapsed(c);
  d->hook_error = NULL;
  lr_call_stop_saying(c, d, LUARETRY_REASON_GAVE_UP, "operation",
                      "attempt %d: the operation "
                      "gave up: %s",
                      attempt, luaretry_strerror(rc));
  lr_count_unattempted(c);
  lr_call_say(LR_COLD_SLOT(c, errmsg), "%s", d->message ? d->message : "the operation gave up");
  lr_call_observe(c, NULL, d);
}

/* luaretry_call_next until it says go at once (a rate limiter's token may
 * take waits) or stop; a cancel stops the call. */
static luaretry_code await_token(luaretry_call *c, luaretry_decision *d) {
  for (;;) {
    luaretry_code rc = luaretry_call_next(c, d);
    if (rc != LUARETRY_OK || !d->retry || !(d->wait > 0)) return rc;
    if (lr_wait(&c->clock, &c->waiter, d->wait)) {
      luaretry_call_stop_cancelled(c, d);
      return LUARETRY_OK;
    }
  }
}

luaretry_code luaretry_call_run(luaretry_call *c, luaretry_operation_fn op, void *ud,
                                luaretry_decision *final) {
  if (!lr_call_ok(c)) return LUARETRY_E_ARG;
  if (!op || !final)
    return lr_call_refuse_null(c, "luaretry_call_run", !op ? "the operation" : "final");
  memset(final, 0, sizeof *final);
  atomic_store(&c->waiter.blocking, 1); /* its thread waits here anyway */
  if (c->stopped) {
    /* refused at begin (circuit open): a decision, not a misuse */
    if (c->attempts == 0) return luaretry_call_next(c, final);
    luaretry_call_next(c, final); /* how it stopped, as every step says it */
    lr_call_say(LR_COLD_SLOT(c, errmsg), "the call already stopped (%s); begin a new one",
                luaretry_reason_name(c->reason));
    return LUARETRY_E_STATE;
  }
  if (c->rules->guards.rate && c->attempts == 0) { /* the first attempt's token */
    luaretry_code rc = await_token(c, final);
    if (rc != LUARETRY_OK || !final->retry) return rc;
  }
  for (;;) {
    luaretry_outcome o;
    luaretry_outcome_init(&o);
    luaretry_call *outer = lr_operation_call;
    lr_operation_call = c;
    luaretry_code rc = op(ud, c, c->attempts + 1, c->next_timeout, &o);
    lr_operation_call = outer;
    /* a workflow's request refused: the call stopped (luaretry_call_stop_as) */
    if (c->stopped) return luaretry_call_next(c, final);
    if (rc != LUARETRY_OK) {
      /* a cancel that reached the operation is still a cancel */
      if (rc == LUARETRY_E_CANCELLED && luaretry_call_cancelled(c)) {
        final->attempt = c->attempts;
        luaretry_call_stop_cancelled(c, final);
        return LUARETRY_OK;
      }
      gave_up(c, c->attempts + 1, rc, final);
      return rc;
    }
    rc = luaretry_call_report(c, &o, final);
    if (rc != LUARETRY_OK || !final->retry) return rc;
    if (lr_wait(&c->clock, &c->waiter, final->wait)) {
      luaretry_call_stop_cancelled(c, final);
      return LUARETRY_OK;
    }
    rc = await_token(c, final); /* the breaker may have opened meanwhile */
    if (rc != LUARETRY_OK || !final->retry) return rc;
  }
}
