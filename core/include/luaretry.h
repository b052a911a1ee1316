/*
 * luaretry.h: the retry policy engine's one public header.
 *
 * The C core owns time (monotonic clock, jitter RNG, backoff, deadlines,
 * waiting); a sandboxed Lua 5.4 script owns judgement (which outcomes are
 * worth retrying) and tuning.  Neither lua.h nor curl.h is needed here.
 *
 * Handles are opaque.  Every function that can fail returns a luaretry_code
 * (the readers of response headers too: their wait goes to an
 * out-parameter); luaretry_strerror() names it, and the detail (for
 * scripts: "file:line: what went wrong") is the caller's own:
 * luaretry_call_errmsg() the call's, valid until its next failure or its
 * free; luaretry_policy_errmsg() the calling thread's last failure on that
 * policy (a thread-local buffer, never written by another thread), valid
 * until this thread's next failure.  Destructors accept NULL, and every
 * function takes a NULL handle: LUARETRY_E_ARG, an empty answer or
 * nothing done, never a crash.  A policy outlives its calls.
 *
 * Environment: the library never prints and never exits.  It reads
 * LUARETRY_PATH, XDG_CONFIG_HOME and HOME in luaretry_policy_find() and
 * luaretry_policy_dir() (the search path), and LUARETRY_DATADIR there and
 * at each load (where `require` finds lua/ and policies/); nothing else
 * (LUARETRY_REDIS is the command's).  Its one piece of global state is the
 * watchdog below.
 *
 * Lua states: a loaded script runs in Lua states that belong to that load,
 * not to calls.  Each call into the script (a decision, prepare,
 * is_idempotent, a workflow) borrows a free state with one atomic flag and
 * gives it back when the script returns; a state is made only when more
 * threads are in the script at once than there are states.  So a call in
 * flight holds no Lua state (a few hundred bytes of C), and globals a
 * script sets are shared by every call a state serves: what one call must
 * remember across its attempts goes in info.call, a table that lasts as
 * long as the call.
 *
 * Threads: any number of threads may begin, report and wait on calls of
 * one loaded policy at once, with no mutex on the way (Locks, below); the budget, breaker
 * and counters are atomic.  A call is used by one thread at a time;
 * luaretry_call_cancel() may come from any thread or a signal handler.
 * Loading, reloading and luaretry_policy_set() may run while calls are in
 * flight: those finish under the script and settings they began with, and
 * a load's states are freed when its last call ends.  Set the log,
 * classifier and breaker callbacks before calls begin.  The policy-level
 * luaretry_policy_is_idempotent() and luaretry_policy_run_workflow() may
 * run on any thread; luaretry_policy_prepare() fills a buffer of the
 * policy, so one thread at a time for it (luaretry_call_prepare() has one
 * per call); a policy-level failure's luaretry_policy_errmsg() is the
 * failing thread's own.
 *
 * Locks, threads and fork: loading, reloading and luaretry_policy_set()
 * take the policy's mutex, and a reload or a policy's free then waits
 * out the begins and frees under way at that moment (a few instructions
 * each: a call's begin and free take no lock); the guards that keep a window or buckets (the
 * breaker's rate window, the client-side throttle, the rate limiter, the
 * server's quota) a short lock for a few instructions per attempt, whose
 * waiter spins a bounded number of times and then yields its time slice
 * (no thread spins on a holder that was preempted); a fleet
 * round trip its connection's mutex.  Threads the library starts: the
 * watchdog (below), with the first loaded policy, joined when the last is
 * freed; and, for a load with fleet guards, the fleet's (started by the
 * first call that needs Redis; see libluaretry(3)).  Neither calls into
 * the host.  After fork() a child's calls draw jitter from a new seed;
 * neither thread is in the child and the fleet's connections are the
 * parent's, so a child that runs calls loads its policies itself (a
 * load or set in the child, of the same text or not, joins the fleet on
 * a connection of its own; until then its guards are local, and
 * metrics.guards says fallback; its
 * first load, or its first call into a policy it inherited, starts its
 * own watchdog; no lock a parent's thread held at the fork is waited
 * for: a load or set under way on another thread at the fork leaves the
 * child's policy free to load and set).
 *
 * Time limit: a call into a script is stopped within time_limit (seconds
 * its thread runs, default 0.25), at its next Lua instruction, as a policy
 * error naming file and line, and the host goes on.  Time the thread waits
 * for a CPU (a busy machine, a host that took its core) is not counted
 * beyond the call's first 10 ms, up to three times time_limit of wall
 * time: a call is stopped then, however little it ran, so a starved
 * machine still gets its caller back.  A script pays nothing
 * per instruction for this: the library's one helper thread (the watchdog,
 * running while any policy is loaded, waking every 5 ms) arms a hook on a
 * call that has run four fifths of its limit, so a watchdog scheduled late
 * still stops it in time.  So a limit below that tick (under 10 ms) is
 * kept only to it: such a call is stopped after 5 to 10 ms, whatever the
 * limit says.  It never calls into the host.  An exact count, deterministic whatever the machine's speed, is
 * the host-only setting "instruction_limit", at the cost of a hook on
 * every instruction.  The same look stops a call into the script that runs
 * for a cancelled call (luaretry_call_cancel): within a tick, whatever its
 * time_limit.
 *
 * ABI: the shared libraries' sonames are libluaretry.so.MAJOR and
 * libluaretry-curl.so.MAJOR (the curl helper, luaretry_curl.h: a library of
 * its own, so that a host of the engine alone links Lua and hiredis, never
 * libcurl); their functions carry the symbol version LUARETRY_1.0, and
 * `make check-abi` holds them against a baseline kept in the tree.  What
 * only the command line uses is in luaretry_tool.h: not installed, not
 * exported, no promise.  Within one
 * major version functions are only added, enum values only appended (a
 * value never changes meaning), and every public struct keeps its size and
 * the place of each field: the structs end with reserved room that a later
 * version turns into new fields (an array indexed by an enum that grows has
 * room for its later values).  So a struct the caller fills must start
 * zeroed: through its init function, or a designated initializer
 * (`luaretry_request r = { .method = "GET", .url = u };`), which zeroes the
 * rest.  A change that cannot keep this rule makes a new major version.
 * Only luaretry_* symbols are exported.
 */
#ifndef LUARETRY_H
#define LUARETRY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define LUARETRY_API
#elif defined(__GNUC__)
#define LUARETRY_API __attribute__((visibility("default")))
#else
#define LUARETRY_API
#endif

#define LUARETRY_VERSION_MAJOR 0
#define LUARETRY_VERSION_MINOR 2
#define LUARETRY_VERSION_PATCH 0
/* 0xMMmmpp: compare with LUARETRY_VERSION_NUM >= 0x000200 */
#define LUARETRY_VERSION_NUM \
  ((LUARETRY_VERSION_MAJOR << 16) | (LUARETRY_VERSION_MINOR << 8) | LUARETRY_VERSION_PATCH)
#define LUARETRY_VERSION "0.2.0"
#define LUARETRY_AT_LEAST_VERSION(major, minor, patch) \
  (LUARETRY_VERSION_NUM >= (((major) << 16) | ((minor) << 8) | (patch)))

/* The library's version at run time ("0.2.0"); *num, when given, gets its
 * LUARETRY_VERSION_NUM, which may be newer than the header's. */
