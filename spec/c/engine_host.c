/* engine_host.c: a host that uses only the engine and policies (the step
 * API on its own event loop, nothing of libcurl): it links libluaretry
 * alone, which links Lua and hiredis, never libcurl (install_spec builds
 * it through `pkg-config luaretry` and reads ldd).  One call, with a
 * deadline of its own, is told of a 503 then a 200.  Prints each decision;
 * exit status 0 when the call ends in success after two attempts. */
#include <stdio.h>
#include <luaretry.h>

int main(void) {
  luaretry_policy *p = NULL;
  if (luaretry_policy_new(&p) != LUARETRY_OK ||
      luaretry_policy_load_string(p, "=engine_host",
                                  "max_attempts = 3\n"
                                  "backoff = { initial = 0.01, jitter = 'none' }\n") !=
        LUARETRY_OK) {
    fprintf(stderr, "engine_host: %s\n", luaretry_policy_errmsg(p));
    luaretry_policy_free(p);
    return 1;
  }
  luaretry_call_options o = { .flags = LUARETRY_CALL_DEADLINE,
                              .deadline = luaretry_deadline_in(5) };
  luaretry_call *c = NULL;
  if (luaretry_call_begin(p, &o, &c) != LUARETRY_OK) return 1;
  const int status[] = { 503, 200 };
  luaretry_decision d = { 0 };
  for (int i = 0; i < 2; i++) {
    luaretry_outcome out;
    luaretry_outcome_init(&out);
    out.status = status[i];
    if (luaretry_call_report(c, &out, &d) != LUARETRY_OK) return 1;
    printf("attempt %d: %d -> %s\n", d.attempt, status[i], luaretry_reason_name(d.reason));
    if (d.retry) luaretry_call_wait(c, d.wait);
  }
  int ok = d.reason == LUARETRY_REASON_SUCCESS && d.attempt == 2;
  luaretry_call_free(c);
  luaretry_policy_free(p);
  return ok ? 0 : 1;
}
