/* sandbox.c: the Lua state a policy runs in, and its limits.
 *
 * Memory is limited by the allocator.  Time is limited without a cost per
 * instruction: a script runs with no hook at all, and when a call into it
 * has run for its time_limit the watchdog thread arms a hook that fires at
 * the next instruction (Lua's own lua.c stops a script from a signal
 * handler the same way); a cancel of the call the script runs for
 * (lr_sandbox_on_cancel) is noticed by the same look, within a tick.  An
 * exact instruction limit, for hosts that want determinism, keeps a count
 * hook.  Once a limit is hit it stays hit: every
 * later instruction fails, and the library a script sees (sandbox_lib.c)
 * lets no pcall or xpcall handler catch it, until control is back in C. */
#include <lauxlib.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sandbox.h"

#define HOOK_STEP 1000  /* instructions between two looks at the budget */
#define STOP_STEP 10000 /* instructions between two looks at a stop flag */

/* Where the script is: the innermost Lua function with a line, from
 * `level` out; 1 with *ar filled, 0 when none. */
static int script_frame(lua_State *L, int level, lua_Debug *ar) {
  for (; lua_getstack(L, level, ar); level++)
    if (lua_getinfo(L, "Sl", ar) && ar->currentline > 0) return 1;
  return 0;
}

static void note_where(lr_sandbox *sb, lua_State *L) {
  lua_Debug ar;
  if (script_frame(L, 0, &ar))
    lr_fmt(sb->where, sizeof sb->where, "%s:%d", ar.short_src, ar.currentline);
}

int lr_sandbox_error(lua_State *L, const char *fmt, ...) {
  lua_Debug ar;
  if (script_frame(L, 1, &ar))
    lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
  else
    lua_pushliteral(L, "");
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_concat(L, 2);
  return lua_error(L);
}

static void kill_hook(lua_State *L, lua_Debug *ar);
static void watch(lr_watched *w, long now);
static int locate_error(lua_State *L);

/* The hook a state runs with while no limit is hit: none when watched. */
static void base_hook(lr_sandbox *sb, lua_State *L) {
  if (sb->limits.instructions > 0)
    lua_sethook(L, kill_hook, LUA_MASKCOUNT, HOOK_STEP);
  else if (sb->stop)
    lua_sethook(L, kill_hook, LUA_MASKCOUNT, STOP_STEP);
  else
    lua_sethook(L, NULL, 0, 0);
}

void lr_sandbox_stop_on(lr_sandbox *sb, const atomic_int *stop) {
  sb->stop = stop;
  base_hook(sb, sb->L);
}

static int stopping(const lr_sandbox *sb) {
  return sb->stop && atomic_load_explicit(sb->stop, memory_order_relaxed);
}

/* On the script's own thread, in a call into it: the owner's call stays. */
static int cancelled_here(lr_sandbox *sb) { return sb->cancelled && sb->cancelled(sb->owner); }

int lr_sandbox_kill(lua_State *L, lr_sandbox *sb, int why) {
  if (!sb->killed) sb->killed = why;
  if (!sb->where[0]) note_where(sb, L);
  /* Sticky: from now on every instruction of this thread fails. */
  lua_sethook(L, kill_hook, LUA_MASKCOUNT, 1);
  lua_pushliteral(L, "sandbox limit reached");
  return lua_error(L);
}

static void kill_hook(lua_State *L, lua_Debug *ar) {
  lr_sandbox *sb = lr_sandbox_of(L);
  (void)ar;
  if (!sb->killed) {
    int halt = atomic_load_explicit(&sb->halt, memory_order_relaxed);
    if (halt) {
      sb->killed = halt;
    } else if (stopping(sb)) {
      sb->killed = LR_KILL_STOP;
    } else if (cancelled_here(sb)) { /* counting: no watchdog needed */
      sb->killed = LR_KILL_CANCEL;
    } else if (sb->limits.instructions > 0) {
      sb->remaining -= HOOK_STEP;
      if (sb->remaining > 0) return;
      sb->killed = LR_KILL_INSTRUCTIONS;
    } else {
      return; /* armed as a call ended: nothing to stop */
    }
  }
  lr_sandbox_kill(L, sb, sb->killed);
}