LUARETRY_API const char *luaretry_version(unsigned *num);

/* The Lua release the library runs scripts with ("Lua 5.4.6"), for
 * --version and bug reports. */
LUARETRY_API const char *luaretry_lua_version(void);

/* Append-only: a code never changes meaning. */
typedef enum {
  LUARETRY_OK = 0,
  LUARETRY_E_NOMEM,     /* out of memory (the host's, not a script's) */
  LUARETRY_E_ARG,       /* a bad argument: NULL, out of range, unknown name */
  LUARETRY_E_IO,        /* a policy file could not be read */
  LUARETRY_E_SYNTAX,    /* a policy script does not compile */
  LUARETRY_E_POLICY,    /* a policy script failed to run or a field is invalid */
  LUARETRY_E_LIMIT,     /* a script hit its instruction or memory limit */
  LUARETRY_E_STATE,     /* a call used out of order (e.g. report after stop) */
  LUARETRY_E_CANCELLED, /* a wait or call was cancelled */
  LUARETRY_E_OPERATION, /* the host's operation callback gave up */
  LUARETRY_E_SYSTEM,    /* the OS refused (clock, eventfd, getrandom) */
  LUARETRY_E_FLEET      /* the fleet's Redis could not be reached or refused */
} luaretry_code;

LUARETRY_API const char *luaretry_strerror(luaretry_code code);

/* ---------------------------------------------------------------- policy */

typedef struct luaretry_policy luaretry_policy;

LUARETRY_API luaretry_code luaretry_policy_new(luaretry_policy **out);
/* Free every call of p first ("a policy outlives its calls"): a call used
 * after its policy's free reads freed memory; nothing can refuse it. */
LUARETRY_API void luaretry_policy_free(luaretry_policy *p);

/*
 * Override a setting, as `--set NAME=VALUE` does: any field that
 * luaretry_field_at() lists as settable ("max_attempts", "deadline",
 * "backoff.initial", "budget.max_tokens", ...), or "options.NAME" for a
 * script's own option; "none" unsets an optional value.  Host-only limits:
 * "time_limit" (seconds the thread runs per call into the script, and
 * three times as much wall time at most, default 0.25), "instruction_limit" (an exact count per call into the script) and
 * "memory_limit" (bytes, per Lua state).  A value may be up to 4096 bytes
 * long (a pattern, a URL).  Overrides outlive reloads.  On a loaded policy the change
 * is validated at once and refused (policy unchanged) when invalid; the
 * message names the field ("backoff.inital: unknown name, did you mean
 * backoff.initial?").
 *
 * The fleet (README "Fleet"): the host-only "fleet.local" = "on" (or an
 * absolute folder) shares the guards with this user's processes on this
 * machine (libluaretry(3), "The fleet"); the host-only "fleet.redis" =
 * "redis://[user:password@]host[:port][/db]" or "unix:///path/to/socket"
 * ("none": off) shares the policy's budget and breaker with every process
 * that names the same Redis and key (the script's fleet.key, else its
 * name).  Its timeouts: "fleet.connect_timeout" and "fleet.command_timeout"
 * (ms, 250 and 100), "fleet.reconnect" (ms, the longest wait before trying
 * Redis again, 30000).  Setting them makes no I/O.  A success never waits
 * for Redis; a retry (the pre-retry check of luaretry_call_next) makes at
 * most one round trip bounded by the command timeout (and the connect
 * timeout when it reconnects first), none while Redis is known down
 * (reconnect backoff).  So does a new call while the fleet's breaker is
 * half-open, to ask for a probe permit.  When Redis is slow, down or refusing,
 * the policy's own guards decide at once, and the fleet's log (see
 * luaretry_policy_on_fleet) says so once, and once more when it is back;
 * no message carries the URL's user or password.  Calls on the virtual
 * clock or with LUARETRY_CALL_ISOLATED never touch Redis.
 */
LUARETRY_API luaretry_code luaretry_policy_set(luaretry_policy *p, const char *name,
                                               const char *value);

/* Load (or reload) a script.  On failure a loaded policy stays as it was. */
LUARETRY_API luaretry_code luaretry_policy_load_file(luaretry_policy *p, const char *path);
LUARETRY_API luaretry_code luaretry_policy_load_string(luaretry_policy *p, const char *chunkname,
                                                       const char *source);

/* For a policy loaded from a file: looks at the file's modification time
 * (at most once a second, however often called) and reloads it when it
 * changed.  *reloaded says whether it did; a failed reload keeps the
 * policy in force and returns the error (and is not retried until the file
 * changes again). */
LUARETRY_API luaretry_code luaretry_policy_reload_if_changed(luaretry_policy *p, int *reloaded);

LUARETRY_API const char *luaretry_policy_errmsg(const luaretry_policy *p);

/*
 * A policy by name, as the command line and the Lua module take POLICY: a
 * `policy` with a '/' or ending in ".lua" is a file (a regular one); any
 * other is a bare name looked up, as NAME and then NAME.lua, in each folder
 * of the search path in turn (luaretry_policy_dir()), never in the current
 * folder, so `gcs` finds the shipped gcs.lua unless a folder before it has
 * one of its own.  The path found goes into
 * `path` (terminated).  LUARETRY_E_IO when there is none, LUARETRY_E_ARG
 * for an empty name or a `path` too small.  Reads the environment and the
 * file system only; load the file with luaretry_policy_load_file().
 */
LUARETRY_API luaretry_code luaretry_policy_find(const char *policy, char *path, size_t size);

/* Folder i (from 0) of the search path: each folder of $LUARETRY_PATH
 * (':'-separated), then $XDG_CONFIG_HOME/luaretry/policies (default
 * ~/.config/luaretry/policies), then the installed share/luaretry/policies
 * ($LUARETRY_DATADIR/policies when that is set).  LUARETRY_E_ARG past the
 * last one; LUARETRY_E_IO (path empty) when folder i does not fit in
 * `size` bytes: skip it, the folders after it still count (a loop goes on
 * until LUARETRY_E_ARG). */
LUARETRY_API luaretry_code luaretry_policy_dir(size_t i, char *path, size_t size);

/* Warnings of the last load: unknown names, clamped values. */
LUARETRY_API size_t luaretry_policy_warning_count(const luaretry_policy *p);
LUARETRY_API const char *luaretry_policy_warning(const luaretry_policy *p, size_t i);

/* Bytes held by one Lua state of the loaded script, as it stood after the
 * load (each state made for threads in the script at once holds about as
 * much); memory_limit applies to each state. */
LUARETRY_API size_t luaretry_policy_memory(const luaretry_policy *p);

/* The value in force of a setting (a field luaretry_field_at() lists as
 * settable), spelled as luaretry_policy_set() takes it ("none" when unset):
 * into buf, cut to size and terminated.  LUARETRY_E_ARG for an unknown
 * name, LUARETRY_E_STATE before a load (luaretry_policy_errmsg() says
 * which). */
LUARETRY_API luaretry_code luaretry_policy_get(const luaretry_policy *p, const char *name,
                                               char *buf, size_t size);

/* The fields a policy script may set, from the one table that validates
 * them, applies overrides and fills luaretry_tuning: for documentation,
 * completion and `luaretry check`.  Owned by the library. */
