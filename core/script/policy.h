/* policy.h: what the policy's files share: policy.c (loading and the
 * public side), calls.c (a policy's calls: begin, simulate, requests) and
 * judge.c (the calls into the script on each decision).  The fields a
 * script may set are in schema.h. */
#ifndef LUARETRY_POLICY_H
#define LUARETRY_POLICY_H

#include <lua.h>
#include <pthread.h>
#include <time.h>

#include "engine/engine.h"
#include "sandbox.h"
#include "schema.h"

#define MAX_OVERRIDES 64

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

/* load.c: what loading a script reads out of it. */
typedef struct {
  luaretry_policy *p;
  lr_sandbox *sb;
  const char *text;        /* the script, as read once */
  size_t text_len;
  const char *chunkname;   /* "@path", or the host's name for a string */
  lr_field fields[F_COUNT];
  int refs[F_COUNT];
  char *warnings[MAX_WARNINGS];
  size_t warning_count;
  char chunk_src[1024];    /* short_src, for messages */
  /* "file:line" of each hook: its own file, which a require may make
   * another than the script's */
  char rule_is_transient[1100], rule_is_success[1100], rule_backoff[1100],
      rule_is_idempotent[1100];
  int ref_info, ref_options;
  lr_script *script;        /* the instance being made */
  int syntax_error;
  int io_error;             /* the file opened but cannot be read */
} lr_load;

/* A new Lua state running the script text: its refs and rules filled in,
 * the fields and warnings it read left in *ld.  NULL with err set. */
lr_script *lr_script_new(luaretry_policy *p, lr_load *ld, luaretry_code *rc, char *err,
                         size_t errlen);
void lr_script_free(lr_script *s);

/* policy.c: validates the script's fields plus the overrides; on success
 * installs rules, tuning and warnings into p.  0, or -1 with p->errmsg. */
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

/* policy.c, for calls.c: the policy's judge for one call (a Lua state of
 * its own, given back by the judge's release) and the rules of the same
 * load; its shared guards. */
luaretry_code lr_policy_checkout(luaretry_policy *p, lr_judge *j, lr_rules *r);
lr_shared *lr_policy_shared(luaretry_policy *p);

/* policy.c, for workflow.c: the policy's main state, its run() function
 * (0: none) and its message buffer. */
int lr_policy_loaded(const luaretry_policy *p);
lr_sandbox *lr_policy_sandbox(luaretry_policy *p);
int lr_policy_run_ref(const luaretry_policy *p);
char *lr_policy_errbuf(luaretry_policy *p, size_t *size);

#endif
