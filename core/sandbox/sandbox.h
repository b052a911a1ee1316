/* sandbox.h: a Lua 5.4 state with a memory limit, a time limit (and, when
 * the host asks for determinism, an exact instruction limit), a stop flag,
 * a cancel of its owner's, and only what its allow-list names
 * (sandbox_lib.c).  The one Lua runtime of the library: policies
 * (core/policy/) and the fault server (core/faults/) both run in it. */
#ifndef LUARETRY_SANDBOX_H
#define LUARETRY_SANDBOX_H

#include <lua.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "pool.h"

/* Why a script was stopped; LR_KILL_CANCEL: its owner's call was
 * cancelled (lr_sandbox_on_cancel). */
enum {
  LR_KILL_NONE = 0,
  LR_KILL_INSTRUCTIONS,
  LR_KILL_MEMORY,
  LR_KILL_TIME,
  LR_KILL_STOP,
  LR_KILL_CANCEL
};

typedef struct {
  size_t memory;     /* bytes of Lua memory */
  long instructions; /* per call into the script; 0: not counted */
  double seconds;    /* the thread's running time per call into the script
                        (three times as much wall time at most); 0: none */
} lr_limits;

/* Where print() goes: the policy's, read at each print. */
typedef struct {
  luaretry_log_fn fn;
  void *ud;
} lr_log_target;

/* What the watchdog looks at once a tick: `look` is called with the tick. */
typedef struct lr_watched {
  void (*look)(struct lr_watched *w, long now);
  struct lr_watched *prev, *next;
} lr_watched;

typedef struct lr_sandbox {
  /* what every call into the script reads or writes comes first, in two
   * lines (lr_sandbox_new aligns the struct to a line) */
  lua_State *L;
  size_t used;
  lr_limits limits;
  long remaining; /* instructions (or, timed, steps to the next look) */
  long refill;    /* `remaining` at each call: the limit, or the steps */
  int killed;     /* sticky until control is back in C */
  int watching;   /* limits.seconds > 0: the watchdog watches the calls */
  size_t refused; /* the size of an allocation refused over the
                       limit, 0 if none: Lua collects and asks again;
                       a second refusal is the limit */
  lr_rng *rng;    /* math.random's stream: the call's */
  /* the watchdog's side (watchdog.c) */
  atomic_int phase;           /* idle, running, being armed, armed */
  atomic_int halt;            /* stop at once, why: LR_KILL_TIME, _CANCEL */
  atomic_long entered;        /* the watchdog's tick when the call began,
                                 moved on by the host's ticks (pauses) */
  void *deferred;             /* frees held back while a call runs */
  const atomic_int *stop;     /* the host's stop flag, or NULL (lr_sandbox_stop_on) */
  atomic_int arming, freeing; /* a handshake: see limited_alloc */
  int base;                   /* stack slots kept between calls: the
                                      handler (1), then the script side's */
  void *owner;                /* what runs in it (a policy's lr_script), for
                                 the C functions its script calls */
  char where[256];            /* "file:line" of the kill, when known */
  size_t collected_at;        /* `used` after the last collection sandbox_lib.c ran */
  size_t deferred_count, deferred_bytes;
  const lr_log_target *log;
  /* lr_sandbox_on_cancel's question, or NULL */
  int (*cancelled)(void *owner);
  lr_rng load_rng;    /* math.random outside a call: at load */
  lr_watched watched; /* in the watchdog's list */
  /* the time limit's count of the CPU time the call's thread ran
   * (sandbox.c's ran_ticks): the thread's CPU clock, and the host's CPU
   * time within calls (lr_sandbox_pause to resume), ns, a running total */
  atomic_int thread_clock;
  atomic_long started; /* the tick the call began (`entered` before any pause moved it) */
  atomic_llong host_cpu;
  long long paused_cpu; /* the thread's CPU time at lr_sandbox_pause, ns */
  /* the watchdog's own first reading of the clock in the call it watches */
  long sampled_for;        /* the call's `started` the reading is of */
  clockid_t sampled_clock; /* and the clock it read */
  long sampled_at;         /* the tick of the reading */
  long long cpu_then;      /* the script's CPU time then, ns */
  void *reserve;           /* lr_sandbox_push_string's block, until Lua takes it */
  size_t reserve_size;
  size_t reserve_len;    /* the string's length it is for */
  size_t string_extra;   /* what a long string's block adds to its length,
                          once Lua took a reserve: LR_STRING_OVERHEAD
                          until then */
  lr_pool pool;          /* its small blocks, for reuse (pool.h) */
  char script_dir[4096]; /* "" when loaded from a string */
} lr_sandbox;