typedef struct {
  const char *name;          /* "backoff.initial" */
  const char *type;          /* "string", "count", "seconds", "boolean",
                                "bytes", "number", "enum", "function",
                                "table", "backoff" (a table or a function) */
  const char *values;        /* an enum's names, "none|additive|...", or NULL */
  const char *default_value; /* as luaretry_policy_set() spells it, or NULL */
  const char *doc;           /* one line */
  int settable;              /* by luaretry_policy_set() / --set */
  int host_only;             /* a limit only the host sets */
} luaretry_field;

LUARETRY_API size_t luaretry_field_count(void);
/* NULL past the end. */
LUARETRY_API const luaretry_field *luaretry_field_at(size_t i);

/* Effective tuning, after defaults, overrides and clamping. */
typedef enum {
  LUARETRY_BACKOFF_EXPONENTIAL = 0,
  LUARETRY_BACKOFF_CONSTANT,
  LUARETRY_BACKOFF_LINEAR,
  LUARETRY_BACKOFF_SCRIPT /* backoff(n, previous) in the script */
} luaretry_backoff_kind;

typedef enum {
  LUARETRY_JITTER_NONE = 0,
  LUARETRY_JITTER_ADDITIVE,
  LUARETRY_JITTER_FULL,
  LUARETRY_JITTER_EQUAL,
  LUARETRY_JITTER_DECORRELATED
} luaretry_jitter;

/* "exponential", "constant", "linear", "function"; "none", "additive",
 * "full", "equal", "decorrelated"; "unknown" for any other value, as every
 * name function here (never NULL). */
LUARETRY_API const char *luaretry_backoff_kind_name(luaretry_backoff_kind k);
LUARETRY_API const char *luaretry_jitter_name(luaretry_jitter j);

typedef struct {
  const char *name;       /* the script's `name`, or its file name */
  const char *source;     /* chunk name: the file's path */
  long max_attempts;      /* 0: no limit */
  double deadline;        /* seconds; 0: none */
  double attempt_timeout; /* seconds; 0: none */
  int retry_after;        /* honour Retry-After */
  double max_retry_after; /* seconds, always finite */
  size_t body_limit;      /* bytes of body handed to the script */
  luaretry_backoff_kind kind;
  double initial, multiplier, max, step;
  luaretry_jitter jitter;
  double jitter_max;
  int cap_jitter;
  long instruction_limit; /* 0: not counted (the time limit applies) */
  size_t memory_limit;
  int budget; /* retry throttling on */
  double max_tokens, token_ratio;
  int breaker;   /* circuit breaker on */
  long failures; /* transient outcomes in a row that open it */
  double open_seconds;
  long probes;            /* calls let through when half-open */
  double time_limit;      /* seconds per call into the script */
  double connect_timeout; /* seconds to connect (HTTP); 0: none, only
                               the attempt's timeout */
  double stall_timeout;   /* seconds below stall_speed that fail an
                               attempt as "stalled" (HTTP); 0: none */
  long stall_speed;       /* bytes per second, at least 1 */
  uint64_t reserved[4];
} luaretry_tuning;

/* Fills *t; its strings live as long as the loaded policy. */
LUARETRY_API luaretry_code luaretry_policy_tuning(const luaretry_policy *p, luaretry_tuning *t);

/* The overload guards all calls of a policy share in a process (the
 * script's `budget` and `breaker`), and its counters. */
typedef enum {
  LUARETRY_BREAKER_CLOSED = 0,
  LUARETRY_BREAKER_OPEN,     /* calls stop at once: circuit_open */
  LUARETRY_BREAKER_HALF_OPEN /* `probes` calls may try */
} luaretry_breaker_state;

LUARETRY_API const char *luaretry_breaker_state_name(luaretry_breaker_state s);

/* Whose counts the guards decide on. */
typedef enum {
  LUARETRY_GUARDS_LOCAL = 0, /* this process's: no fleet.redis */
  LUARETRY_GUARDS_FLEET,     /* the fleet's, through Redis */
  LUARETRY_GUARDS_FALLBACK   /* fleet.redis is set, but the fleet's counts
                                  are not current (not synced yet, Redis slow,
                                  down or refusing): this process's decide */
} luaretry_guards_scope;

/* "local", "fleet", "fallback". */
LUARETRY_API const char *luaretry_guards_scope_name(luaretry_guards_scope s);

typedef struct {
  uint64_t calls, attempts, retries, successes;
  uint64_t finals; /* stopped on an outcome judged final */
  uint64_t exhausted, deadline_stops, policy_errors, cancelled;
  uint64_t budget_refusals;  /* retries the budget refused */
  uint64_t circuit_refusals; /* calls or retries refused by an open circuit */
  uint64_t breaker_openings;
  double time_waited;   /* seconds of waits decided */
  double budget_tokens; /* tokens left (0 without a budget) */
  luaretry_breaker_state breaker;
  uint64_t gave_up;               /* the host's operation gave up */
  uint64_t server_waits_too_long; /* a Retry-After above max_retry_after */
  luaretry_guards_scope guards;   /* whose counts the budget and breaker decide on
                                   now; FLEET: budget_tokens and breaker are the
                                   fleet's */
  uint64_t rate_limited;          /* calls whose rate-limiter wait would pass the
                                 deadline */
  uint64_t hedges;                /* hedges sent */
  uint64_t hedges_won;            /* hedges whose answer ended the call */
  uint64_t hedges_cancelled;      /* attempts cancelled because another one of
                                 their call answered first */
  uint64_t throttled;             /* outcomes judged throttling */
  union {                         /* attempts admission control refused; */
    uint64_t admission_refusals;  /* throttle_refusals: the old name, until 1.0 */
    uint64_t throttle_refusals;
  };
  /* carved from the reserved room: the commands this process's fleet sent
   * to Redis, each one request and its reply (the syncs' script, by
   * EVALSHA, and by EVAL after NOSCRIPT, a connect's AUTH and SELECT, a
   * sentinel's question, a cluster's ASKING, the rate limiter's and the
   * reserve's scripts, luaretry_policy_fleet_status's); 0 without
   * fleet.redis.  What Redis's INFO commandstats counts of them. */
  uint64_t fleet_round_trips;
  uint64_t reserved[15]; /* room for later counters: zeroed */
} luaretry_metrics;

LUARETRY_API luaretry_code luaretry_policy_metrics(const luaretry_policy *p, luaretry_metrics *m);
/* The rate limiter's attempts per second now (the policy's `rate`): its
 * limit, or what the adaptive one allows; 0 without a limiter, or adaptive
 * and not yet limited. */
LUARETRY_API double luaretry_policy_rate(const luaretry_policy *p);

/* Called on each change of the breaker's state (from the thread whose
 * outcome caused it). */
typedef void (*luaretry_breaker_fn)(void *ud, luaretry_breaker_state s);
LUARETRY_API void luaretry_policy_on_breaker(luaretry_policy *p, luaretry_breaker_fn fn, void *ud);

