/* schema.h: the fields a policy script may set, declared once.  One row
 * (below) gives a field its name, type, range, default, place in
 * luaretry_tuning and documentation; validation, overrides
 * (luaretry_policy_set, --set), luaretry_policy_get, the effective tuning,
 * `luaretry check` and luaretry_field_at() all read the same row.  Adding
 * a field is one row plus its use. */
#ifndef LUARETRY_SCHEMA_H
#define LUARETRY_SCHEMA_H

#include <math.h>
#include <stddef.h>

#include "engine/engine.h"

typedef enum {
  T_STRING,
  T_COUNT,   /* a whole number in [lo, hi]: long */
  T_BYTES,   /* a whole number of bytes in [lo, hi]: size_t */
  T_SECONDS, /* a finite number of seconds: double */
  T_NUMBER,  /* a finite number: double */
  T_BOOL,    /* int */
  T_KIND,    /* luaretry_backoff_kind, by name */
  T_JITTER,  /* luaretry_jitter, by name */
  T_FUNCTION,
  T_TABLE,   /* a table: its fields are the rows named "table.field" */
  T_BACKOFF, /* a table (backoff.*) or a function backoff(n, previous) */
  T_DELAY    /* seconds above lo, or a latency percentile "pNN": hedge.delay */
} lr_type;

/* Row flags */
#define OPT  0x1u /* may be unset ("none"): 0 in the tuning means none */
#define OPEN 0x2u /* lo itself is out of range */
#define HOST 0x4u /* a sandbox limit: the host sets it, never the script */

#define NODEF        NAN /* no default: unset, or one computed from other fields */
#define TUNE(member) offsetof(lr_tuning, pub.member)
#define MORE(member) offsetof(lr_tuning, member) /* not in the public struct */
#define NOTUNE       ((size_t)-1)

/* propagate's headers when the policy names none (and what
 * luaretry_call_options_inbound reads then) */
#define LR_PROPAGATE_DEADLINE "Luaretry-Deadline-Ms"
#define LR_PROPAGATE_RETRIES  "Luaretry-Retries"

#define FLEET_KEY_SIZE  64
#define FLEET_URL_SHOWN 300

/* The effective tuning: the public part (luaretry_tuning), then settings
 * the public struct has no room for; luaretry_policy_get reads both. */
typedef struct {
  luaretry_tuning pub;
  char name[64];                     /* the script's or --set's; "": the file's name */
  char fleet_key[FLEET_KEY_SIZE];    /* "": the policy's name */
  long fleet_sync;                   /* ms */
  char fleet_redis[FLEET_URL_SHOWN]; /* redacted; "": none (host) */
  char fleet_local[FLEET_URL_SHOWN]; /* "on", or the folder; "": none (host) */
  long fleet_connect_timeout, fleet_command_timeout, fleet_reconnect; /* ms (host) */
  /* hedge: another attempt of an idempotent request while one is slow */
  long hedge_max;                    /* extra attempts in flight; 0: no hedge */
  double hedge_delay;                /* seconds, or 0 with a percentile */
  double hedge_percentile;           /* "p95": 95; 0: a fixed delay */
  double hedge_floor, hedge_ceiling; /* a percentile's bounds, seconds */
  double hedge_share;                /* at most this share of recent calls hedge */
  /* throttling (is_throttling): its own backoff and budget cost */
  double throttle_initial, throttle_multiplier, throttle_max, throttle_jitter_max;
  luaretry_jitter throttle_jitter;
  int throttle_cap_jitter;
  double throttle_cost;
  double budget_reserve;   /* retries per second whatever the tokens */
  char attempt_header[64]; /* "": none */
  /* the breaker's rate rules */
  double failure_rate, slow_seconds, slow_rate;
  long window, min_calls;
  /* admission control (client-side throttling) and the rate limiter */
  int admission, rate, rate_adaptive, rate_headers;
  double admission_k, admission_window, rate_limit;
  long rate_burst;
  /* propagate: the time left and the retries allowed, to the next service */
  int propagate;
  char propagate_deadline[64], propagate_retries[64]; /* "": not sent */
  int retry_all_errors;                               /* a final verdict is retried (judge.c) */
} lr_tuning;

