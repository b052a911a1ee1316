/* guard_deadline.c: the call's deadline as a guard of the chain: an
 * attempt must be able to start at least LR_ATTEMPT_LEAST before it (a
 * retry after its wait, a hedge now).  Nothing to hand back or record. */
#include "call_internal.h"

void lr_call_stop_starting_late(luaretry_call *c, luaretry_decision *d, const char *rule,
                                double at) {
  lr_call_stop_saying(c, d, LUARETRY_REASON_DEADLINE, rule,
                      "the next attempt would start at %.3f s, %s the deadline (%.3f s)", at,
                      at < c->deadline ? "less than 1 ms before" : "past", c->deadline);
}

static int admit(luaretry_call *c, lr_ask *a, luaretry_decision *d) {
  if (lr_deadline_allows(c, a)) return 0;
  if (a->kind == LR_KIND_HEDGE) return a->why = "deadline", 1;
  if (a->kind != LR_KIND_RETRY) return 0;
  lr_call_stop_starting_late(c, d, a->server ? "retry_after" : "deadline", a->at);
  return 1;
}

const lr_guard_ops lr_guard_deadline = { "deadline", admit, NULL, NULL };