/* Where a script's print() goes (default: nowhere), one line per print, its
 * values tab-separated, a NUL byte in them shown as \0.  Names follow one
 * scheme: a callback's registration is on_ (luaretry_policy_on_log,
 * _on_breaker, _on_fleet, luaretry_call_on_decision), a predicate reads as
 * one (luaretry_call_cancelled, luaretry_policy_has_workflow,
 * luaretry_curl_never_sent), an action is a verb (luaretry_call_cancel,
 * luaretry_policy_reload_if_changed).  A script's top level runs at each
 * load and set, so its print() may come while the policy loads: a set,
 * load or reload of that policy from the callback then is refused
 * (LUARETRY_E_STATE, errmsg says why); during a call it goes as usual. */
typedef void (*luaretry_log_fn)(void *ud, const char *line);
LUARETRY_API void luaretry_policy_on_log(luaretry_policy *p, luaretry_log_fn fn, void *ud);

/* ----------------------------------------------------------------- fleet */

/* Where the fleet's changes of health are told, one line each, without
 * credentials: lost ("fleet guards KEY: URL: why; local guards decide until
 * Redis is back") and back.  Once per change, never per call, on a
 * caller's thread (the next call into the policy after the change; never
 * the fleet's own thread); the function must not call into the policy.
 * Default: the log callback (luaretry_policy_on_log).  Set it before
 * calls begin. */
LUARETRY_API void luaretry_policy_on_fleet(luaretry_policy *p, luaretry_log_fn fn, void *ud);

/* One round trip now, bounded by fleet.connect_timeout and
 * fleet.command_timeout: sends what was counted and learns the fleet's
 * state (while the fleet's breaker is half-open, with a probe permit for
 * this process's next new call).  For a host about to begin its first
 * call, so that the breaker and budget are the fleet's from the start (the
 * command does it), and for one that wants to rejoin at once after Redis
 * was lost (otherwise the fleet's thread reconnects once the reconnect
 * backoff allows).  The connection is made by the first round trip (this
 * call's, or the fleet's thread's, which calls start: see libluaretry(3)
 * "Threads"): until then (or without this call) the policy's own guards
 * decide.
 * LUARETRY_E_STATE without a fleet (fleet.redis unset, or neither budget
 * nor breaker); LUARETRY_E_FLEET when Redis could not be reached or
 * refused, or a reconnect is not due yet (errmsg says why; the policy goes
 * on under its own guards).  What a load counted and did not send yet goes
 * when the load does: at luaretry_policy_free, or when a reload or a set
 * that changes the fleet's URL, key, sync or timeouts retires it after its
 * last call (one round trip, none while Redis is down). */
LUARETRY_API luaretry_code luaretry_policy_fleet_sync(luaretry_policy *p);

/* One process that synced in the last minute. */
typedef struct {
  char member[128]; /* "HOST:PID:N" (N: the process's Nth fleet handle,
                                  one per policy); control bytes shown as \xNN and
                                  a backslash doubled: any process may write one */
  double seen_ago;  /* seconds since its last sync */
  uint64_t reserved[2];
} luaretry_fleet_process;

/* The fleet's state as its store (Redis, or the local file) holds it. */
typedef struct {
  int exists;                /* 0: no state (never synced, expired, reset) */
  double tokens, max_tokens; /* max_tokens as the last writer had it */
  luaretry_breaker_state breaker;
  long consecutive_failures, probes_left;
  double opened_at; /* Unix seconds on Redis's clock; 0: never */
  double now;       /* Redis's clock, Unix seconds */
  char key[256];    /* the Redis key */
  char where[320];  /* the URL, without user and password */
  size_t process_count;
  luaretry_fleet_process *processes; /* most recent first (1000 at most);
                                         freed by luaretry_fleet_status_free */
  /* carved from the reserved room: the client-side throttle's window
   * (window_seconds 0: the policy has no throttle) and the fleet's rate
   * limiter (rate_limit 0: none), whose slots are leased to processes up
   * to rate_ahead s after now */
  double window_requests, window_accepts, window_seconds;
  double rate_limit, rate_ahead;
  /* the budget's leases: tokens out in blocks to processes (counted in
   * tokens too), and how many processes hold one (Redis only) */
  double leased_tokens;
  uint64_t lease_holders;
  uint64_t reserved[1];
} luaretry_fleet_status;

/* Reads the fleet's state (one round trip, connecting at once); looking
 * changes nothing.  LUARETRY_E_STATE without a fleet (neither fleet.local
 * nor fleet.redis), LUARETRY_E_FLEET (errmsg) when the store cannot be read. */
LUARETRY_API luaretry_code luaretry_policy_fleet_status(luaretry_policy *p,
                                                        luaretry_fleet_status *st);
LUARETRY_API void luaretry_fleet_status_free(luaretry_fleet_status *st);
/* Deletes the fleet's state in Redis: full budget, breaker closed, no
 * processes listed. */
LUARETRY_API luaretry_code luaretry_policy_fleet_reset(luaretry_policy *p);

/* ------------------------------------------------------------- outcomes */

typedef enum {
  LUARETRY_OUTCOME_HTTP = 0, /* status: HTTP status, 0 = no response */
  LUARETRY_OUTCOME_COMMAND   /* status: exit status, 128+N for signal N */
} luaretry_outcome_kind;

typedef struct {
  const char *name; /* lower-case */
  const char *value;
} luaretry_header;

typedef struct {
  luaretry_outcome_kind kind;
  int status;
  const char *error; /* transport failure ("connect", "timeout", "reset",
                            "dns", "tls", "tls_verify", ...) or NULL */
  const char *body;  /* may be NULL; cut to body_limit for the script */
  size_t body_len;
  const luaretry_header *headers;
  size_t header_count;
  const char *method;       /* may be NULL */
  const char *url;          /* may be NULL */
  double retry_after;       /* server-requested wait in seconds; < 0 or NaN:
                               none; +infinity: more than max_retry_after */
  int workflow;             /* inside a run() workflow */
  int not_repeatable;       /* the operation may have taken effect and is not
                            idempotent: a transient outcome becomes final */
  const char *error_detail; /* the transport's own message for `error` (for
                            the curl helper, libcurl's), or NULL; text from
                            the network may be in it: escape it to print */
  uint64_t reserved[7];
} luaretry_outcome;

/* Sets every field to its empty value (retry_after = -1).  An outcome
 * whose headers are NULL with a count is refused by the functions that
 * report one (LUARETRY_E_ARG, luaretry_call_errmsg naming it; nothing is
 * counted, the call goes on). */
LUARETRY_API void luaretry_outcome_init(luaretry_outcome *o);

/* A Retry-After header's value as the seconds to wait from `now` (seconds
 * since the epoch: CLOCK_REALTIME, which an HTTP-date is measured against;
 * 0: read the wall clock, the usual call): delta-seconds, or an HTTP-date
 * in any of its three forms (IMF-fixdate, RFC 850, asctime), into *wait,
 * never more than 1e9.  LUARETRY_E_ARG (*wait = -1: ignore it) for a
 * negative, past or malformed value, a NULL one, or `wait` NULL.  For
 * hosts that read responses themselves; the curl helper uses it for
 * outcome.retry_after, and of several Retry-After headers the first valid
 * one counts:
 *   double w;
 *   if (luaretry_retry_after(value, 0, &w) == LUARETRY_OK) o.retry_after = w; */
LUARETRY_API luaretry_code luaretry_retry_after(const char *value, double now, double *wait);

