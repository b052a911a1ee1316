/* guard_attempts.c: max_attempts as a guard of the chain: a retry or a
 * hedge is refused once the call started as many attempts as it may
 * (hedges count: each is an attempt).  Nothing to hand back or record. */
#include "call_internal.h"

static int admit(luaretry_call *c, lr_ask *a, luaretry_decision *d) {
  if (lr_attempts_allow(c, a)) return 0;
  /* below the policy's own: the caller's allowance (call_allowance.c) */
  int allowed = c->allowance >= 0 && c->max_attempts < lr_call_policy_attempts(c);
  const char *rule = allowed ? "retries" : "max_attempts";
  if (a->kind == LR_KIND_HEDGE) return a->why = rule, 1;
  lr_call_stop_saying(c, d, LUARETRY_REASON_EXHAUSTED, rule,
                      "gave up after %d attempt%s over %.3f s%s", c->started,
                      c->started == 1 ? "" : "s", d->elapsed,
                      allowed ? " (the caller's retries: it retries itself)" : "");
  return 1;
}

const lr_guard_ops lr_guard_attempts = { "max_attempts", admit, NULL, NULL };
