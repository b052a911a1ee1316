/* test_fork.c: a fork's child and the library's own thread, the watchdog
 * (luaretry.h, "Locks, threads and fork"; libluaretry(3)).  The thread is
 * not in the child: the child must neither join it (freeing its last
 * policy) nor wait for a lock it held mid-tick at the fork, and a policy
 * the child loads, or inherited and called in the child, has its time
 * limit watched all the same.  Each child is
 * waited for by a wide bound; one that hangs is killed and fails. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "step_support.h"
#include "child_support.h"

#define CHILD_LIMIT_S 20 /* a child that hangs; any child here ends in well under 1 s */
#define POLICIES      20 /* sandboxes the watchdog looks at every tick */
#define FORKS         100

static const char *POLICY =
  "max_attempts = 3\n"
  "function is_transient(status) return status >= 500 end\n";

/* is_transient never ends on a 599 */
static const char *RUNAWAY =
  "max_attempts = 3\n"
  "function is_transient(status)\n"
  "  while status == 599 do end\n"
  "  return status >= 500\n"
  "end\n";

/* A child here is given CHILD_LIMIT_S (child_support.h). */
static int child_status(pid_t pid, const char *what) {
  return child_status_within(pid, what, CHILD_LIMIT_S);
}

/* A script that never ends, loaded in the child: its time limit stops it,
 * so the child has a watchdog of its own. */
static int child_loads_runaway(void) {
  luaretry_policy *q;
  if (luaretry_policy_new(&q) != LUARETRY_OK) return 2;
  int rc = luaretry_policy_load_string(q, "@runaway.lua", "max_attempts = 3\nwhile true do end\n");
  int ok = rc == LUARETRY_E_LIMIT && strstr(luaretry_policy_errmsg(q), "time limit reached");
  luaretry_policy_free(q);
  return ok ? 0 : 3;
}

/* The inherited policies decide a call, then are freed, the last one
 * too: nothing of the parent's thread is joined or waited for. */
static int child_frees(luaretry_policy **p, int n) {
  luaretry_call *c;
  luaretry_decision d;
  if (luaretry_call_begin(p[0], NULL, &c) != LUARETRY_OK) return 4;
  luaretry_outcome o = step_status(503);
  int ok = luaretry_call_next(c, &d) == LUARETRY_OK &&
           luaretry_call_report(c, &o, &d) == LUARETRY_OK && d.retry;
  luaretry_call_free(c);
  for (int i = 0; i < n; i++) luaretry_policy_free(p[i]);
  return ok ? 0 : 5;
}

/* A script inherited from the parent runs away in the child (a 599): the
 * time limit stops it there too, the child's first call into it having
 * started the watchdog.  The old library left the child without one. */
static int child_calls_runaway(luaretry_policy *p) {
  luaretry_call *c;
  luaretry_decision d;
  if (luaretry_call_begin(p, NULL, &c) != LUARETRY_OK) return 6;
  luaretry_outcome o = step_status(599);
  int ok = luaretry_call_next(c, &d) == LUARETRY_OK &&
           luaretry_call_report(c, &o, &d) == LUARETRY_OK && !d.retry &&
           d.reason == LUARETRY_REASON_POLICY_ERROR && d.message &&
           strstr(d.message, "time limit reached");
  luaretry_call_free(c);
  return ok ? 0 : 7;
}

static void test_child_inherited_runaway(luaretry_policy *p) {
  pid_t pid = fork();
  if (pid == 0) _exit(child_calls_runaway(p));
  CHECK(pid > 0 && child_status(pid, "an inherited script runs away in the child") == 0);
}

static void test_child_has_watchdog(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(child_loads_runaway());
  CHECK(pid > 0 && child_status(pid, "a runaway script loaded in the child") == 0);
}

static void test_child_frees_last(luaretry_policy **p, int n) {
  pid_t pid = fork();
  if (pid == 0) _exit(child_frees(p, n));
  CHECK(pid > 0 && child_status(pid, "the child frees every policy") == 0);
}

