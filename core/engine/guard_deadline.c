/* guard_deadline.c: the call's deadline as a guard of the chain: an
 * attempt must be able to start at least LR_ATTEMPT_LEAST before it (a
 * retry after its wait, a hedge now).  Nothing to hand back or record. */
#include "call_internal.h"

static int admit(luaretry_call *c, lr_ask *a, luaretry_decision *d) {
  if (lr_deadline_allows(c, a)) return 0;
  if (a->kind == LR_KIND_HEDGE) return a->why = "deadline", 1;
  if (a->kind != LR_KIND_RETRY) return 0;
  lr_call_stop_starting_late(c, d, a->server ? "retry_after" : "deadline", a->at);
  return 1;
}

const lr_guard_ops lr_guard_deadline = { "deadline", admit, NULL, NULL };
