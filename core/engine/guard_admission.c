/* guard_admission.c: client-side throttling (the SRE book's formula;
 * Envoy's admission control; the policy's `throttle`) as a guard of the
 * chain.  Every attempt is a request: a first, a retry, a hedge, a
 * workflow's request.  It is counted when asked, and uncounted when a
 * later guard refuses the attempt or the call stops before it goes: a
 * request is counted when it is sent.  A refusal counts (the SRE book's
 * requests are the ones asked for).  The fleet's counts decide first;
 * the local ones are counted either way, and one draw is made either way
 * so that a seed gives the same schedule with or without a fleet. */
#include "call_internal.h"

static void stop(luaretry_call *c, luaretry_decision *d, double at, int remote) {
  const lr_guards *g = &c->rules->guards;
  double r = remote && c->remote->ops->throttle_refusal
               ? c->remote->ops->throttle_refusal(c->remote->ud, at)
               : LR_REMOTE_LOCAL;
  if (r < 0) r = lr_throttle_refusal(c->shared, g, c->guard_origin + at);
  lr_call_stop_saying(c, d, LUARETRY_REASON_ADMISSION, "admission",
                      "%sadmission control refuses "
                      "(it refuses %.0f%% of attempts now: fewer than 1 in %g was accepted over "
                      "%g s)",
                      remote ? "the fleet's " : "", 100 * r, g->throttle_k, g->throttle_window);
}

static int admit(luaretry_call *c, lr_ask *a, luaretry_decision *d) {
  const lr_guards *g = &c->rules->guards;
  if (a->after_wait) return 0; /* counted when the attempt was decided */
  double at = c->start + a->now, u = lr_rng_unit(&c->rng), r = LR_REMOTE_LOCAL;
  if (c->remote && c->remote->ops->throttle_request)
    r = c->remote->ops->throttle_request(c->remote->ud, at);
  c->held_at = c->guard_origin + at;
  int local = lr_throttle_admits(c->shared, g, c->held_at, u);
  int remote = r >= 0, refused = remote ? u < r : !local;
  if (!refused) {
    c->held |= 1u << LR_G_ADMISSION;
    return 0;
  }
  if (a->kind == LR_KIND_HEDGE)
    a->why = "admission control refuses";
  else
    stop(c, d, at, remote);
  return 1;
}

static void give_back(luaretry_call *c) {
  lr_throttle_unrequest(c->shared, &c->rules->guards, c->held_at);
  /* the fleet's count too (held_at is the time it was given: a call that
   * reaches the fleet runs on the real clock) */
  if (c->remote && c->remote->ops->throttle_unrequest)
    c->remote->ops->throttle_unrequest(c->remote->ud, c->held_at);
}

/* An accept: a success or a final answer (the service took the request),
 * counted by the attempt that made the request, locally and in the fleet
 * (a workflow's request: its round's call never asks admission). */
static void record(luaretry_call *c, const lr_record *r) {
  int accepted = r->cls == LR_REC_SUCCESS || r->cls == LR_REC_ANSWERED;
  lr_throttle_record(c->shared, &c->rules->guards, accepted, c->guard_origin + r->now);
  if (accepted && c->remote && c->remote->ops->throttle_accept)
    c->remote->ops->throttle_accept(c->remote->ud, r->now);
}

const lr_guard_ops lr_guard_admission = { "admission", admit, give_back, record };
