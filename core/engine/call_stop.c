/* call_stop.c: how a call stops, and the messages saying why: the
 * buffers every part of the state machine writes its reasons into. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "call_internal.h"

/* One of the call's message buffers, made on first use; NULL when out of
 * memory (the message is then left out, never the decision). */
lr_call_cold *lr_call_cold_get(luaretry_call *c) {
  if (!c->cold && (c->cold = calloc(1, sizeof *c->cold)))
    c->cold->throttle_previous = c->rules->throttle_backoff.initial;
  return c->cold;
}

lr_call_data *lr_attempt_data(const lr_attempt_ctx *ctx) {
  if (ctx->data || !ctx->call) return ctx->data;
  lr_call_cold *cold = lr_call_cold_get(ctx->call);
  return cold ? &cold->data : NULL;
}

char *lr_call_buffer(char **slot) {
  if (!slot) return NULL;
  if (!*slot && (*slot = malloc(MESSAGE_SIZE))) **slot = '\0'; /* no failure said yet */
  return *slot;
}

const char *lr_call_say(char **slot, const char *fmt, ...) {
  char *b = lr_call_buffer(slot);
  if (!b) return NULL;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, MESSAGE_SIZE, fmt, ap);
  va_end(ap);
  return b;
}

static const int REASON_METRIC[] = {
  [LUARETRY_REASON_SUCCESS] = LR_M_SUCCESSES,
  [LUARETRY_REASON_FINAL] = LR_M_FINALS,
  [LUARETRY_REASON_EXHAUSTED] = LR_M_EXHAUSTED,
  [LUARETRY_REASON_DEADLINE] = LR_M_DEADLINE,
  [LUARETRY_REASON_POLICY_ERROR] = LR_M_POLICY_ERRORS,
  [LUARETRY_REASON_CANCELLED] = LR_M_CANCELLED,
  [LUARETRY_REASON_BUDGET] = LR_M_BUDGET,
  [LUARETRY_REASON_CIRCUIT_OPEN] = LR_M_CIRCUIT,
  [LUARETRY_REASON_GAVE_UP] = LR_M_GAVE_UP,
  [LUARETRY_REASON_SERVER_WAIT_TOO_LONG] = LR_M_SERVER_WAIT,
  [LUARETRY_REASON_ADMISSION] = LR_M_THROTTLE_STOPS,
  [LUARETRY_REASON_RATE_LIMIT] = LR_M_RATE_STOPS,
};

void lr_call_stop(luaretry_call *c, luaretry_decision *d, luaretry_reason r, const char *rule) {
  c->stopped = 1;
  c->reason = r;
  c->stop_rule = rule;
  c->next_timeout = 0;
  d->retry = 0;
  d->reason = r;
  d->wait = 0;
  d->next_timeout = 0;
  d->wait_source = LUARETRY_WAIT_NONE;
  d->rule = rule; /* static, or owned by the policy: no copy per decision */
  if (r != LUARETRY_REASON_NONE && !c->one_round) lr_count(c->shared, REASON_METRIC[r], 1);
  /* the attempts still in flight are the host's to cancel now; a
   * percentile hedge delay learns their time so far as a lower bound of
   * their latency (the slow ones are what it is for: left out, it would
   * learn from the fast half only) */
  d->in_flight = c->in_flight;
  if (c->in_flight) {
    lr_count(c->shared, LR_M_HEDGES_CANCELLED, c->in_flight);
    if (c->rules->hedge.percentile > 0) {
      double now = lr_clock_now(&c->clock) - c->start;
      for (int i = 0; i < c->in_flight; i++)
        lr_latency_record(c->rules->hedge.latency, now - c->flight[i].start);
    }
  }
  c->in_flight = c->hedges_in_flight = 0;
}

/* Stops the call for reason r with a message saying why. */
void lr_call_stop_saying(luaretry_call *c, luaretry_decision *d, luaretry_reason r,
                         const char *rule, const char *fmt, ...) {
  char *b = lr_call_buffer(LR_COLD_SLOT(c, message));
  if (b) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, MESSAGE_SIZE, fmt, ap);
    va_end(ap);
  }
  lr_call_stop(c, d, r, rule);
  d->message = b;
}

void lr_call_stop_starting_late(luaretry_call *c, luaretry_decision *d, const char *rule,
                                double at) {
  lr_call_stop_saying(
    c, d, LUARETRY_REASON_DEADLINE, rule,
    "the next attempt would start at %.*f s, %s the deadline (%.*f s)", lr_deadline_digits(c), at,
    at < c->deadline ? "less than 1 ms before" : "past", lr_deadline_digits(c), c->deadline);
}

void lr_call_stop_final(luaretry_call *c, luaretry_decision *d, const lr_verdict *v) {
  if (v->reason)
    lr_call_stop_saying(c, d, LUARETRY_REASON_FINAL, v->rule, "%s", v->message);
  else
    lr_call_stop(c, d, LUARETRY_REASON_FINAL, v->rule);
}