/* The wait until a spent rate-limit quota comes back, from a response's
 * headers (names in any case), into *wait; `now` as for
 * luaretry_retry_after (0: the wall clock):
 *  - the IETF RateLimit field (draft-ietf-httpapi-ratelimit-headers), a
 *    list of quota items such as `"default";r=0;t=30`: the first item with
 *    r=0 and a valid t (seconds) counts, across repeated fields in order;
 *  - else X-RateLimit-Remaining: 0 with X-RateLimit-Reset (GitHub's and
 *    others'), or RateLimit-Remaining: 0 with RateLimit-Reset (the draft's
 *    older form): the reset is epoch seconds from 1e9 on (2001), delta
 *    seconds below; a fraction is allowed; of a repeated header the first
 *    valid value counts.
 * LUARETRY_OK with *wait = -1 when no field says the quota is spent; a
 * malformed one is ignored (negative, not a number, more than 15 digits, a
 * reset in the past or more than 1e9 s ahead).  LUARETRY_E_ARG for a NULL
 * `wait`, or NULL headers with a count.  Bounded like a Retry-After by max_retry_after
 * where a policy waits for it (the shipped http policy does, on 429, 503
 * and a quota 403). */
LUARETRY_API luaretry_code luaretry_rate_limit(const luaretry_header *headers, size_t count,
                                               double now, double *wait);

/* What the rate-limit fields say of the quota, as rate.headers paces by
 * them: *remaining requests in the next *reset seconds, from the tightest
 * item of the IETF RateLimit field (r and t), else RateLimit-Remaining and
 * RateLimit-Reset, else X-RateLimit-Remaining and X-RateLimit-Reset (epoch
 * seconds against `now`, 0: the wall clock, or delta seconds).  LUARETRY_OK
 * when read, and when there is no such field (*remaining = *reset = -1);
 * LUARETRY_E_ARG when there is one that does not read (it is ignored;
 * both -1), and for a NULL argument. */
LUARETRY_API luaretry_code luaretry_rate_quota(const luaretry_header *headers, size_t count,
                                               double now, double *remaining, double *reset);

/* What a classifier says of one outcome. */
typedef enum {
  LUARETRY_CLASS_SUCCESS = 0,
  LUARETRY_CLASS_FINAL,     /* not worth retrying */
  LUARETRY_CLASS_TRANSIENT, /* retry after the backoff, or after `wait` */
  LUARETRY_CLASS_ERROR,     /* the classifier itself failed */
  LUARETRY_CLASS_THROTTLING /* transient, and the service is throttling the
                                client: the throttling backoff and budget cost */
} luaretry_class;

/*
 * A C classifier replaces the script's is_success/is_transient (hosts that
 * judge outcomes in C; the benchmark's baseline).  Set *wait to a number of
 * seconds >= 0 to choose the wait, leave it negative for the backoff; NaN
 * or +infinity stops the call as a policy error naming it.
 */
typedef luaretry_class (*luaretry_classify_fn)(void *ud, const luaretry_outcome *o, int attempt,
                                               double *wait);
LUARETRY_API luaretry_code luaretry_policy_set_classifier(luaretry_policy *p,
                                                          luaretry_classify_fn fn, void *ud);

/* A request as the script's is_idempotent(request) and prepare(request,
 * attempt) see it.  Header names are sent as given; a header whose value
 * is "" is sent empty, one whose value is NULL is not sent, nor the one
 * libcurl would send of that name (curl's -H 'Name:'), and the script
 * does not see it.  A header whose name is NULL, or headers NULL with a
 * count, is refused (LUARETRY_E_ARG, the message naming it) by the
 * functions that take a request. */
typedef struct {
  const char *method;
  const char *url;
  const luaretry_header *headers;
  size_t header_count;
  const char *body; /* NULL: no body */
  size_t body_len;
  uint64_t reserved[4];
} luaretry_request;

/* Sets every field to its empty value (or use a designated initializer). */
LUARETRY_API void luaretry_request_init(luaretry_request *r);

/* The script's is_idempotent(request), or else the method rule: GET, HEAD,
 * OPTIONS, PUT and DELETE are, POST and PATCH (and others) are not. */
LUARETRY_API luaretry_code luaretry_policy_is_idempotent(luaretry_policy *p,
                                                         const luaretry_request *r,
                                                         int *idempotent);

/* Runs the script's prepare(request, attempt) when it has one.  *out is
 * the request to send: `in` itself, or copies owned by the policy until
 * the next prepare (or free). */
LUARETRY_API luaretry_code luaretry_policy_prepare(luaretry_policy *p, const luaretry_request *in,
                                                   int attempt, luaretry_request *out);

/* ------------------------------------------------------------- workflows */

/* One HTTP exchange as a workflow's http.* functions see it. */
typedef struct {
  int status;        /* 0: no response (see error) */
  const char *error; /* transport failure name, or NULL */
  const char *body;
  size_t body_len;
  const luaretry_header *headers; /* lower-case names */
  size_t header_count;
  const char *error_detail; /* the transport's own message, or NULL */
  uint64_t reserved[3];
} luaretry_response;

/* Makes one attempt of `req` (no retry); *resp stays valid until the next
 * call.  Return LUARETRY_OK even for a transport failure (resp->error);
 * another code (e.g. LUARETRY_E_CANCELLED) ends the workflow.  A response
 * header with a NULL name, or headers NULL with a count, fails the
 * workflow as a policy error naming it. */
typedef luaretry_code (*luaretry_transport_fn)(void *ud, const luaretry_request *req,
                                               double timeout, luaretry_response *resp);

/* Whether the script defines run(http, args). */
LUARETRY_API int luaretry_policy_has_workflow(const luaretry_policy *p);

/* Runs the workflow once: run(http, args), its http.get/put/post/request
 * going through `transport`.  `timeout` seconds bound the whole run: each
 * request's transport gets what is left of them (0 or +infinity: none; NaN
 * or negative is refused, LUARETRY_E_ARG).  Fills *out with the
 * status and body run() returned (workflow = 1); they stay valid until
 * the next run.  A Lua error is LUARETRY_E_POLICY (message with file and
 * line in luaretry_policy_errmsg).  A request run() makes once `timeout`
 * is used up is not sent: the run ends as a timed-out attempt (status 0,
 * error "timeout"), whatever run() does after.  Run as the operation of
 * luaretry_call_run(), on its thread, a cancel of that call stops a busy
 * run() within a tick, as it stops a hook (LUARETRY_E_CANCELLED). */
LUARETRY_API luaretry_code luaretry_policy_run_workflow(luaretry_policy *p, const char *const *args,
                                                        int nargs, luaretry_transport_fn transport,
                                                        void *ud, double timeout,
                                                        luaretry_outcome *out);

/* ------------------------------------------------------------- decisions */

/* Why a call stopped; NONE while it goes on.  Append-only. */
typedef enum {
  LUARETRY_REASON_NONE = 0,
  LUARETRY_REASON_SUCCESS,
  LUARETRY_REASON_FINAL,
  LUARETRY_REASON_EXHAUSTED,
  LUARETRY_REASON_DEADLINE,
  LUARETRY_REASON_POLICY_ERROR,
  LUARETRY_REASON_CANCELLED,
  LUARETRY_REASON_BUDGET,
  LUARETRY_REASON_CIRCUIT_OPEN,
  LUARETRY_REASON_GAVE_UP,              /* the host's operation gave up */
  LUARETRY_REASON_SERVER_WAIT_TOO_LONG, /* a Retry-After above max_retry_after */
  LUARETRY_REASON_ADMISSION,            /* admission control (the client-side throttle)
                                           refused the attempt */
  LUARETRY_REASON_RATE_LIMIT,           /* the rate limiter's wait would pass the deadline */
  /* the old name of LUARETRY_REASON_ADMISSION, the same value, until 1.0 */
  LUARETRY_REASON_THROTTLE = LUARETRY_REASON_ADMISSION
} luaretry_reason;