/* X(ID, name, type, lo, hi, flags, default, tuning member, doc) */
#define LR_FIELDS(X)                                                                               \
  X(NAME, "name", T_STRING, 0, 0, 0, NODEF, MORE(name),                                            \
    "the policy's name in logs and metrics (default: the file's name)")                            \
  X(MAX_ATTEMPTS, "max_attempts", T_COUNT, 1, 1e9, OPT, NODEF, TUNE(max_attempts),                 \
    "attempts in all, the first included")                                                         \
  X(DEADLINE, "deadline", T_SECONDS, 0.001, INFINITY, OPT | OPEN, NODEF, TUNE(deadline),           \
    "seconds for the whole call, waits included")                                                  \
  X(ATTEMPT_TIMEOUT, "attempt_timeout", T_SECONDS, 0, INFINITY, OPT | OPEN, NODEF,                 \
    TUNE(attempt_timeout), "seconds for one attempt, clipped to what is left of deadline")         \
  X(CONNECT_TIMEOUT, "connect_timeout", T_SECONDS, 0, INFINITY, OPT | OPEN, NODEF,                 \
    TUNE(connect_timeout), "seconds to connect, within the attempt's timeout (HTTP)")              \
  X(STALL_TIMEOUT, "stall_timeout", T_SECONDS, 0, INFINITY, OPT | OPEN, NODEF,                     \
    TUNE(stall_timeout),                                                                           \
    "an attempt slower than stall_speed for this long fails as stalled (HTTP)")                    \
  X(STALL_SPEED, "stall_speed", T_COUNT, 1, 1e12, 0, 1, TUNE(stall_speed),                         \
    "bytes per second below which an attempt is stalling (HTTP)")                                  \
  X(RETRY_AFTER, "retry_after", T_BOOL, 0, 1, 0, 1, TUNE(retry_after),                             \
    "wait at least what a Retry-After header asks")                                                \
  X(MAX_RETRY_AFTER, "max_retry_after", T_SECONDS, 0, INFINITY, 0, 300, TUNE(max_retry_after),     \
    "a longer Retry-After stops the call at once")                                                 \
  X(BODY_LIMIT, "body_limit", T_BYTES, 0, 1073741824, 0, 65536, TUNE(body_limit),                  \
    "bytes of a body handed to the script")                                                        \
  X(BACKOFF, "backoff", T_BACKOFF, 0, 0, 0, NODEF, NOTUNE,                                         \
    "the wait before each retry: a table, or a function backoff(n, previous)")                     \
  X(IS_TRANSIENT, "is_transient", T_FUNCTION, 0, 0, 0, NODEF, NOTUNE,                              \
    "is_transient(status, body, info): true, false or seconds to wait")                            \
  X(IS_SUCCESS, "is_success", T_FUNCTION, 0, 0, 0, NODEF, NOTUNE,                                  \
    "is_success(status, body, info) (default: 200 to 399, exit status 0)")                         \
  X(IS_IDEMPOTENT, "is_idempotent", T_FUNCTION, 0, 0, 0, NODEF, NOTUNE,                            \
    "is_idempotent(request): may this request be sent again?")                                     \
  X(PREPARE, "prepare", T_FUNCTION, 0, 0, 0, NODEF, NOTUNE,                                        \
    "prepare(request, attempt): change the request before each attempt")                           \
  X(ON_RETRY, "on_retry", T_FUNCTION, 0, 0, 0, NODEF, NOTUNE,                                      \
    "on_retry(info): told before each wait")                                                       \
  X(RUN, "run", T_FUNCTION, 0, 0, 0, NODEF, NOTUNE,                                                \
    "run(http, args): a workflow retried as a whole")                                              \
  X(BUDGET, "budget", T_TABLE, 0, 0, 0, NODEF, NOTUNE,                                             \
    "retry throttling shared by the policy's calls (gRPC style)")                                  \
  X(BREAKER, "breaker", T_TABLE, 0, 0, 0, NODEF, NOTUNE,                                           \
    "a circuit breaker shared by the policy's calls")                                              \
  X(OPTIONS, "options", T_TABLE, 0, 0, 0, NODEF, NOTUNE,                                           \
    "the script's own settings, overridden by options.NAME")                                       \
  X(ON_BREAKER, "on_breaker", T_FUNCTION, 0, 0, 0, NODEF, NOTUNE,                                  \
    "on_breaker(state): told of each change of the breaker")                                       \
  X(INSTRUCTION_LIMIT, "instruction_limit", T_COUNT, 1000, 1e15, HOST | OPT, NODEF,                \
    TUNE(instruction_limit), "exact instructions per call into the script (none: not counted)")    \
  X(TIME_LIMIT, "time_limit", T_SECONDS, 0, 3600, HOST | OPEN, 0.25, TUNE(time_limit),             \
    "wall-clock seconds per call into the script")                                                 \
  X(MEMORY_LIMIT, "memory_limit", T_BYTES, 65536, 1e15, HOST, 8388608, TUNE(memory_limit),         \
    "bytes of Lua memory per Lua state of the policy")                                             \
  X(B_KIND, "backoff.kind", T_KIND, 0, 0, 0, LUARETRY_BACKOFF_EXPONENTIAL, TUNE(kind),             \
    "how the raw delay grows: exponential, constant or linear")                                    \
  X(B_INITIAL, "backoff.initial", T_SECONDS, 0, INFINITY, 0, 1, TUNE(initial),                     \
    "the first raw delay, seconds")                                                                \
  X(B_MULTIPLIER, "backoff.multiplier", T_NUMBER, 0, INFINITY, 0, 2, TUNE(multiplier),             \
    "exponential growth per retry (below 1 is clamped to 1)")                                      \
  X(B_MAX, "backoff.max", T_SECONDS, 0, INFINITY, OPEN, NODEF, TUNE(max),                          \
    "the cap, seconds (default 32, or initial when larger)")                                       \
  X(B_STEP, "backoff.step", T_SECONDS, 0, INFINITY, 0, NODEF, TUNE(step),                          \
    "linear growth per retry, seconds (default: initial)")                                         \
  X(B_JITTER, "backoff.jitter", T_JITTER, 0, 0, 0, LUARETRY_JITTER_ADDITIVE, TUNE(jitter),         \
    "none, additive, full, equal or decorrelated")                                                 \
  X(B_JITTER_MAX, "backoff.jitter_max", T_SECONDS, 0, INFINITY, 0, 1, TUNE(jitter_max),            \
    "additive jitter's range, and the spread over a Retry-After, seconds")                         \
  X(B_CAP_JITTER, "backoff.cap_jitter", T_BOOL, 0, 1, 0, 0, TUNE(cap_jitter),                      \
    "true: min(d + r, max), to the letter; false: min(d, max) + r")                                \
  X(G_MAX_TOKENS, "budget.max_tokens", T_NUMBER, 0, 1000, OPEN, 10, TUNE(max_tokens),              \
    "tokens when full; retries only while more than half are left")                                \
  X(G_TOKEN_RATIO, "budget.token_ratio", T_NUMBER, 0, 1000, OPEN, 0.1, TUNE(token_ratio),          \
    "tokens a success gives back (a failure takes 1)")                                             \
  X(G_THROTTLE_COST, "budget.throttle_cost", T_NUMBER, 0, 1000, 0, 0.357, MORE(throttle_cost),     \
    "tokens a throttling outcome takes (AWS's 5 for 14: 0.357 of a failure's 1)")                  \
  X(G_RESERVE, "budget.reserve", T_NUMBER, 0, 1000, 0, 0, MORE(budget_reserve),                    \
    "retries per second allowed whatever the tokens, 50 s of them at once (Finagle's floor)")      \
  X(K_FAILURES, "breaker.failures", T_COUNT, 1, 1e9, 0, 5, TUNE(failures),                         \
    "transient outcomes in a row that open the circuit")                                           \
  X(K_OPEN_SECONDS, "breaker.open_seconds", T_SECONDS, 0, INFINITY, OPEN, 30, TUNE(open_seconds),  \
    "seconds the circuit stays open")                                                              \
  X(K_PROBES, "breaker.probes", T_COUNT, 1, 1e9, 0, 1, TUNE(probes),                               \
    "calls let through when half-open")                                                            \
  X(IS_THROTTLING, "is_throttling", T_FUNCTION, 0, 0, 0, NODEF, NOTUNE,                            \
    "is_throttling(status, body, info): is this transient outcome the service throttling?")        \
  X(THROTTLE_BACKOFF, "throttle_backoff", T_TABLE, 0, 0, 0, NODEF, NOTUNE,                         \
    "the wait before a retry after throttling (default: AWS's 1 s doubling to 20 s, full jitter)") \
  X(TB_INITIAL, "throttle_backoff.initial", T_SECONDS, 0, INFINITY, 0, 1, MORE(throttle_initial),  \
    "the first raw delay after throttling, seconds")                                               \
  X(TB_MULTIPLIER, "throttle_backoff.multiplier", T_NUMBER, 1, INFINITY, 0, 2,                     \
    MORE(throttle_multiplier), "growth per retry after throttling")                                \
  X(TB_MAX, "throttle_backoff.max", T_SECONDS, 0, INFINITY, OPEN, 20, MORE(throttle_max),          \
    "the cap after throttling, seconds")                                                           \
  X(TB_JITTER, "throttle_backoff.jitter", T_JITTER, 0, 0, 0, LUARETRY_JITTER_FULL,                 \
    MORE(throttle_jitter), "none, additive, full, equal or decorrelated")                          \
  X(TB_JITTER_MAX, "throttle_backoff.jitter_max", T_SECONDS, 0, INFINITY, 0, 1,                    \
    MORE(throttle_jitter_max), "additive jitter's range after throttling, seconds")                \
  X(TB_CAP_JITTER, "throttle_backoff.cap_jitter", T_BOOL, 0, 1, 0, 0, MORE(throttle_cap_jitter),   \
    "true: min(d + r, max); false: min(d, max) + r")                                               \
  X(ATTEMPT_HEADER, "attempt_header", T_STRING, 0, 0, 0, NODEF, MORE(attempt_header),              \
    "a header sent with every attempt, its value the attempt number (1, 2, ...)")                  \
  X(K_FAILURE_RATE, "breaker.failure_rate", T_NUMBER, 0, 1, OPEN | OPT, NODEF, MORE(failure_rate), \
    "the share of failures over the window that opens the circuit")                                \
  X(K_SLOW_CALL, "breaker.slow_call", T_TABLE, 0, 0, 0, NODEF, NOTUNE,                             \
    "attempts lasting `seconds` or more are slow; a share `rate` of them opens the circuit")       \
  X(K_SLOW_SECONDS, "breaker.slow_call.seconds", T_SECONDS, 0, INFINITY, OPEN | OPT, NODEF,        \
    MORE(slow_seconds), "an attempt this long or longer is slow")                                  \
  X(K_SLOW_RATE, "breaker.slow_call.rate", T_NUMBER, 0, 1, OPEN, 1, MORE(slow_rate),               \
    "the share of slow attempts over the window that opens the circuit")                           \
  X(K_WINDOW, "breaker.window", T_COUNT, 1, LR_WINDOW_MAX, 0, 100, MORE(window),                   \
    "outcomes the rates are taken over (the last N)")                                              \
  X(K_MIN_CALLS, "breaker.min_calls", T_COUNT, 1, LR_WINDOW_MAX, 0, NODEF, MORE(min_calls),        \
    "outcomes the window must hold before a rate can open the circuit (default: window)")          \
  X(ADMISSION, "admission", T_TABLE, 0, 0, 0, NODEF, NOTUNE,                                       \
    "client-side throttling (the SRE book's; Envoy's admission control), first attempts "          \
    "included: { k = 2, window = 120 }")                                                           \
  X(A_K, "admission.k", T_NUMBER, 1, 1000, OPEN, 2, MORE(admission_k),                             \
    "refuse locally with probability (requests - k * accepts) / (requests + 1)")                   \
  X(A_WINDOW, "admission.window", T_SECONDS, 0, 86400, OPEN, 120, MORE(admission_window),          \
    "seconds of requests and accepts admission control counts")                                    \
  X(RATE, "rate", T_TABLE, 0, 0, 0, NODEF, NOTUNE,                                                 \
    "a token bucket before every attempt: { limit = PER_SECOND, burst = N } or { adaptive = true " \
    "}")                                                                                           \
  X(R_LIMIT, "rate.limit", T_NUMBER, 0, 1e9, OPEN | OPT, NODEF, MORE(rate_limit),                  \
    "attempts per second (adaptive: the most it may reach)")                                       \
  X(R_BURST, "rate.burst", T_COUNT, 1, 1e9, 0, 1, MORE(rate_burst),                                \
    "attempts that may go at once when tokens have gathered")                                      \
  X(R_ADAPTIVE, "rate.adaptive", T_BOOL, 0, 1, 0, 0, MORE(rate_adaptive),                          \
    "follow throttling answers (AIMD: x0.9 past 5% throttled, +1/s per second of successes)")      \
  X(R_HEADERS, "rate.headers", T_BOOL, 0, 1, 0, 0, MORE(rate_headers),                             \
    "pace by the server's RateLimit fields: at most r attempts in the next t seconds")             \
  X(FLEET, "fleet", T_TABLE, 0, 0, 0, NODEF, NOTUNE,                                               \
    "budget and breaker shared through Redis by every process naming it (fleet.redis)")            \
  X(FL_KEY, "fleet.key", T_STRING, 0, 0, 0, NODEF, MORE(fleet_key),                                \
    "the fleet's key in Redis (default: the policy's name)")                                       \
  X(FL_SYNC, "fleet.sync", T_COUNT, 1, 60000, 0, 200, MORE(fleet_sync),                            \
    "milliseconds: the longest a success's count waits before it goes to Redis")                   \
  X(FL_REDIS, "fleet.redis", T_STRING, 0, 0, HOST | OPT, NODEF, MORE(fleet_redis),                 \
    "redis://[user:password@]host[:port][/db], unix:///path or redis-sentinel://"                  \
    "[user:password@]host:port[,host:port]...[/db]#master: share the guards")                      \
  X(FL_LOCAL, "fleet.local", T_STRING, 0, 0, HOST | OPT, NODEF, MORE(fleet_local),                 \
    "on, or a folder: share the guards with this user's processes here, no server")                \
  X(FL_CONNECT, "fleet.connect_timeout", T_COUNT, 1, 60000, HOST, 250,                             \
    MORE(fleet_connect_timeout), "milliseconds to connect to Redis (and say hello)")               \
  X(FL_COMMAND, "fleet.command_timeout", T_COUNT, 1, 60000, HOST, 100,                             \
    MORE(fleet_command_timeout), "milliseconds for one round trip to Redis")                       \
  X(FL_RECONNECT, "fleet.reconnect", T_COUNT, 1, 3600000, HOST, 30000, MORE(fleet_reconnect),      \
    "the longest wait before reconnecting to Redis, milliseconds")                                 \
  X(HEDGE, "hedge", T_TABLE, 0, 0, 0, NODEF, NOTUNE,                                               \
    "another attempt of an idempotent request when one has not answered after delay")              \
  X(H_DELAY, "hedge.delay", T_DELAY, 0, INFINITY, OPEN, NODEF, MORE(hedge_delay),                  \
    "seconds without an answer before a hedge, or \"p95\": the policy's recent latency")           \
  X(H_MAX, "hedge.max", T_COUNT, 1, 10, 0, 1, MORE(hedge_max),                                     \
    "hedges in flight at once, beside the attempt they hedge")                                     \
  X(H_FLOOR, "hedge.floor", T_SECONDS, 0, INFINITY, OPEN, 0.01, MORE(hedge_floor),                 \
    "the shortest delay a percentile gives, seconds")                                              \
  X(H_CEILING, "hedge.ceiling", T_SECONDS, 0, INFINITY, OPEN, NODEF, MORE(hedge_ceiling),          \
    "the longest delay a percentile gives (and before it is learned), seconds (default 1)")        \
  X(H_SHARE, "hedge.share", T_NUMBER, 0, 1, OPEN, 0.1, MORE(hedge_share),                          \
    "at most this share of recent calls hedge, beside a reserve of 10 (1: no bound)")              \
  X(PROPAGATE, "propagate", T_TABLE, 0, 0, 0, NODEF, NOTUNE,                                       \
    "send the next service the time left and the retries it may make: { deadline =, retries = }")  \
  X(P_DEADLINE, "propagate.deadline", T_STRING, 0, 0, 0, NODEF, MORE(propagate_deadline),          \
    "the header of the milliseconds an attempt is waited for (Luaretry-Deadline-Ms; \"\": none)")  \
  X(P_RETRIES, "propagate.retries", T_STRING, 0, 0, 0, NODEF, MORE(propagate_retries),             \
    "the header of the retries the next service may make (Luaretry-Retries; \"\": none)")          \
  X(RETRY_ALL_ERRORS, "retry_all_errors", T_BOOL, 0, 1, 0, 0, MORE(retry_all_errors),              \
    "curl's --retry-all-errors: what the policy judges final is retried (but too_large)")