void lr_sandbox_pay(lua_State *L, lr_sandbox *sb, size_t units) {
  while (units > 0) {
    size_t now = units > (size_t)sb->remaining ? (size_t)sb->remaining : units;
    sb->remaining -= (long)now;
    units -= now;
    if (sb->remaining <= 0) lr_sandbox_refuel(L, sb);
  }
}

void lr_sandbox_refuel(lua_State *L, lr_sandbox *sb) {
  if (sb->killed) lr_sandbox_kill(L, sb, sb->killed);
  int halt = atomic_load_explicit(&sb->halt, memory_order_relaxed);
  if (halt) lr_sandbox_kill(L, sb, halt);
  if (stopping(sb)) lr_sandbox_kill(L, sb, LR_KILL_STOP);
  if (sb->limits.instructions > 0) lr_sandbox_kill(L, sb, LR_KILL_INSTRUCTIONS);
  sb->remaining = LR_TIMED_STEPS;
}

/* The watchdog arms a state another thread runs.  lua_sethook walks the
 * state's CallInfo list, whose nodes the running thread frees only through
 * this allocator: the handshake below (arming / freeing, sequentially
 * consistent, so one side always sees the other) keeps any free from
 * happening during the walk. */
static void arm_running(lr_sandbox *sb) {
  atomic_store(&sb->arming, 1);
  while (atomic_load(&sb->freeing)) {
  }
  lua_sethook(sb->L, kill_hook, LUA_MASKCOUNT, 1);
  atomic_store(&sb->arming, 0);
}

/* Frees the blocks held back; under the handshake while the watchdog may
 * still arm this state.  Out of line: limited_alloc's free, which comes
 * here once in 64, keeps no registers. */
static __attribute__((noinline)) void flush_deferred(lr_sandbox *sb, int guarded) {
  if (guarded) {
    for (;;) {
      atomic_store(&sb->freeing, 1);
      if (!atomic_load(&sb->arming)) break;
      atomic_store(&sb->freeing, 0);
      while (atomic_load(&sb->arming)) {
      }
    }
  }
  while (sb->deferred) {
    void **link = sb->deferred;
    sb->deferred = link[0];
    lr_pool_free(&sb->pool, link, (size_t)(uintptr_t)link[1]);
  }
  sb->deferred_count = sb->deferred_bytes = 0;
  if (guarded) atomic_store(&sb->freeing, 0);
}

/* While a call runs (watched), a freed block waits in a short list kept in
 * the blocks themselves, and the list goes in one batch: one handshake for
 * many frees, and none at all for a call that frees little. */
static void timed_free(lr_sandbox *sb, void *ptr, size_t size) {
  if (atomic_load_explicit(&sb->phase, memory_order_relaxed) == LR_PHASE_IDLE) {
    lr_pool_free(&sb->pool, ptr, size); /* the watchdog arms only a running call */
    return;
  }
  void **link = ptr; /* every block has room for two words (pool.h: 16 B at least) */
  link[0] = sb->deferred;
  link[1] = (void *)(uintptr_t)size;
  sb->deferred = ptr;
  sb->deferred_bytes += size;
  if (++sb->deferred_count >= 64 || sb->deferred_bytes >= (256u << 10)) flush_deferred(sb, 1);
}

void lr_sandbox_memory_kill(lr_sandbox *sb) {
  sb->refused = 0;
  if (sb->L && !sb->killed) {
    sb->killed = LR_KILL_MEMORY;
    if (!sb->where[0]) note_where(sb, sb->L); /* reads the stack only: allocates nothing */
    lua_sethook(sb->L, kill_hook, LUA_MASKCOUNT, 1);
  }
}

/* limited_alloc's new blocks and resizes (but a string's reserve): out of
 * line, so that a free and a reserve keep no registers. */