/* "retry" for NONE, else "success", "final", "exhausted", "deadline",
 * "policy_error", "cancelled", "budget", "circuit_open", "gave_up",
 * "server_wait_too_long", "admission", "rate_limit". */
LUARETRY_API const char *luaretry_reason_name(luaretry_reason r);

typedef enum {
  LUARETRY_WAIT_NONE = 0,
  LUARETRY_WAIT_BACKOFF,  /* the policy's backoff */
  LUARETRY_WAIT_SERVER,   /* the server's Retry-After */
  LUARETRY_WAIT_SCRIPT,   /* is_transient returned a number */
  LUARETRY_WAIT_CLAMPED,  /* the backoff's cap (max) decided the wait */
  LUARETRY_WAIT_THROTTLE, /* the throttling backoff (throttle_backoff) */
  LUARETRY_WAIT_RATE      /* the rate limiter (`rate`): a token comes then */
} luaretry_wait_source;

LUARETRY_API const char *luaretry_wait_source_name(luaretry_wait_source s);

typedef struct {
  int retry;              /* 1: attempt again after `wait` */
  luaretry_reason reason; /* why the call stopped (retry == 0) */
  int attempt;            /* the attempt just judged, from 1 */
  double wait;            /* seconds before the next attempt, 0 if none */
  double next_timeout;    /* the next attempt's timeout; 0: none */
  double elapsed;         /* seconds since the call began */
  luaretry_wait_source wait_source;
  const char *rule;       /* what decided: "policies/http.lua:12",
                                 "default", "deadline", "max_attempts" ...;
                                 valid until luaretry_call_free (a reload
                                 meanwhile does not move it) */
  const char *message;    /* policy error detail, or NULL; valid until the
                                 call's next decision or its free */
  const char *hook_error; /* on_retry failed (decision unchanged), or NULL;
                                 as long as message */
  int hedge;              /* the attempt judged (or, from
                                 luaretry_call_hedge, the one to start) is a
                                 hedge */
  int in_flight;          /* attempts of the call still running: with
                                 retry = 0 and reason NONE, wait for them; once
                                 the call stopped, cancel them */
  int throttled;          /* the outcome was judged throttling */
  uint32_t reserved_32;
  uint64_t reserved[2];
} luaretry_decision;

/* ------------------------------------------------------------------ calls */

typedef struct luaretry_call luaretry_call;

#define LUARETRY_CALL_SEED             0x1u /* use .seed, not the OS */
/* Waits advance a virtual clock.  Without LUARETRY_CALL_ISOLATED the call
 * still shares the policy's guards, which see its time as the real time at
 * its begin plus its virtual waits: one that waited 100 s and then opened
 * the breaker keeps it open for real calls too, until 100 s + open_seconds
 * after its begin.  A simulation beside live calls adds ISOLATED. */
#define LUARETRY_CALL_VIRTUAL_TIME     0x2u
/* A budget, breaker and counters of the call's own (a probe, a what-if):
 * the policy's are neither read nor changed. */
#define LUARETRY_CALL_ISOLATED         0x4u
/* No hedge for this call, whatever the policy's hedge says: for a host that
 * tells of one transfer (curl's -i, -D, -w) and cannot tell of several. */
#define LUARETRY_CALL_NO_HEDGE         0x8u
/* A workflow's request (was LUARETRY_CALL_ONE_ROUND): one round inside an
 * operation the host judges as a whole: the attempt and its hedges, never a retry; a transient answer
 * ends it (reason FINAL) once no attempt is in flight.  The guards count
 * the enclosing call, not the round: it is not a call in the metrics,
 * the guards do not refuse its start nor record its answers; its hedges
 * are still asked for, paid and counted as hedges. */
#define LUARETRY_CALL_WORKFLOW_REQUEST 0x10u
/* Use .deadline: the call ends by then, or by the policy's deadline when
 * that comes first. */
#define LUARETRY_CALL_DEADLINE         0x20u
/* Use .retries: the retries the caller lets this call make (the allowance
 * its own inbound request carried, luaretry_call_options_inbound()). */
#define LUARETRY_CALL_RETRIES          0x40u
/* A workflow's own call (the operation runs luaretry_policy_run_workflow)
 * whose host makes each request of the script a LUARETRY_CALL_WORKFLOW_REQUEST
 * call of the same policy (the curl transport does: luaretry_curl_transport_hedge):
 * max_attempts, the deadline, the breaker and the budget count its rounds
 * and record its outcome; the rate limiter, header pacing, admission and
 * hedging's bound are its requests' (luaretry-policy(5), ONE ATTEMPT,
 * EVERY GUARD), so a round is not paced or counted as a request besides. */
#define LUARETRY_CALL_WORKFLOW         0x80u

typedef struct {
  unsigned flags;
  uint64_t seed;
  /* With LUARETRY_CALL_DEADLINE: the host's own deadline for this call (the
   * deadline of the request it serves), an absolute time in seconds on the
   * monotonic clock of luaretry_clock_now(); luaretry_deadline_in(0.8) is
   * 800 ms from now.  The earlier of it and the policy's `deadline` wins,
   * for the waits, the attempts' timeouts and every stop with reason
   * DEADLINE.  A deadline already passed, NaN or negative stops the call
   * at once (reason DEADLINE, no attempt, no wait); +infinity is none.
   * A call on the virtual clock gets the time left when it begins. */
  double deadline;
  /* With LUARETRY_CALL_RETRIES: at most this many retries of outcomes the
   * caller also sees (the call makes at most retries + 1 attempts, and
   * never more than the policy's max_attempts).  A retry after an outcome
   * whose error is "connect" or "dns" (no connection was made: the caller
   * cannot see it, nor retry it) takes none of it.  The stop is EXHAUSTED
   * with rule "retries". */
  uint32_t retries;
  uint32_t reserved_32;
  uint64_t reserved[2];
} luaretry_call_options;

LUARETRY_API void luaretry_call_options_init(luaretry_call_options *o);

/* Seconds on the monotonic clock (CLOCK_MONOTONIC): the clock of
 * luaretry_call_options.deadline.  Comparable only within one boot of one
 * machine: a deadline passed to another process or host travels as the
 * seconds left. */
LUARETRY_API double luaretry_clock_now(void);
/* luaretry_clock_now() + seconds: a per-call deadline `seconds` from now. */
LUARETRY_API double luaretry_deadline_in(double seconds);