#define LR_FIELD_ID(id, ...) F_##id,
enum { LR_FIELDS(LR_FIELD_ID) F_COUNT };
#undef LR_FIELD_ID

typedef struct {
  const char *name;
  lr_type type;
  double lo, hi;
  unsigned flags;
  double def;
  size_t tuning; /* offset in luaretry_tuning, or NOTUNE */
  const char *doc;
} lr_field_spec;

extern const lr_field_spec lr_fields[F_COUNT];

/* What the script (or an override) said of a field, before validation. */
typedef struct {
  int type; /* a LUA_T* constant; LUA_TNIL when unset */
  double num;
  int boolean;
  char str[64];
  size_t len;   /* the string's whole length (str holds at most 63 bytes) */
  int nul;      /* the string held a NUL byte (str stops there) */
  int line;     /* 0 when unknown */
  int from_set; /* came from luaretry_policy_set */
  int unnamed;  /* a table of fields: the type of a key that is no name
                   ({0.1, 2}: LUA_TNUMBER); LUA_TNIL when there is none */
} lr_field;

/* NAME=VALUE from luaretry_policy_set; the value's copy is owned by its
 * holder (the policy's list, or a load's options). */
typedef struct {
  char name[48];
  char *value;
} lr_override;
/* The longest value luaretry_policy_set takes: a pattern or a URL fits. */
#define LR_OVERRIDE_VALUE_MAX 4096