/* Forks at any moment of the watchdog's ticks (one every 5 ms, each a
 * look at every sandbox under its lock): none of the children waits. */
static void test_forks_mid_tick(luaretry_policy **p, int n) {
  unsigned seed = 7;
  int failed = 0;
  for (int i = 0; i < FORKS && !failed; i++) {
    pid_t pid = fork();
    if (pid == 0) _exit(child_frees(p, n));
    failed = !CHECK(pid > 0 && child_status(pid, "a fork mid-tick") == 0);
    sleep_ms(rand_r(&seed) % 4);
  }
}

/* ---- a fork while another thread holds the policy's writer lock: a
 * load whose top level prints, its log callback (on the loading thread,
 * the lock held) waiting until the main thread has forked.  The child
 * sets, loads and reloads the inherited policy: none waits for the lock
 * the parent's thread held.  The old library's child waited for ever. */

static struct {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int inside, forked;
} held = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };

static void log_and_wait(void *ud, const char *line) {
  (void)ud;
  if (!strstr(line, "hold the lock")) return;
  pthread_mutex_lock(&held.lock);
  held.inside = 1;
  pthread_cond_broadcast(&held.changed);
  while (!held.forked) pthread_cond_wait(&held.changed, &held.lock);
  pthread_mutex_unlock(&held.lock);
}

static void *load_printing(void *ud) {
  luaretry_policy_load_string(ud, "=printing", "max_attempts = 3\nprint('hold the lock')\n");
  return NULL;
}

static int child_changes(luaretry_policy *p) {
  luaretry_policy_on_log(p, NULL, NULL);
  if (luaretry_policy_set(p, "max_attempts", "5") != LUARETRY_OK) return 8;
  if (luaretry_policy_load_string(p, "=fork", POLICY) != LUARETRY_OK) return 9;
  char v[32];
  if (luaretry_policy_get(p, "max_attempts", v, sizeof v) != LUARETRY_OK) return 10;
  luaretry_policy_free(p);
  return 0;
}

static void test_fork_while_loading(void) {
  luaretry_policy *p = step_load("=fork", POLICY);
  if (!CHECK(p != NULL)) return;
  /* the load waits in C, in its callback: no time limit stops it there */
  CHECK_CODE(luaretry_policy_set(p, "time_limit", "30"), LUARETRY_OK);
  luaretry_policy_on_log(p, log_and_wait, NULL);
  pthread_t t;
  if (!CHECK(pthread_create(&t, NULL, load_printing, p) == 0)) return;
  pthread_mutex_lock(&held.lock);
  while (!held.inside) pthread_cond_wait(&held.changed, &held.lock);
  pid_t pid = fork(); /* the loading thread holds the writer lock */
  if (pid == 0) _exit(child_changes(p));
  held.forked = 1;
  pthread_cond_broadcast(&held.changed);
  pthread_mutex_unlock(&held.lock);
  CHECK(pid > 0 && child_status(pid, "the child sets and loads a policy being loaded") == 0);
  pthread_join(t, NULL);
  luaretry_policy_free(p);
}

int main(void) {
  luaretry_policy *p[POLICIES];
  for (int i = 0; i < POLICIES; i++) p[i] = step_load("=fork", POLICY);
  for (int i = 0; i < POLICIES; i++)
    if (!p[i]) return check_done();
  test_child_has_watchdog();
  luaretry_policy *runaway = step_load("=runaway", RUNAWAY);
  if (CHECK(runaway != NULL)) {
    test_child_inherited_runaway(runaway);
    luaretry_policy_free(runaway);
  }
  test_child_frees_last(p, POLICIES);
  test_forks_mid_tick(p, POLICIES);
  test_fork_while_loading();
  /* the parent's own watchdog still runs: a runaway here is stopped too */
  CHECK(child_loads_runaway() == 0);
  for (int i = 0; i < POLICIES; i++) luaretry_policy_free(p[i]);
  return check_done();
}
