/* test_time_limit.c: a script's time limit counts the time its thread ran
 * (core/sandbox/sandbox.c's ran_ticks; luaretry-policy(5), time_limit),
 * and at most three times as much wall time.  A call whose thread waits
 * off the CPU (here a C function that sleeps, as a thread preempted on a
 * busy machine waits) is not stopped for a wait of 1.5 times its limit;
 * one whose thread works (a C function that spins, a Lua loop) is stopped
 * by its running time; one that waits past three times its limit is
 * stopped all the same; and the clock read is the calling thread's at
 * each call, so a state used by one thread and then another still counts
 * the right one.  The limit is 1 s: stopped at 0.8 s of running, or 2.4 s
 * of wall time.  And the watchdog's thread blocks every signal. */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "sandbox/sandbox.h"

#define WORK_MS    1500 /* a sleep or a spin: past the limit, well within three times it */
#define STARVED_MS 4000 /* a sleep past three times the limit */

static double seconds_of(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void sleep_ms(long ms) {
  struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
  while (nanosleep(&t, &t) != 0) {
  }
}

/* idle(): the thread sleeps WORK_MS, off the CPU */
static int idle(lua_State *L) {
  sleep_ms(WORK_MS);
  lua_pushboolean(L, 1);
  return 1;
}

/* starved(): the thread sleeps STARVED_MS */
static int starved(lua_State *L) {
  sleep_ms(STARVED_MS);
  lua_pushboolean(L, 1);
  return 1;
}

/* spin(): the thread works until it has run WORK_MS more (bounded in wall
 * time, for a machine that gives it no CPU: the check after says so) */
static int spin(lua_State *L) {
  double cpu0 = seconds_of(CLOCK_THREAD_CPUTIME_ID), wall0 = seconds_of(CLOCK_MONOTONIC);
  while (seconds_of(CLOCK_THREAD_CPUTIME_ID) - cpu0 < WORK_MS / 1000.0 &&
         seconds_of(CLOCK_MONOTONIC) - wall0 < 60) {
  }
  lua_pushboolean(L, 1);
  return 1;
}

static lr_sandbox *sandbox(void) {
  lr_limits limits = { .memory = 4 << 20, .instructions = 0, .seconds = 1 };
  lr_sandbox *sb = lr_sandbox_new(&limits, NULL, NULL, lr_sandbox_open_libs);
  if (!sb) return NULL;
  lua_register(sb->L, "idle", idle);
  lua_register(sb->L, "spin", spin);
  lua_register(sb->L, "starved", starved);
  return sb;
}

/* Runs `text` in sb; its code, and the message in err. */
static luaretry_code run(lr_sandbox *sb, const char *text, char *err, size_t errlen) {
  err[0] = '\0';
  if (lr_chunk_load(sb->L, text, strlen(text), "=test") != LUA_OK) {
    snprintf(err, errlen, "%s", lua_tostring(sb->L, -1));
    lua_pop(sb->L, 1);
    return LUARETRY_E_POLICY;
  }
  return lr_sandbox_pcall(sb, 0, 0, LUARETRY_E_POLICY, err, errlen);
}

static void test_a_wait_is_not_run_time(lr_sandbox *sb) {
  char err[512];
  CHECK_CODE(run(sb, "idle() local n = 0 for i = 1, 100 do n = n + i end", err, sizeof err),
             LUARETRY_OK);
  CHECK_EQ_STR(err, "");
}

static void test_work_is_stopped(lr_sandbox *sb) {
  char err[512];
  double t0 = seconds_of(CLOCK_MONOTONIC);
  CHECK_CODE(run(sb, "spin()\nlocal n = 0 for i = 1, 100 do n = n + i end", err, sizeof err),
             LUARETRY_E_LIMIT);
  CHECK_CONTAINS(err, "time limit");
  CHECK(seconds_of(CLOCK_MONOTONIC) - t0 < 60); /* else spin() never got the CPU */
  CHECK_CODE(run(sb, "while true do end", err, sizeof err), LUARETRY_E_LIMIT);
  CHECK_CONTAINS(err, "time limit");
  /* the state goes on */
  CHECK_CODE(run(sb, "local x = 1", err, sizeof err), LUARETRY_OK);
}

static void test_a_starved_call_is_stopped(lr_sandbox *sb) {
  char err[512];
  CHECK_CODE(run(sb, "starved()\nlocal n = 0 for i = 1, 100 do n = n + i end", err, sizeof err),
             LUARETRY_E_LIMIT);
  CHECK_CONTAINS(err, "time limit");
}

static void *call_once(void *arg) {
  char err[512];
  CHECK_CODE(run(arg, "local x = 1", err, sizeof err), LUARETRY_OK);
  return NULL;
}

/* A state whose last call ran on a thread that has ended: the next call
 * counts its own thread's clock (a stale one cannot be read, and wall time
 * would stop the sleep). */
static void test_each_call_counts_its_own_thread(lr_sandbox *sb) {
  pthread_t other;
  if (!CHECK(pthread_create(&other, NULL, call_once, sb) == 0)) return;
  pthread_join(other, NULL);
  test_a_wait_is_not_run_time(sb);
}

static void hung(int sig) {
  (void)sig;
  static const char msg[] = "test_time_limit: a call was not stopped within 120 s\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(2);
}

/* The watchdog blocks every signal (libluaretry(3)): a signal sent to the
 * process goes to a thread of the host's (a host that waits for signals
 * in sigwait, or a blocking read a stop signal must cut).  Run while the
 * watchdog is the one thread besides main: its SigBlk holds them all. */
static void test_the_watchdog_takes_no_signal(void) {
  DIR *d = opendir("/proc/self/task");
  if (!CHECK(d != NULL)) return;
  int others = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || atoi(e->d_name) == (int)getpid()) continue;
    char path[300], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue; /* a thread that ended meanwhile */
    unsigned long long blocked = 0;
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "SigBlk:", 7) == 0) blocked = strtoull(line + 7, NULL, 16);
    fclose(f);
    others++;
    const int stops[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGALRM, SIGCHLD, SIGUSR1 };
    for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++)
      CHECK(blocked & (1ull << (stops[i] - 1)));
  }
  closedir(d);
  CHECK_EQ_INT(others, 1); /* the watchdog, started by the first watched sandbox */
}

int main(void) {
  signal(SIGALRM, hung);
  alarm(120);
  lr_sandbox *sb = sandbox();
  if (!CHECK(sb != NULL)) return check_done();
  test_the_watchdog_takes_no_signal();
  test_a_wait_is_not_run_time(sb);
  test_work_is_stopped(sb);
  test_each_call_counts_its_own_thread(sb);
  test_a_starved_call_is_stopped(sb);
  lr_sandbox_free(sb);
  return check_done();
}