#define MAX_WARNINGS 64

/* Whether name[0..len) is an HTTP field name, RFC 9110's token: one or
 * more letters, digits and !#$%&'*+-.^_`|~.  The one rule for a header
 * name a policy gives: attempt_header, propagate's, prepare's. */
int lr_header_name_ok(const char *name, size_t len);
#define LR_HEADER_NAME_RULE "letters, digits and !#$%&'*+-.^_`|~"

/* The field index of "name" or "backoff.initial"; -1 when unknown. */
int lr_field_index(const char *name);
/* A name renamed before 1.0 ("throttle", "breaker.half_open_calls"): the
 * index of the field it is now, read in its place with a warning; -1
 * when `name` was never renamed. */
int lr_field_renamed(const char *name);
/* "NAME: renamed NEW (the old name is read until 1.0)" into buf. */
void lr_renamed_note(char *buf, size_t size, const char *name);
/* The guards a --set NAME=none turns off: budget, breaker, admission,
 * rate, hedge. */
int lr_field_guard(int i);
/* Whether `name` is a field of the table field `parent` (F_BACKOFF ...). */
int lr_field_in(int i, int parent);
/* The known name closest to `name` within `prefix` ("" or "backoff."). */
const char *lr_closest_field(const char *name, const char *prefix);
/* "NAME: unknown name, did you mean NEAR?" into buf. */
void lr_unknown_field(char *buf, size_t size, const char *name);

