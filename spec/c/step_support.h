/* step_support.h: what the step API's tests share, written once.
 *
 *   step_load("=name", src)   a policy from a string, its chunk named for
 *                             the errors; a failed load is a failed check
 *   step_options(&o, seed)    call options on the virtual clock, fixed seed
 *   step_begin(p, seed)       a call begun with those options (checked)
 *   step_status(503)          an outcome that is a bare status
 *   step_metrics(p)           the policy's counters (checked)
 *   STEP_GET, STEP_POST       requests for luaretry_call_hedge
 *
 * Public API only.  Includes check.h, so, like it, from a single
 * translation unit.
 */
#ifndef LUARETRY_STEP_SUPPORT_H
#define LUARETRY_STEP_SUPPORT_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "luaretry.h"

static const luaretry_request STEP_GET
  __attribute__((unused)) = { .method = "GET", .url = "http://example.invalid/" };
static const luaretry_request STEP_POST
  __attribute__((unused)) = { .method = "POST", .url = "http://example.invalid/" };

static inline luaretry_policy *step_load(const char *chunk, const char *src) {
  luaretry_policy *p = NULL;
  if (!CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK)) return NULL;
  if (!CHECK_CODE(luaretry_policy_load_string(p, chunk, src), LUARETRY_OK))
    fprintf(stderr, "  load %s: %s\n", chunk, luaretry_policy_errmsg(p));
  return p;
}

static inline void step_options(luaretry_call_options *o, uint64_t seed) {
  luaretry_call_options_init(o);
  o->flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME;
  o->seed = seed;
}

static inline luaretry_call *step_begin(luaretry_policy *p, uint64_t seed) {
  luaretry_call_options o;
  step_options(&o, seed);
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  CHECK(c != NULL);
  return c;
}

static inline luaretry_outcome step_status(int status) {
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = status;
  return o;
}

static inline luaretry_metrics step_metrics(luaretry_policy *p) {
  luaretry_metrics m;
  memset(&m, 0, sizeof m);
  CHECK_CODE(luaretry_policy_metrics(p, &m), LUARETRY_OK);
  return m;
}

#endif
