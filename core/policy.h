/* policy.h: what the policy's three files share: policy.c (loading and
 * the public side), validate.c (the fields a script may set and their
 * checks) and judge.c (the calls into the script on each decision). */
#ifndef LUARETRY_POLICY_H
#define LUARETRY_POLICY_H

#include <lua.h>
#include <pthread.h>
#include <time.h>

#include "internal.h"
#include "sandbox.h"

#define DEFAULT_MEMORY_LIMIT ((size_t)8 << 20)
#define DEFAULT_INSTRUCTION_LIMIT 5000000L
#define DEFAULT_BODY_LIMIT ((size_t)64 << 10)
#define DEFAULT_MAX_RETRY_AFTER 300.0
#define MAX_WARNINGS 64
#define MAX_OVERRIDES 64

/* ---- the fields a script may set */

enum kind {
  K_STRING, K_COUNT, K_SECONDS, K_SECONDS0, K_BOOL, K_BYTES, K_FUNCTION,
  K_BACKOFF, K_KIND, K_JITTER, K_MULTIPLIER, K_GUARD, K_HOST, K_OPTIONS,
  K_TOKENS
};

enum {
  F_NAME, F_MAX_ATTEMPTS, F_DEADLINE, F_ATTEMPT_TIMEOUT, F_RETRY_AFTER,
  F_MAX_RETRY_AFTER, F_BODY_LIMIT, F_BACKOFF, F_IS_TRANSIENT, F_IS_SUCCESS,
  F_IS_IDEMPOTENT, F_PREPARE, F_ON_RETRY, F_RUN, F_BUDGET, F_BREAKER, F_OPTIONS,
  F_ON_BREAKER,
  F_INSTRUCTION_LIMIT, F_MEMORY_LIMIT,
  F_B_KIND, F_B_INITIAL, F_B_MULTIPLIER, F_B_MAX, F_B_STEP, F_B_JITTER,
  F_B_JITTER_MAX, F_B_CAP_JITTER,
  F_G_MAX_TOKENS, F_G_TOKEN_RATIO,
  F_K_FAILURES, F_K_OPEN_SECONDS, F_K_PROBES,
  F_COUNT
};
/* Fields from here on are those of a table field: "backoff.kind" ... */
#define F_FIRST_SUB F_B_KIND
#define F_FIRST_BACKOFF F_B_KIND
#define F_LAST_BACKOFF F_B_CAP_JITTER

typedef struct { const char *name; enum kind kind; } lr_field_spec;
extern const lr_field_spec lr_fields[F_COUNT];

/* What the script (or an override) said of a field, before validation. */
typedef struct {
  int type;          /* a LUA_T* constant; LUA_TNIL when unset */
  double num;
  int boolean;
  char str[64];
  int line;          /* 0 when unknown */
  int from_set;      /* came from luaretry_policy_set */
} lr_field;

typedef struct { char name[48]; char value[64]; } lr_override;

/* One Lua state running the script: what a call needs to consult it.  A
 * policy keeps a pool of them; each call checks one out at begin and gives
 * it back at free, so the decisions of different threads never share a
 * state and never take a lock. */
typedef struct lr_script {
  luaretry_policy *p;
  lr_sandbox *sb;
  unsigned epoch;                  /* the policy's load it belongs to */
  struct lr_script *next_free;
  size_t body_limit;
  int ref_is_transient, ref_is_success, ref_on_retry, ref_backoff, ref_info;
  int ref_is_idempotent, ref_prepare, ref_options, ref_run, ref_headers;
  int ref_on_breaker;
  /* "file:line" of each hook: its own file, which a require may make
   * another than the script's */
  char rule_is_transient[1100], rule_is_success[1100], rule_backoff[1100],
      rule_is_idempotent[1100];
  /* the decision or request in progress, read by the C functions Lua calls */
  const luaretry_outcome *cur;
  const lr_attempt_ctx *cur_ctx;
  const luaretry_decision *cur_decision;
  const luaretry_request *cur_request;
  int cur_attempt, cur_fn;
  unsigned generation, headers_generation;
  long backoff_n;
  double backoff_previous;
  const char *cur_option_name, *cur_option_value;
  const char *cur_breaker_state;
  /* prepare()'s request, copied out of Lua */
  char *prep_method, *prep_url, *prep_body;
  size_t prep_body_len, prep_header_count;
  luaretry_header *prep_headers;
  char hook_error[512];
  char errmsg[1024];
} lr_script;

struct luaretry_policy {
  lr_script *main;                 /* the loaded script: NULL until then */
  pthread_mutex_t pool_lock;       /* the pool, rules and tuning */
  lr_script *free_scripts;
  unsigned epoch;                  /* bumped by each load */
  char *text;                      /* the script as loaded, for more states */
  size_t text_len;
  char chunkname[1100];
  char script_path[4096];          /* "" for a string: no folder to require from */
  struct timespec mtime;           /* the file's, at its last load */
  long long size;
  double last_check;               /* monotonic seconds of the last stat */
  lr_rules rules;
  luaretry_tuning tuning;
  char name[128];
  char source[1024];
  lr_field fields[F_COUNT];        /* as the script set them */
  lr_shared shared;                /* budget, breaker, counters */
  luaretry_breaker_fn breaker_fn;
  void *breaker_ud;
  char *warnings[MAX_WARNINGS];     /* load warnings, then validation's */
  size_t warning_count;
  char *load_warnings[MAX_WARNINGS]; /* unknown names, found at load */
  size_t load_warning_count;
  lr_override overrides[MAX_OVERRIDES];
  size_t override_count;
  long instruction_limit;
  size_t memory_limit;
  luaretry_classify_fn host_classify;
  void *host_ud;
  luaretry_log_fn log;
  void *log_ud;
  char errmsg[4096];
};

/* validate.c */
void lr_add_warning(char **list, size_t *count, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void lr_free_warnings(char **list, size_t *count);
const char *lr_closest_field(const char *name, const char *prefix);
int lr_field_index(const char *name);
/* Validates the script's fields plus overrides; on success installs rules,
 * tuning and warnings into p.  0, or -1 with p->errmsg set. */
int lr_compose(luaretry_policy *p, const lr_field *script_fields, const char *chunk,
               char **load_warnings, size_t load_count);

/* policy.c: check a script out of the pool (a new one when none is free)
 * and back in; NULL with p->errmsg when none can be made. */
lr_script *lr_script_acquire(luaretry_policy *p);
void lr_script_release(luaretry_policy *p, lr_script *s);

/* judge.c */
int lr_info_index(lua_State *L);   /* info's __index */
/* The script's on_breaker(state), if it has one; errors go to its log. */
void lr_script_on_breaker(lr_script *s, const char *state);
void lr_free_prepared(lr_script *s);
lr_judge lr_script_judge(lr_script *s);
luaretry_code lr_script_is_idempotent(lr_script *s, const luaretry_request *r,
                                      int *idempotent);
luaretry_code lr_script_prepare(lr_script *s, const luaretry_request *in, int attempt,
                                luaretry_request *out);

#endif
