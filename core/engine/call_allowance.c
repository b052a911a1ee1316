/* call_allowance.c: one retry layer across services.  A call may be given
 * the retries its caller allows (LUARETRY_CALL_RETRIES, read from the
 * caller's own request), and each attempt tells the next service the time
 * it is waited for and the retries it may make (the policy's `propagate`).
 * The rule: the outermost layer that can retry does; each layer below is
 * told 0, and so makes one attempt per request it gets, but for a failure
 * no connection was made for, which only it can see and retry. */
#include <math.h>
#include <string.h>

#include "call_internal.h"

/* The policy's own max_attempts (0: none), before the caller's allowance. */
long lr_call_policy_attempts(const luaretry_call *c) { return c->rules->max_attempts; }

/* A failure no connection was made for: the caller never sees it and
 * cannot retry it, so its retry spends none of the caller's allowance (the
 * call gets the attempt back, within the policy's own max_attempts).  An
 * outcome with an error and no status (lr_call_unseen_failure's test). */
void lr_call_unseen_failure_named(luaretry_call *c, const luaretry_outcome *o) {
  if (strcmp(o->error, "connect") != 0 && strcmp(o->error, "dns") != 0) return;
  long most = lr_call_policy_attempts(c);
  if (most <= 0 || c->max_attempts < most) c->max_attempts++;
}

long long lr_call_pass_timeout_ms(const luaretry_call *c) {
  if (c->next_timeout <= 0) return -1;
  double ms = floor(c->next_timeout * 1000);
  /* 12 digits: a longer value is garbage to the reader of the next layer */
  return ms > 999999999999.0 ? 999999999999LL : (long long)ms;
}

long lr_call_pass_retries(const luaretry_call *c) {
  if (c->max_attempts != 1) return 0; /* it retries itself: no one below does */
  return c->allowance;                /* a call that cannot retry hands its own on */
}