void lr_add_warning(char **list, size_t *count, const char *fmt, ...)
  __attribute__((format(printf, 3, 4)));
void lr_free_warnings(char **list, size_t *count);

/* Validates the script's fields with the overrides over them.  0 with
 * *t, *r and the warnings (appended to `warnings`) filled; -1 with every
 * problem in errors (the warnings too: a typo is often the cause). */
int lr_schema_apply(const lr_field *script_fields, const lr_override *overrides,
                    size_t override_count, const char *chunk, lr_tuning *t, lr_rules *r,
                    char **warnings, size_t *warning_count, char *errors, size_t errors_size);

/* The value of field i in *t, as luaretry_policy_set() spells it. */
void lr_schema_format(const lr_tuning *t, int i, char *buf, size_t size);

/* f holds the string s[0..len) as a script's value: a string longer
 * than f->str holds is kept as its head, '~' and a 64-bit FNV-1a of the
 * whole in hex (two long names that differ past the cut stay apart); its
 * length and whether it held a NUL are noted.  The one copy for a script's
 * value and an override's: `--set name=...` names a policy as the script
 * would. */
void lr_field_set_string(lr_field *f, const char *s, size_t len);

/* Whether s is a number as a policy file writes one, in decimal: an
 * optional '-', digits with an optional fraction ("3", "0.5", ".5",
 * "5."), an optional exponent ("1e-3", "1e+300"); nothing else (no
 * spaces, '+', hex, inf or nan).  The one rule for every number a host
 * sets (luaretry_policy_set, --set, options.NAME); 1 with *out its value. */
int lr_decimal(const char *s, double *out);
/* " (a decimal number as a policy file writes it...)" when strtod would
 * have read s (" 3", "+3", "0x3", "inf"): the rule is then the news of
 * an error; else "". */
const char *lr_decimal_note(const char *s);

/* Parses a host setting's number (instruction_limit, memory_limit,
 * fleet.connect_timeout...) within its row's range; 0, or -1 with the
 * reason in err. */
int lr_schema_limit(int i, const char *value, double *out, char *err, size_t errlen);

#endif
