/* test_fleet_fork.c: a fork's child and the fleet (libluaretry(3): "its
 * calls are decided by the local guards until it loads the policy
 * itself").  Against a real redis-server (redis_helper.h): the parent
 * syncs, then forks.  In the child, the inherited policy's fleet is the
 * parent's: metrics.guards says fallback at once, and a sync or a status
 * says that a fork's child shares no fleet (not that Redis refused a
 * command).  Once the child loads the policy again, with the same source
 * (the same URL and key), it has a fleet handle of its own: its sync
 * reaches Redis, metrics.guards says fleet, and the fleet's status lists
 * the child among its processes.  The exit status names the check that
 * failed (0: none). */
#include <stdio.h>
#include <string.h>

#include "redis_helper.h"
#include "step_support.h"

#ifdef __SANITIZE_THREAD__
#define SANITIZE_THREAD 1
#else
#define SANITIZE_THREAD 0
#endif

/* GCC 12's ASan allocator takes no lock around fork (LLVM added one in
 * 2023, llvm-project#75290; glibc's malloc has always had one): a child
 * forked while the parent's fleet thread was allocating hangs at its first
 * allocation of the same size.  Under ASan the parent's calls all succeed
 * and its sync period is long, so its fleet thread is never started (a
 * success asks for no round trip within the sync period; a failure would
 * at once): at the fork the parent has the watchdog only, which never
 * allocates (strace: one clone before the fork). */
#if defined(__SANITIZE_ADDRESS__)
#define PARENT_FAILS 0
#define SYNC_MS      "60000" /* the most: a minute */
#else
#define PARENT_FAILS 1
#define SYNC_MS      "1000"
#endif

#define CHILD_LIMIT_S 60 /* the child ends in well under a second */

static const char *POLICY =
  "name = 'fleetfork'\n"
  "max_attempts = 3\n"
  "deadline = 30\n"
  "budget = { max_tokens = 1000, token_ratio = 0.5 }\n"
  "fleet = { sync = " SYNC_MS " }\n"; /* ms */

/* Every other call fails first, when the parent may fail. */
static void some_calls(luaretry_policy *p, int n, int may_fail) {
  for (int i = 0; i < n; i++) {
    luaretry_call *c;
    luaretry_decision d;
    if (luaretry_call_begin(p, NULL, &c) != LUARETRY_OK) continue;
    luaretry_outcome o = step_status(may_fail && i % 2 == 0 ? 503 : 200);
    if (luaretry_call_next(c, &d) == LUARETRY_OK && d.retry) luaretry_call_report(c, &o, &d);
    luaretry_call_free(c);
  }
}

static luaretry_guards_scope scope(luaretry_policy *p) {
  luaretry_metrics m;
  if (luaretry_policy_metrics(p, &m) != LUARETRY_OK) return (luaretry_guards_scope)-1;
  return m.guards;
}

/* Whether the fleet's status lists a handle of this process
 * ("host:pid:handle"). */
static int listed(luaretry_policy *p) {
  luaretry_fleet_status st;
  if (luaretry_policy_fleet_status(p, &st) != LUARETRY_OK) return 0;
  char me[32];
  snprintf(me, sizeof me, ":%ld:", (long)getpid());
  int found = 0;
  for (size_t i = 0; i < st.process_count; i++) found |= strstr(st.processes[i].member, me) != NULL;
  luaretry_fleet_status_free(&st);
  return found;
}

static int says_forked(luaretry_policy *p) {
  const char *msg = luaretry_policy_errmsg(p);
  int ok = strstr(msg, "fork's child") && !strstr(msg, "refused the command");
  if (!ok) fprintf(stderr, "  the child's message: %s\n", msg);
  return ok;
}

static int child(luaretry_policy *p) {
  /* the inherited fleet is the parent's: no round trip, and saying so */
  if (scope(p) != LUARETRY_GUARDS_FALLBACK) return 2;
  if (luaretry_policy_fleet_sync(p) != LUARETRY_E_FLEET || !says_forked(p)) return 3;
  luaretry_fleet_status st;
  if (luaretry_policy_fleet_status(p, &st) != LUARETRY_E_FLEET || !says_forked(p)) return 4;
  /* loaded again, as it was: the child's own handle */
  if (luaretry_policy_load_string(p, "=fleetfork", POLICY) != LUARETRY_OK) return 5;
  if (luaretry_policy_fleet_sync(p) != LUARETRY_OK) {
    fprintf(stderr, "  the child's sync: %s\n", luaretry_policy_errmsg(p));
    return 6;
  }
  some_calls(p, 10, 1);
  if (scope(p) != LUARETRY_GUARDS_FLEET) return 7;
  if (!listed(p)) return 8;
  luaretry_policy_free(p);
  return 0;
}

static void test_child_rejoins(const char *url) {
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "fleet.redis", url), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, "=fleetfork", POLICY), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_fleet_sync(p), LUARETRY_OK);
  some_calls(p, 10, PARENT_FAILS);
  CHECK_CODE(luaretry_policy_fleet_sync(p), LUARETRY_OK);
  CHECK_EQ_INT((long)scope(p), (long)LUARETRY_GUARDS_FLEET);
  CHECK(listed(p));
  pid_t pid = fork();
  if (pid == 0) _exit(child(p));
  int status = -1;
  for (int i = 0; i < CHILD_LIMIT_S * 100 && waitpid(pid, &status, WNOHANG) == 0; i++)
    redis_sleep_ms(10);
  if (!CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    fprintf(stderr, "  the fork's child: status %d\n", status);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  /* the parent's handle is its own still */
  CHECK_CODE(luaretry_policy_fleet_sync(p), LUARETRY_OK);
  CHECK_EQ_INT((long)scope(p), (long)LUARETRY_GUARDS_FLEET);
  luaretry_policy_free(p);
}

int main(void) {
  /* ThreadSanitizer does not follow a threaded process into a fork */
  if (SANITIZE_THREAD) return check_done();
  redis_srv srv;
  if (redis_start(&srv, (const char *)NULL) != 0) return 1;
  char url[100];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", srv.port);
  test_child_rejoins(url);
  redis_stop(&srv);
  return check_done();
}