/* A state whose globals `open_libs` sets up; NULL when out of memory or
 * when the state cannot be set up. */
lr_sandbox *lr_sandbox_new(const lr_limits *limits, const char *script_path,
                           const lr_log_target *log, lua_CFunction open_libs);
/* sandbox_lib.c: the libraries a script sees, each an allow-list: a
 * policy's, and the fault server's (the same, with coroutines, and a
 * require that reaches the system's pure-Lua modules instead of lua/ and
 * policies/). */
int lr_sandbox_open_libs(lua_State *L);
int lr_sandbox_open_faults_libs(lua_State *L);
/* From now on a script of sb stops (sticky, LR_KILL_STOP) within a few
 * thousand instructions of *stop becoming non-zero; for a host whose
 * scripts have no time limit (the fault server). */
void lr_sandbox_stop_on(lr_sandbox *sb, const atomic_int *stop);
/* For an owner whose calls into the script run for something that can be
 * cancelled (a policy's: the luaretry_call a hook judges for, whose cancel
 * may come from another thread or a signal handler).  From now on, while
 * a call into the script runs, the watchdog asks cancelled(sb->owner) once
 * a tick (and the count hook, when counting, every thousand instructions);
 * once it says yes the script stops at its next instruction, or in the
 * pattern matcher, sticky (LR_KILL_CANCEL), and the call returns
 * LUARETRY_E_CANCELLED, not a limit.  The watchdog watches a state with a
 * time limit only (a policy's always has one).  It asks on its own thread
 * while it holds the call in progress (the call cannot end meanwhile), so
 * what the question reads of the owner stays put; it must take no lock
 * and block on nothing.  Set once, before any call. */
void lr_sandbox_on_cancel(lr_sandbox *sb, int (*cancelled)(void *owner));
void lr_sandbox_free(lr_sandbox *sb);
/* Hands the blocks the state keeps for reuse back to libc: a loaded state
 * that waits for its first call holds none. */
void lr_sandbox_trim(lr_sandbox *sb);
/* The sandbox a state belongs to (kept in its extra space). */
/* Pushes at most 40 bytes of s and returns them, for quoting user text in an
 * error (lua_pushfstring has no precision). */
static inline const char *lr_quote_clip(lua_State *L, const char *s) {
  size_t n = strlen(s);
  lua_pushlstring(L, s, n > 40 ? 40 : n);
  return lua_tostring(L, -1);
}

static inline lr_sandbox *lr_sandbox_of(lua_State *L) {
  return *(lr_sandbox **)lua_getextraspace(L);
}

/*
 * Calls f with the light userdata `arg` as its one argument, under
 * protection and with the limits re-armed; leaves `nresults` results on
 * the stack on success (the caller pops them).  Returns LUARETRY_OK,
 * LUARETRY_E_LIMIT (the message names the limit and where it was hit),
 * LUARETRY_E_CANCELLED (stopped by lr_sandbox_on_cancel's cancel: the
 * message says where), or `failure` with the Lua error message
 * ("file:line: ..." whatever the error value's type), in err.
 */
luaretry_code lr_sandbox_call(lr_sandbox *sb, lua_CFunction f, void *arg, int nresults,
                              luaretry_code failure, char *err, size_t errlen);

/* The same for a function and its nargs arguments the caller pushed (which
 * must not have needed protection to push): no C function in between. */
luaretry_code lr_sandbox_pcall(lr_sandbox *sb, int nargs, int nresults, luaretry_code failure,
                               char *err, size_t errlen);

/* lr_sandbox_pcall in two halves, for a caller's hot path (a decision):
 * lr_sandbox_run makes the call and returns LUA_OK when it returned with no
 * limit hit (its results on the stack), anything else otherwise; then
 * lr_sandbox_failed, given that value, says what went wrong as
 * lr_sandbox_pcall would (LUARETRY_OK too: a refusal that Lua's collection
 * made room for) and sets the stack back to the handler on failure. */
static inline int lr_sandbox_run(lr_sandbox *sb, int nargs, int nresults);
luaretry_code lr_sandbox_failed(lr_sandbox *sb, int status, luaretry_code failure, char *err,
                                size_t errlen);

