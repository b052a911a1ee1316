/* propagate.c: one retry layer and one deadline across services.  Out: the
 * headers each attempt carries (the policy's attempt_header, and
 * propagate's: the milliseconds the attempt is waited for, the retries the
 * next service may make).  In: the same headers, read from a request a
 * host serves, into the options of the call it makes for it.  The rule
 * itself (who retries) is the engine's: call_allowance.c. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "policy.h"

luaretry_code lr_add_policy_headers(const lr_rules *r, int attempt, const luaretry_call *c,
                                    luaretry_request *out, void **block) {
  luaretry_header add[3];
  char values[3][24];
  size_t n = 0;
  if (r->attempt_header[0]) {
    snprintf(values[n], sizeof values[n], "%d", attempt);
    add[n].name = r->attempt_header;
    add[n].value = values[n];
    n++;
  }
  long long ms = c && r->propagate_deadline[0] ? lr_call_pass_timeout_ms(c) : -1;
  if (ms >= 0) {
    snprintf(values[n], sizeof values[n], "%lld", ms);
    add[n].name = r->propagate_deadline;
    add[n].value = values[n];
    n++;
  }
  long retries = c && r->propagate_retries[0] ? lr_call_pass_retries(c) : -1;
  if (retries >= 0) {
    snprintf(values[n], sizeof values[n], "%ld", retries);
    add[n].name = r->propagate_retries;
    add[n].value = values[n];
    n++;
  }
  return n ? lr_add_headers(add, n, out, block) : LUARETRY_OK;
}

/* A header's value as a whole number of at most 12 digits, optional
 * whitespace around it; -1 when it is anything else. */
static long long whole_number(const char *v) {
  while (*v == ' ' || *v == '\t') v++;
  long long n = 0;
  int digits = 0;
  for (; *v >= '0' && *v <= '9'; v++) {
    if (++digits > 12) return -1;
    n = n * 10 + (*v - '0');
  }
  while (*v == ' ' || *v == '\t') v++;
  return digits && !*v ? n : -1;
}

/* The smallest valid value among the headers named `name`: -1 when none;
 * *garbage counts those that do not read. */
static long long smallest(const luaretry_header *h, size_t count, const char *name, int *garbage) {
  long long least = -1;
  for (size_t i = 0; name[0] && i < count; i++) {
    if (!h[i].name || strcasecmp(h[i].name, name) != 0) continue;
    long long v = h[i].value ? whole_number(h[i].value) : -1;
    if (v < 0)
      ++*garbage;
    else if (least < 0 || v < least)
      least = v;
  }
  return least;
}

luaretry_code luaretry_call_options_inbound(const luaretry_policy *p,
                                            const luaretry_header *headers, size_t count,
                                            luaretry_call_options *o) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  const char *fn = "luaretry_call_options_inbound";
  if (!o) return lr_policy_refuse_null(p, fn, "o");
  if (!headers && count) {
    lr_fmt(lr_policy_errbuf((luaretry_policy *)p), LR_ERRMSG_SIZE,
           "%s: %zu headers and no array of them", fn, count);
    return LUARETRY_E_ARG;
  }
  char deadline[64], retries[64];
  pthread_mutex_t *lock = (pthread_mutex_t *)&p->lock; /* a reader's lock: p is not changed */
  pthread_mutex_lock(lock);
  int named = p->tuning.propagate;
  lr_strlcpy(deadline, named ? p->tuning.propagate_deadline : LR_PROPAGATE_DEADLINE,
             sizeof deadline);
  lr_strlcpy(retries, named ? p->tuning.propagate_retries : LR_PROPAGATE_RETRIES, sizeof retries);
  pthread_mutex_unlock(lock);
  int garbage = 0;
  long long ms = smallest(headers, count, deadline, &garbage);
  long long allowed = smallest(headers, count, retries, &garbage);
  if (ms >= 0) { /* only ever earlier than what o says already */
    double at = luaretry_clock_now() + (double)ms / 1000;
    /* a NaN there already stops the call at once: nothing is earlier */
    if (!(o->flags & LUARETRY_CALL_DEADLINE) || at < o->deadline) o->deadline = at;
    o->flags |= LUARETRY_CALL_DEADLINE;
  }
  if (allowed >= 0) {
    uint32_t n = allowed > UINT32_MAX ? UINT32_MAX : (uint32_t)allowed;
    if (!(o->flags & LUARETRY_CALL_RETRIES) || n < o->retries) o->retries = n;
    o->flags |= LUARETRY_CALL_RETRIES;
  }
  return garbage ? LUARETRY_E_ARG : LUARETRY_OK;
}
