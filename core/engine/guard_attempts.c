/* guard_attempts.c: max_attempts as a guard of the chain: a retry or a
 * hedge is refused once the call started as many attempts as it may
 * (hedges count: each is an attempt).  Nothing to hand back or record. */
#include "call_internal.h"

static int admit(luaretry_call *c, lr_ask *a, luaretry_decision *d) {
  if (a->after_wait || (a->kind != LR_KIND_RETRY && a->kind != LR_KIND_HEDGE)) return 0;
  if (c->started < c->max_attempts) return 0;
  if (a->kind == LR_KIND_HEDGE) return a->why = "max_attempts", 1;
  lr_call_stop_saying(c, d, LUARETRY_REASON_EXHAUSTED, "max_attempts",
                      "gave up after %d attempt%s over %.3f s", c->started,
                      c->started == 1 ? "" : "s", d->elapsed);
  return 1;
}

const lr_guard_ops lr_guard_attempts = { "max_attempts", admit, NULL, NULL };
