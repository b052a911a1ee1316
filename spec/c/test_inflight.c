/* test_inflight.c: a call in flight costs bytes, not a Lua state.
 * 100,000 calls begun on one policy in one thread, each judged once by
 * the Lua is_transient (so each is waiting for its retry), then all freed:
 * resident memory grows by at most 100 MiB in all (a bound with a wide
 * margin: today it is a few hundred bytes a call; the figure is in `make
 * bench`), the policy made no more Lua states than one, and every call
 * still decides right afterwards.  Under AddressSanitizer, whose shadow
 * memory and quarantine inflate resident memory, the bound is not held. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "luaretry.h"

#define CALLS 100000

static const char POLICY[] =
  "max_attempts = 5\n"
  "deadline = 600\n"
  "attempt_timeout = 30\n"
  "backoff = { initial = 1, jitter = 'full' }\n"
  "function is_transient(status, body, info)\n"
  "  info.call.seen = (info.call.seen or 0) + 1\n"
  "  return status == 503\n"
  "end\n";

static double resident_mib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, rss = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    fclose(f);
  }
  return (double)rss * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

int main(void) {
  luaretry_policy *p;
  luaretry_policy_new(&p);
  /* what is tested here is not time: a busy machine (two cores shared,
   * ASan) may preempt one of its many hooks past the 0.25 s time limit */
  CHECK_CODE(luaretry_policy_set(p, "time_limit", "60"), LUARETRY_OK);
  if (!CHECK_CODE(luaretry_policy_load_string(p, "=inflight", POLICY), LUARETRY_OK))
    return check_done();
  size_t one_state = luaretry_policy_memory(p);
  luaretry_call **calls = calloc(CALLS, sizeof *calls);
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = 503;
  o.body = "busy";
  o.body_len = 4;
  double before = resident_mib();
  int waiting = 0;
  for (int i = 0; i < CALLS; i++) {
    luaretry_call_options opt;
    luaretry_call_options_init(&opt);
    opt.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME;
    opt.seed = (uint64_t)i;
    luaretry_decision d;
    if (luaretry_call_begin(p, &opt, &calls[i]) == LUARETRY_OK &&
        luaretry_call_report(calls[i], &o, &d) == LUARETRY_OK && d.retry)
      waiting++;
    else if (waiting == i) /* the first that did not wait: why */
      fprintf(stderr, "test_inflight: call %d: %s\n", i,
              calls[i] ? luaretry_call_errmsg(calls[i]) : "not begun");
  }
  double grown = resident_mib() - before;
  CHECK_EQ_INT(waiting, CALLS);
  printf(
    "test_inflight: %d calls waiting: resident memory grew %.1f MiB (%.0f bytes a call); "
    "one Lua state holds %zu bytes\n",
    CALLS, grown, grown * 1048576.0 / CALLS, one_state);
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(grown <= 100);
#endif
  /* each call kept its own info.call, and decides on */
  luaretry_decision d;
  o.status = 200;
  int ok = 0;
  for (int i = 0; i < CALLS; i += 997)
    ok +=
      luaretry_call_report(calls[i], &o, &d) == LUARETRY_OK && d.reason == LUARETRY_REASON_SUCCESS;
  CHECK_EQ_INT(ok, (CALLS + 996) / 997);
  for (int i = 0; i < CALLS; i++) luaretry_call_free(calls[i]);
  free(calls);
  luaretry_metrics m;
  luaretry_policy_metrics(p, &m);
  CHECK_EQ_INT((long)m.calls, CALLS);
  CHECK_EQ_INT((long)m.retries, CALLS);
  luaretry_policy_free(p);
  return check_done();
}