/* Pushes a copy of s[0..len) as a Lua string outside any protected call,
 * where a memory error would abort the host: only when nothing can raise
 * one, that is when the string fits under the memory limit and its block
 * is already allocated (Lua's first new block in lua_pushlstring is the
 * string's; the collector's step after it raises nothing).  The string's
 * bytes in Lua (lua_pushlstring's answer) when pushed; NULL when it must
 * be pushed under protection instead (lr_sandbox_call), nothing pushed. */
static inline const char *lr_sandbox_push_string(lr_sandbox *sb, const char *s, size_t len);

/* Around host code a script calls (a workflow's transport, the log): the
 * time it takes is not the script's.  The script's time limit goes on
 * from where it was, the host's ticks since paused_at (a
 * lr_watchdog_tick() read before the pause) not counted. */
void lr_sandbox_pause(lr_sandbox *sb);
void lr_sandbox_resume_from(lr_sandbox *sb, long paused_at);

/* Stops the script: marks the kill, remembers where, makes every later
 * instruction fail until control is back in C, and raises. */
int lr_sandbox_kill(lua_State *L, lr_sandbox *sb, int why);
/* The memory limit is reached: marks the kill (sticky) without raising,
 * for the allocator and for an out-of-memory error that a refusal caused. */
void lr_sandbox_memory_kill(lr_sandbox *sb);
/* C code that loops on the script's behalf (the pattern matcher) ran out
 * of sb->remaining: when counting, that is the instruction limit; when
 * timed, a moment to look at the clock.  Refills and returns, or kills. */
void lr_sandbox_refuel(lua_State *L, lr_sandbox *sb);
/* `units` of such work paid from sb->remaining, refuelling (a look at the
 * clock, or the end of the instruction limit) each time it runs out. */
void lr_sandbox_pay(lua_State *L, lr_sandbox *sb, size_t units);

/* Raises fmt's message after the "file:line: " of the innermost script
 * function on the stack: a C function's luaL_error names its own frame,
 * which has no line. */
int lr_sandbox_error(lua_State *L, const char *fmt, ...);

/* chunk.c: compiles text (never a binary chunk) as chunkname; lua_load's
 * status, with the function or the message on top.  The message names
 * the chunk (and the line the parser had reached) even where Lua's does
 * not: a binary chunk refused, "C stack overflow" in a nesting too
 * deep. */
int lr_chunk_load(lua_State *L, const char *text, size_t len, const char *chunkname);
/* The same for the file at path, as chunk "@path", read only when it is
 * a regular file of at most `limit` bytes (0: any): a FIFO or a device is
 * refused at once, never waited on.  *missing = 1 (nothing pushed) when
 * there is no such file; LUA_ERRFILE with "path: cannot read: why" on top
 * when it cannot be read; LUA_ERRMEM with "not enough memory" when the
 * host's memory ran out; a UTF-8 BOM and a first "#" line are skipped,
 * as luaL_loadfile does. */
int lr_chunk_load_file(lua_State *L, const char *path, size_t limit, int *missing);

/* watchdog.c: the library's one helper thread, enforcing time limits. */
#define LR_WATCHDOG_TICK_MS 5
void lr_watchdog_add(lr_watched *w);
void lr_watchdog_remove(lr_watched *w);
/* A fork's child holds watched sandboxes (its parent's policies) and no
 * thread: the first call into one starts it (lr_watchdog_adopt). */
extern atomic_int lr_watchdog_orphaned;
void lr_watchdog_adopt(void);
/* The tick now (a count of the watchdog's periods): read at every call
 * into a timed script, so inline. */
extern atomic_long lr_watchdog_ticks;
static inline long lr_watchdog_tick(void) {
  return atomic_load_explicit(&lr_watchdog_ticks, memory_order_relaxed);
}

/* ---- lr_sandbox_run, inline: a decision's call into the script is part
 * of its caller's function (judge.c's), with no call or prologue of its
 * own; the rare ends are sandbox.c's. */

/* A call's phase, as the watchdog sees it (sandbox.c's watch). */
enum { LR_PHASE_IDLE, LR_PHASE_RUNNING, LR_PHASE_ARMING, LR_PHASE_ARMED };
#define LR_TIMED_STEPS     4096 /* matcher steps between two looks at the clock */
#define LR_SANDBOX_HANDLER 1    /* the stack slot of every call's message handler */
/* What lr_sandbox_run returns for a call that returned LUA_OK with a limit
 * hit or a refusal on the way: lr_sandbox_failed sorts it out. */
#define LR_RUN_CHECK       (-1)

/* The calling thread's CPU clock (pthread_getcpuclockid's, or
 * CLOCK_MONOTONIC where there is none), as lr_thread_clock_find found it;
 * 0 until then (no thread's clock is 0), and again in a fork's child.
 * There every thread's first call comes to lr_thread_clock_find, which
 * starts the child's watchdog for an inherited policy's state. */