static __attribute__((noinline)) void *limited_realloc(lr_sandbox *sb, void *ptr, size_t osize,
                                                       size_t nsize) {
  size_t old = ptr ? osize : 0;
  if (nsize > old && sb->used - old + nsize > sb->limits.memory) {
    /* Lua answers a first refusal with an emergency collection and asks
     * again: only live data that still does not fit is the limit. */
    if (!sb->refused) {
      sb->refused = nsize;
      /* lauxlib's buffers ask once and raise "not enough memory": where
       * the first refusal was is where the limit was reached */
      if (sb->L && !sb->killed && !sb->where[0]) note_where(sb, sb->L);
      return NULL;
    }
    lr_sandbox_memory_kill(sb);
    return NULL;
  }
  void *np = ptr ? lr_pool_resize(&sb->pool, ptr, osize, nsize) : lr_pool_alloc(&sb->pool, nsize);
  if (np) {
    sb->used = sb->used - old + nsize;
    /* Lua's second ask (the same size) fitted: the collection made room.
     * A smaller success (lauxlib pushing "not enough memory") does not. */
    if (sb->refused && nsize >= sb->refused && !sb->killed) {
      sb->refused = 0;
      sb->where[0] = '\0';
    }
  }
  return np;
}

/* Lua's allocator: a free and a string's reserve, nearly every call, first. */
static void *limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  lr_sandbox *sb = ud;
  if (nsize == 0) { /* a free (of NULL: nothing) */
    if (ptr) {
      sb->used -= osize;
      if (sb->watching)
        timed_free(sb, ptr, osize);
      else
        lr_pool_free(&sb->pool, ptr, osize);
    }
    return NULL;
  }
  if (!ptr && sb->reserve && nsize <= sb->reserve_size) {
    void *np = sb->reserve; /* lr_sandbox_push_string's: within the limit */
    sb->reserve = NULL;
    if (nsize > sb->reserve_len) /* the string's block: the next reserve is of its size */
      sb->string_extra = nsize - sb->reserve_len;
    sb->used += nsize;
    return np;
  }
  return limited_realloc(sb, ptr, osize, nsize);
}

lr_sandbox *lr_sandbox_new(const lr_limits *limits, const char *script_path,
                           const lr_log_target *log, lua_CFunction open_libs) {
  lr_sandbox *sb = lr_aligned_calloc(sizeof *sb); /* its hot fields: two lines */
  if (!sb) return NULL;
  sb->limits = *limits;
  sb->watching = limits->seconds > 0;
  /* The libraries need some room whatever the limit. */
  if (sb->limits.memory < 64 * 1024) sb->limits.memory = 64 * 1024;
  sb->log = log;
  lr_rng_seed(&sb->load_rng, 0); /* a script's top level draws the same every load */
  if (script_path) {
    lr_strlcpy(sb->script_dir, script_path, sizeof sb->script_dir);
    char *slash = strrchr(sb->script_dir, '/');
    if (slash)
      *slash = '\0';
    else
      strcpy(sb->script_dir, ".");
  }
  lua_State *L = lua_newstate(limited_alloc, sb);
  if (!L) {
    lr_pool_drain(&sb->pool); /* what it freed on its way out */
    free(sb);
    return NULL;
  }
  *(lr_sandbox **)lua_getextraspace(L) = sb;
  sb->L = L;
  base_hook(sb, L);
  sb->refill = limits->instructions > 0 ? limits->instructions : LR_TIMED_STEPS;
  sb->remaining = sb->refill;
  sb->string_extra = LR_STRING_OVERHEAD;
  lua_pushcfunction(L, open_libs);
  if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
    lua_close(L);
    lr_pool_drain(&sb->pool);
    free(sb);
    return NULL;
  }
  lua_settop(L, 0);
  lua_pushcfunction(L, locate_error); /* stays at LR_SANDBOX_HANDLER: no push per call */
  sb->base = LR_SANDBOX_HANDLER;
  sb->limits.memory = limits->memory;
  sb->watched.look = watch;
  if (sb->watching) lr_watchdog_add(&sb->watched);
  return sb;
}

void lr_sandbox_on_cancel(lr_sandbox *sb, int (*cancelled)(void *owner)) {
  sb->cancelled = cancelled;
}

void lr_sandbox_free(lr_sandbox *sb) {
  if (!sb) return;
  if (sb->watching) lr_watchdog_remove(&sb->watched);
  if (sb->L) lua_close(sb->L);
  lr_pool_drain(&sb->pool);
  free(sb);
}

void lr_sandbox_trim(lr_sandbox *sb) { lr_pool_drain(&sb->pool); }