/* One retry layer and one deadline across services.  A service that gets a
 * request and calls another under a policy gives that call what its own
 * request carried: the time its caller still waits and the retries its
 * caller lets it make, read from the inbound headers named by the policy's
 * `propagate` (or, when the policy sets none, the defaults
 * "Luaretry-Deadline-Ms" and "Luaretry-Retries"; names in any case).
 * Values only shorten o's deadline and lower its retries, never raise them
 * (LUARETRY_CALL_DEADLINE and LUARETRY_CALL_RETRIES are set as needed); of
 * a repeated header the smallest valid value counts.  A deadline of 0 ms
 * has passed: the call ends at once with DEADLINE.  LUARETRY_OK when every
 * such header read; LUARETRY_E_ARG when one did not (negative, not a whole
 * number, more than 12 digits: it is ignored, the valid ones still apply:
 * the host says so once), and for a NULL p or o. */
LUARETRY_API luaretry_code luaretry_call_options_inbound(const luaretry_policy *p,
                                                         const luaretry_header *headers,
                                                         size_t count, luaretry_call_options *o);

/* Step API: begin, make an attempt with luaretry_call_timeout(), report its
 * outcome, follow the decision.  Nothing here sleeps.  luaretry_call_begin
 * refuses (LUARETRY_E_ARG, said by luaretry_policy_errmsg) options with a
 * flag this library does not know, never ignoring it, with reserved fields
 * that are not zero (a later version's fields), and with
 * LUARETRY_CALL_WORKFLOW and LUARETRY_CALL_WORKFLOW_REQUEST together. */
LUARETRY_API luaretry_code luaretry_call_begin(luaretry_policy *p, const luaretry_call_options *o,
                                               luaretry_call **out);
/* The timeout of the attempt going now: what luaretry_call_next (or
 * luaretry_call_hedge) last gave, what is left of the deadline then, and
 * what the propagate headers pass on; 0: none. */
LUARETRY_API double luaretry_call_timeout(const luaretry_call *c);
/* Seconds from the call's begin by which it ends: the earlier of the
 * policy's deadline and the call's own (LUARETRY_CALL_DEADLINE); 0: none. */
LUARETRY_API double luaretry_call_deadline(const luaretry_call *c);
/* The next attempt's time to connect: the policy's connect_timeout within
 * luaretry_call_timeout(); 0: none. */
LUARETRY_API double luaretry_call_connect_timeout(const luaretry_call *c);
/* The policy's stall_timeout (seconds; 0: none) and stall_speed (bytes per
 * second) for c's attempts: an HTTP attempt slower than that for that long
 * is a "stalled" failure (the curl helper sets libcurl's low-speed limit). */
LUARETRY_API void luaretry_call_stall(const luaretry_call *c, double *seconds, long *speed);
/* May an attempt be made now?  Ask before each attempt: d->retry = 1 (with
 * d->next_timeout), or the call has stopped for d->reason.  A call begun
 * while the circuit is open is refused before any attempt, and a retry
 * whose wait ended with the circuit open is not made (circuit_open); with
 * fleet guards, neither is one whose wait ended with the fleet's budget
 * spent (budget): before a retry the fleet's counts are brought up to date
 * (at most one round trip, bounded by fleet.command_timeout, and by
 * fleet.connect_timeout more when it reconnects first, and by what is left
 * of the deadline; ended at once by luaretry_call_cancel; none while Redis
 * is known down).  When the deadline passed meanwhile, or less than 1 ms
 * of it is left (no attempt starts in its last millisecond), the call
 * stops (deadline); d->next_timeout is what is left of it.  A host with its own
 * event loop should know this call may block that long when its policy
 * has fleet.redis (with a fixed `rate` too: a block of the fleet's tokens
 * is leased in one such round trip when this process has none left).  With the policy's rate limiter (`rate`), d->wait may
 * be above 0 (wait_source RATE): the attempt's token comes then; wait that
 * long (luaretry_call_wait, or the host's own timer), then make the
 * attempt (asking again gives what is left of the wait; the token is
 * kept).  A token that would come after the deadline stops the call
 * (reason RATE_LIMIT). */
LUARETRY_API luaretry_code luaretry_call_next(luaretry_call *c, luaretry_decision *d);
LUARETRY_API luaretry_code luaretry_call_report(luaretry_call *c, const luaretry_outcome *o,
                                                luaretry_decision *d);
LUARETRY_API double luaretry_call_elapsed(const luaretry_call *c);
LUARETRY_API const char *luaretry_call_errmsg(const luaretry_call *c);
/* A host's own failure on the call (its transport refused the request,
 * its sink the body): `message` is what luaretry_call_errmsg(c) gives
 * until the next failure, as the library's own failures are.  Returns
 * `code`; the call is not stopped.  For hosts that step a call with a
 * transport of their own, as the curl helper does. */
LUARETRY_API luaretry_code luaretry_call_errmsg_set(luaretry_call *c, luaretry_code code,
                                                    const char *message);
LUARETRY_API void luaretry_call_free(luaretry_call *c);

/* For hosts that make attempts themselves (an event loop, the curl helper):
 * the script's is_idempotent(request) (else the method rule) and
 * prepare(request, attempt), run in the call's own Lua state, so any number
 * of calls may use them on their threads at once.  *out as for
 * luaretry_policy_prepare(), owned by the call until its next prepare.
 * Errors in luaretry_call_errmsg(). */
LUARETRY_API luaretry_code luaretry_call_is_idempotent(luaretry_call *c, const luaretry_request *r,
                                                       int *idempotent);
LUARETRY_API luaretry_code luaretry_call_prepare(luaretry_call *c, const luaretry_request *in,
                                                 int attempt, luaretry_request *out);
/* The call's invocation id: a UUID version 4 ("xxxxxxxx-xxxx-4xxx-yxxx-
 * xxxxxxxxxxxx", lower case), the same for all its attempts, drawn from a
 * stream derived from the call's seed (a fixed seed gives a fixed id; the
 * jitter's draws are not changed by it).  Valid as long as the call. */
LUARETRY_API const char *luaretry_call_invocation_id(luaretry_call *c);

/* A file descriptor that becomes readable once the call is cancelled, for
 * a host that waits on I/O itself (poll it with its sockets); made on first
 * use, owned by the call.  -1 if the system has none to give.  Valid until
 * luaretry_call_free: the descriptor of a call never cancelled serves a
 * later call, so a host stops polling it then. */
LUARETRY_API int luaretry_call_wakeup_fd(luaretry_call *c);

/* Stops the call as cancelled, where the host noticed the cancel itself
 * (e.g. its transfer ended on the wakeup fd): fills *d and tells the
 * observer, as a cancelled wait does.  A call that had stopped already
 * stays as it stopped: *d says how, errmsg that it had, nothing counted. */
LUARETRY_API void luaretry_call_stop_cancelled(luaretry_call *c, luaretry_decision *d);

/* A workflow's request refused before it went (its
 * LUARETRY_CALL_WORKFLOW_REQUEST call's luaretry_call_next said stop:
 * admission, rate_limit, deadline ...) ends the workflow's call `c` for the
 * same reason and rule, its message saying it was a request's: *d filled
 * as luaretry_call_next fills a stopped call's, the observer told (no
 * outcome).  luaretry_call_run then returns that decision, LUARETRY_OK,
 * whatever the operation returns.  LUARETRY_E_ARG when `request` did not
 * stop; LUARETRY_E_STATE when c had stopped already. */
LUARETRY_API luaretry_code luaretry_call_stop_as(luaretry_call *c, const luaretry_decision *request,
                                                 luaretry_decision *d);