extern _Thread_local int lr_thread_clock;
int lr_thread_clock_find(void);

/* The limits re-armed, and the watchdog told a call runs. */
static inline void lr_sandbox_enter(lr_sandbox *sb) {
  sb->remaining = sb->refill;
  sb->killed = LR_KILL_NONE;
  sb->where[0] = '\0';
  if (!sb->watching) return;
  atomic_store_explicit(&sb->halt, LR_KILL_NONE, memory_order_relaxed);
  /* the calling thread's CPU clock, for the watchdog (sandbox.c's
   * ran_ticks), at each call: a pool's state moves between threads; each
   * thread finds its own once (a library call and a system one less),
   * and a fork's child adopts the watchdog there */
  int clock = lr_thread_clock;
  if (__builtin_expect(!clock, 0)) clock = lr_thread_clock_find();
  atomic_store_explicit(&sb->thread_clock, clock, memory_order_relaxed);
  long tick = lr_watchdog_tick();
  atomic_store_explicit(&sb->started, tick, memory_order_relaxed);
  atomic_store_explicit(&sb->entered, tick, memory_order_relaxed);
  atomic_store_explicit(&sb->phase, LR_PHASE_RUNNING, memory_order_release);
}

/* sandbox.c: lr_sandbox_leave's end when the watchdog was at the call, or
 * frees were held back. */
void lr_sandbox_leave_slow(lr_sandbox *sb);

/* Back in C: the watchdog must not arm this state any more. */
static inline void lr_sandbox_leave(lr_sandbox *sb) {
  if (!sb->watching) return;
  int phase = LR_PHASE_RUNNING;
  if (__builtin_expect(
        !atomic_compare_exchange_strong(&sb->phase, &phase, LR_PHASE_IDLE) || sb->deferred, 0))
    lr_sandbox_leave_slow(sb);
}

static inline int lr_sandbox_run(lr_sandbox *sb, int nargs, int nresults) {
  lr_sandbox_enter(sb);
  int status = lua_pcall(sb->L, nargs, nresults, LR_SANDBOX_HANDLER);
  lr_sandbox_leave(sb);
  if (status != LUA_OK) return status;
  return sb->killed || sb->refused ? LR_RUN_CHECK : LUA_OK;
}

/* ---- lr_sandbox_push_string, inline: a new body's string is made in its
 * caller's function (judge.c's), with no prologue of its own. */

/* More than a string's header (24 bytes in Lua 5.4) and its final NUL. */
#define LR_STRING_OVERHEAD 64

/* sandbox.c: lr_sandbox_push_string's rare end, a reserve that Lua did
 * not take, or a refusal on the way. */
void lr_sandbox_pushed_slow(lr_sandbox *sb);
/* sandbox.c: lr_sandbox_push_string with a reserve the pool does not keep
 * (or none: then NULL): out of line, so the common push keeps no
 * registers across a malloc. */
const char *lr_sandbox_push_new(lr_sandbox *sb, const char *s, size_t len);

/* The size of the reserve for a string of len bytes, a block of the class
 * the string's will be freed to, once that is known (the pool's lists stay
 * balanced); 0 when the string must be made under protection instead. */
static inline size_t lr_sandbox_reserve_size(const lr_sandbox *sb, size_t len) {
  size_t need = len + sb->string_extra;
  return need < len || sb->killed || sb->used + need > sb->limits.memory ? 0 : need;
}

/* The string pushed with `block` (of `need` bytes) as its reserve. */
static inline const char *lr_sandbox_push_reserved(lr_sandbox *sb, void *block, size_t need,
                                                   const char *s, size_t len) {
  sb->reserve = block;
  sb->reserve_size = need;
  sb->reserve_len = len;
  const char *copy = lua_pushlstring(sb->L, s, len);
  if (__builtin_expect(sb->reserve || sb->refused || sb->killed, 0)) lr_sandbox_pushed_slow(sb);
  return copy;
}

static inline const char *lr_sandbox_push_string(lr_sandbox *sb, const char *s, size_t len) {
  size_t need = lr_sandbox_reserve_size(sb, len);
  void *block = need && need <= LR_POOL_MAX ? lr_pool_take(&sb->pool, need) : NULL;
  if (!block) return lr_sandbox_push_new(sb, s, len);
  return lr_sandbox_push_reserved(sb, block, need, s, len);
}

#endif