const char *lr_sandbox_push_new(lr_sandbox *sb, const char *s, size_t len) {
  size_t need = lr_sandbox_reserve_size(sb, len);
  void *block = need ? lr_pool_alloc(&sb->pool, need) : NULL;
  return block ? lr_sandbox_push_reserved(sb, block, need, s, len) : NULL;
}

void lr_sandbox_pushed_slow(lr_sandbox *sb) {
  if (sb->reserve) { /* not taken: a short string Lua already had */
    lr_pool_free(&sb->pool, sb->reserve, sb->reserve_size);
    sb->reserve = NULL;
  }
  if (sb->refused || sb->killed) {
    /* a short string's table could not grow under the limit: Lua keeps
     * the table as it was and raises nothing, so no limit was reached */
    sb->refused = 0;
    sb->killed = LR_KILL_NONE;
    sb->where[0] = '\0';
    base_hook(sb, sb->L);
  }
}

_Thread_local int lr_thread_clock;

/* fork(): the child's one thread is the one that forked, under another
 * id, so another clock: it finds its own again. */
static void clock_forked(void) { lr_thread_clock = 0; }
static void watch_clock_forks(void) { pthread_atfork(NULL, NULL, clock_forked); }
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

int lr_thread_clock_find(void) {
  pthread_once(&clock_once, watch_clock_forks); /* before any thread keeps a clock */
  /* a fork's child, in an inherited policy: no thread there has a clock
   * yet (clock_forked), so the first call of any comes here */
  if (__builtin_expect(atomic_load_explicit(&lr_watchdog_orphaned, memory_order_relaxed), 0))
    lr_watchdog_adopt();
  clockid_t clock;
  if (pthread_getcpuclockid(pthread_self(), &clock) != 0) clock = CLOCK_MONOTONIC;
  lr_thread_clock = (int)clock;
  return (int)clock;
}