/* Wait `seconds` on the call's clock: sleeps on the real clock, advances
 * the virtual one.  Never returns early except with LUARETRY_E_CANCELLED.
 * NaN, and +infinity on the virtual clock, are refused (LUARETRY_E_ARG). */
LUARETRY_API luaretry_code luaretry_call_wait(luaretry_call *c, double seconds);

/* Called after each decision of the call (logging, counting); `o` is NULL
 * for a decision made without an outcome: a cancel that stopped the call
 * during a wait, a guard that stopped it before an attempt, and a wait
 * luaretry_call_next adds (d->retry set, d->wait the rate limiter's or
 * header pacing's extra wait, d->wait_source LUARETRY_WAIT_RATE; told once
 * per token asked for).  It must not step the same
 * call (report, next, start, hedge, stop): nothing refuses it, and the
 * decision it was given, message and all, would change under the step
 * that called it.  (Was luaretry_call_observe.) */
typedef void (*luaretry_observer_fn)(void *ud, const luaretry_outcome *o,
                                     const luaretry_decision *d);
LUARETRY_API void luaretry_call_on_decision(luaretry_call *c, luaretry_observer_fn fn, void *ud);

/* Any thread, or a signal handler: a wait in progress returns at once,
 * and the call stops with reason CANCELLED at its next report.  A hook of
 * the script running for the call at that moment (is_success,
 * is_transient, is_throttling, backoff, on_retry, and the call's
 * is_idempotent and prepare) is stopped within a few milliseconds
 * wherever it is (a loop, the pattern matcher), not at its time_limit: it
 * fails with "FILE:LINE: stopped: the call was cancelled", and
 * luaretry_call_is_idempotent and luaretry_call_prepare return
 * LUARETRY_E_CANCELLED. */
LUARETRY_API void luaretry_call_cancel(luaretry_call *c);
LUARETRY_API int luaretry_call_cancelled(const luaretry_call *c);

/* Blocking call: runs `op` for each attempt, classifies, waits, repeats.
 * `op` fills *out (its buffers must stay valid until op is called again or
 * run returns) and returns LUARETRY_OK, or any other code to give up. */
typedef luaretry_code (*luaretry_operation_fn)(void *ud, luaretry_call *c, int attempt,
                                               double timeout, luaretry_outcome *out);
LUARETRY_API luaretry_code luaretry_call_run(luaretry_call *c, luaretry_operation_fn op, void *ud,
                                             luaretry_decision *final);

/*
 * Hedging (the policy's `hedge = { delay =, max = }`), for a host that can
 * run several attempts of one call at once (an event loop; the curl helper
 * does it on its multi handle).  An attempt that has not answered after
 * the hedge's delay gets company: another attempt of the same request,
 * while the first keeps running; the first acceptable answer wins.
 *
 *   luaretry_call_next(c, &d);                 // d.retry: an attempt may go
 *   luaretry_call_start(c, &id);               // it starts now: attempt id
 *   ... run attempt id with d.next_timeout ...
 *   loop:
 *     wait for an attempt to end, at most luaretry_call_hedge_in(c) s
 *     (< 0: no hedge will be due; wait for the attempts only)
 *     hedge due (luaretry_call_hedge_in(c) == 0):
 *       luaretry_call_hedge(c, &request, &d);
 *       d.retry: start attempt d.attempt now (a hedge, timeout
 *                d.next_timeout), keep the others running
 *       else:    no hedge (d.message says why); the others go on
 *     attempt k ended: luaretry_call_report_attempt(c, k, &outcome, &d);
 *       d.retry == 0, d.reason NONE: k failed transiently while others are
 *                in flight (d.in_flight): wait for them
 *       d.retry == 1: none is in flight any more; retry after d.wait, then
 *                luaretry_call_next and luaretry_call_start again
 *       else:    the call stopped (a success, a final answer, ...): cancel
 *                the d.in_flight attempts still running, never report them
 *
 * Rules: a hedge goes only for an idempotent request (the script's
 * is_idempotent(request), else the method rule: never a POST without it),
 * and is an attempt for every guard (luaretry-policy(5), ONE ATTEMPT,
 * EVERY GUARD): within max_attempts, 1 ms or more before the deadline,
 * with a half-open breaker's permit, a request admission allows, while
 * the retry budget would allow a retry (it takes no token as it goes:
 * failures charge the budget), within hedging's bound (hedge.share of
 * recent calls), with a rate token and a header-pacing slot free now (none
 * now: no hedge, never a wait); each is judged by is_transient like
 * any attempt (info.hedge is true), and every attempt's timeout ends by the
 * deadline.  A refusal, or an attempt that fails while others are in
 * flight, closes hedging until the next luaretry_call_start (a failure is
 * the backoff's to space out, never a reason to send more at once).
 * Hedges are spaced `delay` apart, at most hedge.max of them in flight.
 * With fleet guards a hedge asks the fleet's budget, breaker, admission and
 * fixed rate first.  LUARETRY_CALL_NO_HEDGE turns
 * hedging off for one call.
 * Decisions carry d.hedge and d.in_flight; the policy counts hedges sent,
 * won and cancelled (luaretry_metrics).  Hosts that never call
 * luaretry_call_start report as before: attempts are numbered as reported
 * and nothing is hedged.  luaretry_call_run makes one attempt at a time.
 * spec/c/example_host.c is such a host: one curl multi loop, a timer at
 * luaretry_call_hedge_in() after each start, every transfer reported under
 * its own attempt number, the losers' transfers removed unreported.
 */
LUARETRY_API luaretry_code luaretry_call_start(luaretry_call *c, int *attempt);
/* Seconds until a hedge is due (0: now), or < 0 when none will be. */
LUARETRY_API double luaretry_call_hedge_in(const luaretry_call *c);
/* `request` is the one the attempts send (for is_idempotent).
 * LUARETRY_E_POLICY when is_idempotent failed (luaretry_call_errmsg says
 * why), LUARETRY_E_NOMEM when the call's room for hedges (made at its
 * first, ~260 bytes) cannot be had: no hedge, the attempts go on. */
LUARETRY_API luaretry_code luaretry_call_hedge(luaretry_call *c, const luaretry_request *request,
                                               luaretry_decision *d);
/* luaretry_call_report for attempt number `attempt` (from luaretry_call_start
 * or luaretry_call_hedge); LUARETRY_E_ARG when it is not in flight. */
LUARETRY_API luaretry_code luaretry_call_report_attempt(luaretry_call *c, int attempt,
                                                        const luaretry_outcome *o,
                                                        luaretry_decision *d);

/* Convenience: the schedule a policy gives when every attempt fails
 * transiently (a 503 the script's is_transient still sees: a wait it
 * returns is used, an error it raises ends the schedule), on the virtual
 * clock, with guards of its own.  `attempts` > 0 overrides max_attempts.
 * `each` receives every decision; return nonzero from it to stop early. */
typedef int (*luaretry_decision_fn)(void *ud, const luaretry_decision *d);
LUARETRY_API luaretry_code luaretry_simulate(luaretry_policy *p, uint64_t seed, long attempts,
                                             luaretry_decision_fn each, void *ud);

/* Every simulation stops a call after this many attempts when the policy
 * sets no max_attempts (the deadline alone could allow millions). */
#define LUARETRY_SIMULATE_ATTEMPT_CAP 100000L

#ifdef __cplusplus
}
#endif
#endif