/* The calling thread's CPU time, ns; 0 where it cannot be read. */
static long long thread_cpu_ns(void) {
  struct timespec t;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return 0;
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

void lr_sandbox_pause(lr_sandbox *sb) {
  if (!sb->watching) return;
  sb->paused_cpu = thread_cpu_ns(); /* the host's CPU time from here is not the script's */
  /* not yet stopped: the host's time is not the script's.  A look of the
   * watchdog's under way (ARMING) ends in RUNNING or ARMED: wait for it */
  int phase = LR_PHASE_RUNNING;
  while (!atomic_compare_exchange_strong(&sb->phase, &phase, LR_PHASE_IDLE) &&
         phase == LR_PHASE_ARMING)
    phase = LR_PHASE_RUNNING;
}

void lr_sandbox_resume_from(lr_sandbox *sb, long paused_at) {
  if (!sb->watching || atomic_load(&sb->halt)) return;
  /* the host's time is taken out of the script's: its CPU time (ran_ticks)
   * and its ticks (the wall time counted); a loop of host calls still
   * reaches the limit on its own time */
  atomic_fetch_add_explicit(&sb->entered, lr_watchdog_tick() - paused_at, memory_order_relaxed);
  long long host = thread_cpu_ns() - sb->paused_cpu;
  if (host > 0) atomic_fetch_add_explicit(&sb->host_cpu, host, memory_order_relaxed);
  int idle = LR_PHASE_IDLE;
  atomic_compare_exchange_strong(&sb->phase, &idle, LR_PHASE_RUNNING);
}

/* Ticks a call has run, as the time limit counts them: the ticks its
 * thread had the CPU for, less the host's (lr_sandbox_pause to resume), so
 * a call whose thread waited for a CPU on a busy machine is not stopped
 * for the wait (Cloudflare Workers' CPU-time limit counts the same way),
 * while a loop of host calls still reaches the limit on its own time.
 * Reading another thread's CPU clock is a system call, so a call's thread
 * never does it for itself: the watchdog reads it at its first look at the
 * call and counts the ticks before that look as run, up to two (a watchdog
 * late to its first look adds its lateness to the kill, not to the ticks
 * counted).  Where the clock cannot be read, `wall`: the ticks since the
 * call began, less the host's. */
static long ran_ticks(lr_sandbox *sb, long now, long wall) {
  clockid_t clock = (clockid_t)atomic_load_explicit(&sb->thread_clock, memory_order_relaxed);
  struct timespec t;
  /* CLOCK_MONOTONIC: lr_sandbox_enter found no CPU clock */
  if (clock == CLOCK_MONOTONIC || clock_gettime(clock, &t) != 0) return wall;
  long long cpu = (long long)t.tv_sec * 1000000000LL + t.tv_nsec -
                  atomic_load_explicit(&sb->host_cpu, memory_order_relaxed);
  long started = atomic_load_explicit(&sb->started, memory_order_relaxed);
  /* a call in the same tick as the last one reading finds the reading in
   * that tick: it counts at most that tick's CPU time more */
  if (sb->sampled_for != started || sb->sampled_clock != clock) {
    sb->sampled_for = started;
    sb->sampled_clock = clock;
    sb->sampled_at = now;
    sb->cpu_then = cpu;
  }
  long before = sb->sampled_at - started;
  before = before < 0 ? 0 : before > 2 ? 2 : before;
  return before + (long)((cpu - sb->cpu_then) / (LR_WATCHDOG_TICK_MS * 1000000LL));
}

/* Ticks a call may run, from its limit: the watchdog looks once a tick,
 * so the kill lands a fifth of the limit (at least 5 ticks, 25 ms) before
 * it: room for the watchdog to be scheduled late on a loaded machine and
 * still stop the script within its limit (0.25 s: stopped at about 0.2 s). */
static long limit_ticks(double seconds) {
  long all = (long)(seconds * 1000 / LR_WATCHDOG_TICK_MS);
  long margin = all / 5 > 5 ? all / 5 : 5;
  long ticks = all - margin;
  return ticks < 1 ? 1 : ticks;
}

/* The watchdog's look, once a tick: a call past its limit, or whose
 * owner's call was cancelled, is stopped.  The cancel is asked with the
 * call held (ARMING): it cannot end, nor its owner's call go, meanwhile;
 * a call that goes on is handed back (RUNNING). */
static void watch(lr_watched *w, long now) {
  lr_sandbox *sb = (lr_sandbox *)((char *)w - offsetof(lr_sandbox, watched));
  if (atomic_load_explicit(&sb->phase, memory_order_acquire) != LR_PHASE_RUNNING) return;
  int why = LR_KILL_NONE;
  /* the thread's running time, or three times as much wall time: a
   * thread the machine starves is stopped all the same */
  long wall = now - atomic_load_explicit(&sb->entered, memory_order_relaxed);
  if (sb->limits.seconds > 0 && (wall >= limit_ticks(3 * sb->limits.seconds) ||
                                 ran_ticks(sb, now, wall) >= limit_ticks(sb->limits.seconds)))
    why = LR_KILL_TIME;
  if (!why && !sb->cancelled) return;
  int running = LR_PHASE_RUNNING;
  if (!atomic_compare_exchange_strong(&sb->phase, &running, LR_PHASE_ARMING)) return;
  if (!why && sb->cancelled(sb->owner)) why = LR_KILL_CANCEL;
  if (!why) {
    atomic_store(&sb->phase, LR_PHASE_RUNNING);
    return;
  }
  atomic_store(&sb->halt, why);
  arm_running(sb);
  atomic_store(&sb->phase, LR_PHASE_ARMED);
}

/* Back in C (lr_sandbox_leave), the watchdog's exchange failed, or frees
 * wait: a hook it armed comes off.  A look under way (ARMING) ends in
 * ARMED, or hands the call back (RUNNING): a plain store of IDLE then
 * could land in the watchdog's next look, so the exchange is tried again. */
void lr_sandbox_leave_slow(lr_sandbox *sb) {
  int phase = LR_PHASE_RUNNING;
  while (!atomic_compare_exchange_strong(&sb->phase, &phase, LR_PHASE_IDLE)) {
    if (phase == LR_PHASE_ARMED) {
      base_hook(sb, sb->L);
      atomic_store(&sb->phase, LR_PHASE_IDLE);
      break;
    }
    if (phase == LR_PHASE_IDLE) break; /* left already, or paused, never resumed */
    phase = LR_PHASE_RUNNING;
  }
  if (sb->deferred) flush_deferred(sb, 0); /* idle: the watchdog keeps off */
}

/* The message handler of every call into a script: an error value that is
 * not a string still says where it was raised. */
static int locate_error(lua_State *L) {
  if (lua_type(L, 1) == LUA_TSTRING) return 1;
  lua_Debug ar;
  if (script_frame(L, 1, &ar))
    lua_pushfstring(L, "%s:%d: error object is a %s value", ar.short_src, ar.currentline,
                    luaL_typename(L, 1));
  else
    lua_pushfstring(L, "error object is a %s value", luaL_typename(L, 1));
  return 1;
}

static void describe_kill(const lr_sandbox *sb, char *err, size_t errlen) {
  const char *where = sb->where[0] ? sb->where : "the script";
  switch (sb->killed) {
  case LR_KILL_INSTRUCTIONS:
    lr_fmt(err, errlen,
           "%s: instruction limit reached (%ld instructions); a loop that "
           "never ends?",
           where, sb->limits.instructions);
    break;
  case LR_KILL_TIME:
    lr_fmt(err, errlen, "%s: time limit reached (%g s); a loop that never ends?", where,
           sb->limits.seconds);
    break;
  case LR_KILL_STOP: lr_fmt(err, errlen, "%s: stopped: the host is stopping", where); break;
  case LR_KILL_CANCEL: lr_fmt(err, errlen, "%s: stopped: the call was cancelled", where); break;
  default:
    lr_fmt(err, errlen, "%s: memory limit reached (%zu bytes)", where, sb->limits.memory);
    break;
  }
}

/* A protected call that failed, or was killed: what went wrong, the stack
 * back to the handler.  Out of line: a call that succeeds (nearly every
 * one) pays none of it. */
__attribute__((noinline, cold)) luaretry_code lr_sandbox_failed(lr_sandbox *sb, int status,
                                                                luaretry_code failure, char *err,
                                                                size_t errlen) {
  if (status == LR_RUN_CHECK) status = LUA_OK;
  /* an error after a refusal nothing made room for: the limit */
  if (status != LUA_OK && sb->refused) lr_sandbox_memory_kill(sb);
  sb->refused = 0;
  if (status == LUA_OK && !sb->killed) return LUARETRY_OK;
  lua_State *L = sb->L;
  luaretry_code rc = failure;
  if (sb->killed) {
    describe_kill(sb, err, errlen);
    /* a cancel is the caller's, not a limit the script reached */
    rc = sb->killed == LR_KILL_CANCEL ? LUARETRY_E_CANCELLED : LUARETRY_E_LIMIT;
    sb->killed = LR_KILL_NONE;
    base_hook(sb, L);
  } else if (status == LUA_ERRMEM) {
    /* no limit was hit: the host's realloc failed, not the script */
    lr_strlcpy(err, "out of memory", errlen);
    rc = LUARETRY_E_NOMEM;
  } else {
    const char *msg = lua_tostring(L, -1);
    if (msg && strcmp(msg, "not enough memory") == 0) {
      /* lauxlib's buffers raise the host's out of memory as a plain error
       * with this text (no position: not a script's error()) */
      lr_strlcpy(err, "out of memory", errlen);
      rc = LUARETRY_E_NOMEM;
    } else {
      lr_strlcpy(err, msg ? msg : "error in error handling", errlen);
    }
  }
  lua_settop(L, sb->base);
  lua_gc(L, LUA_GCCOLLECT);
  return rc;
}

luaretry_code lr_sandbox_pcall(lr_sandbox *sb, int nargs, int nresults, luaretry_code failure,
                               char *err, size_t errlen) {
  int status = lr_sandbox_run(sb, nargs, nresults);
  return status == LUA_OK ? LUARETRY_OK : lr_sandbox_failed(sb, status, failure, err, errlen);
}

luaretry_code lr_sandbox_call(lr_sandbox *sb, lua_CFunction f, void *arg, int nresults,
                              luaretry_code failure, char *err, size_t errlen) {
  lua_pushcfunction(sb->L, f);
  lua_pushlightuserdata(sb->L, arg);
  return lr_sandbox_pcall(sb, 1, nresults, failure, err, errlen);
}
