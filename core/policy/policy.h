/* policy.h: what the policy's files share: policy.c (the public side:
 * loading, reloading, settings), gen.c (a load of the script and the Lua
 * states that run it), load.c (running a script in a new state and
 * reading it), judge.c (the calls into the script), calls.c (a policy's
 * calls), callstore.c (info.call between decisions), errmsg.c (the
 * thread's last failure).  The fields a script
 * may set are in schema.h.
 *
 * Lua states belong to the load, not to calls: a call in flight holds a
 * reference to its load (its rules and judge) and nothing else; each call
 * into the script borrows a free state of that load for its duration. */
#ifndef LUARETRY_POLICY_H
#define LUARETRY_POLICY_H

#include <lua.h>
#include <pthread.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>

#include "engine/engine.h"
#include "luaretry_tool.h"
#include "sandbox/sandbox.h"
#include "schema.h"

#define MAX_OVERRIDES 64
#define RULE_SIZE     1100

struct lr_gen;
struct lr_fleet;
struct lr_fleet_link;

/* The stack slots a state keeps between calls (sandbox.c keeps 1, the
 * handler): what every decision pushes, by lua_pushvalue. */
enum {
  SLOT_INFO = 2,
  SLOT_BODY,
  SLOT_IS_TRANSIENT,
  SLOT_IS_SUCCESS,
  SLOT_EMPTY, /* "": the body of a classifier that names it `_` */
  SLOT_BASE = SLOT_EMPTY
};
/* What a classifier is handed (load.c finds it once, judge.c follows it). */
enum { LR_HOOK_BODY, LR_HOOK_STATUS_ONLY, LR_HOOK_BODY_UNUSED };

/* One Lua state running a load's script, used by one thread at a time. */
typedef struct lr_script {
  /* what every decision reads or writes first, side by side */
  lr_sandbox *sb;
  struct lr_slot *slot;
  struct lr_gen *gen;
  /* the call into the script in progress, read by the C functions Lua calls */
  const luaretry_outcome *cur;
  const lr_attempt_ctx *cur_ctx;
  /* SLOT_BODY's string, as lua_tolstring gives it (NULL: not read yet); the
   * slot holds it, so it neither goes nor moves until judge.c replaces it */
  const char *slot_body;
  size_t slot_body_len;
  int ref_is_transient, ref_is_success, ref_is_throttling, ref_info;
  /* is_success / is_transient declares fewer than 2 parameters (and no
   * ...): it never sees the body, so none is made for it */
  int bodiless_is_success, bodiless_is_transient;
  unsigned generation, headers_generation;
  int call_made;        /* info.call was made in this call */
  const char *cur_body; /* a body to make the Lua string of under protection */
  size_t cur_body_len;
  int ref_on_retry, ref_backoff;
  int ref_is_idempotent, ref_prepare, ref_options, ref_run, ref_headers;
  int ref_on_breaker, ref_call;
  const luaretry_decision *cur_decision;
  const luaretry_request *cur_request;
  /* the call a script call without cur_ctx runs for (is_idempotent), whose
   * cancel stops it (load.c's call_cancelled); NULL: none */
  const luaretry_call *cur_call;
  luaretry_request *cur_out;
  void **cur_prepared; /* where prepare's copy goes */
  int cur_attempt, cur_fn;
  long backoff_n;
  double backoff_previous;
  const char *cur_breaker_state;
  /* "file:line" of each hook: its own file, which a require may make
   * another than the script's */
  char rule_is_transient[RULE_SIZE], rule_is_success[RULE_SIZE], rule_backoff[RULE_SIZE],
    rule_is_idempotent[RULE_SIZE], rule_is_throttling[RULE_SIZE], rule_prepare[RULE_SIZE];
  char errmsg[1024];
} lr_script;

/* A place for one state in a load, taken by one thread at a time. */
typedef struct lr_slot {
  _Alignas(64) atomic_int busy; /* a line each: threads taking slots side by
                                      side do not fight over one */
  lr_script *script;            /* made by its first borrower */
  /* and a spare line: CPUs fetch lines in aligned pairs (the adjacent-line
   * prefetcher), so two busy flags never share a pair, whatever the block's
   * alignment */
  char pair_pad[64];
} lr_slot;

#define SLOTS_PER_BLOCK 16
typedef struct lr_slot_block {
  lr_slot slot[SLOTS_PER_BLOCK];
  _Atomic(struct lr_slot_block *) next;
} lr_slot_block;

/* One load of the script (a reload, or a change of a setting, makes the
 * next): immutable once made, but for its states. */
typedef struct lr_gen {
  /* its calls in flight, +1 while current: striped while current (every
   * call's begin and end, on every thread, change their thread's stripe);
   * what follows is read by every decision, on lines of its own */
  lr_sref refs;
  luaretry_policy *p;
  size_t body_limit;
  int has_decision_hooks; /* is_success or is_transient: a state to judge */
  int retry_all_errors;   /* the field: a final verdict becomes transient */
  lr_judge judge;         /* ud: this load */
  lr_rules rules;
  char *text; /* the script as read, for more states */
  size_t text_len;
  char chunkname[RULE_SIZE];
  char script_path[4096]; /* "" for a string: no folder to require from */
  lr_limits limits;
  lr_override options[MAX_OVERRIDES]; /* options.NAME overrides */
  size_t option_count;
  int has_run, has_on_breaker, has_on_retry, has_prepare;
  struct lr_fleet_link *fleet; /* referenced: rules.remote's fleet, or NULL */
  pthread_mutex_t grow;        /* adding slot blocks */
  lr_slot_block slots;
} lr_gen;

/* The first word of a policy: a handle of another kind (a call) or one
 * freed and reused is refused with LUARETRY_E_ARG, as NULL is. */
#define LR_POLICY_MAGIC 0x6c72706fu /* "lrpo" */
struct luaretry_policy {
  uint32_t magic;
  struct luaretry_policy *prev, *next; /* every policy, for a fork's child (policy.c) */
  pthread_mutex_t writer;              /* one load or change of settings at a time */
  pthread_mutex_t lock;                /* what readers take: the load, the tuning */
  _Atomic(lr_gen *) gen; /* the current load: NULL until then; read without the lock by
                           * lr_policy_current, in a window (grace.c) */
  struct timespec mtime; /* the file's, at its last load */
  long long size;
  double last_check; /* monotonic seconds of the last stat */
  lr_tuning tuning;
  char name[128];
  char source[1024];
  lr_field fields[F_COUNT]; /* as the script set them */
  lr_shared shared;         /* budget, breaker, counters */
  luaretry_breaker_fn breaker_fn;
  void *breaker_ud;
  char *warnings[MAX_WARNINGS]; /* load warnings, then validation's */
  size_t warning_count;
  char *load_warnings[MAX_WARNINGS]; /* unknown names, found at load */
  size_t load_warning_count;
  lr_override overrides[MAX_OVERRIDES];
  size_t override_count;
  lr_limits limits;
  luaretry_classify_fn host_classify;
  void *host_ud;
  lr_log_target log;
  /* the fleet (policy_fleet.c): the host's settings, under the writer lock */
  char *fleet_url;   /* fleet.redis with its credentials; NULL: none */
  char *fleet_local; /* fleet.local: "" the default folder, or a folder; NULL: none */
  long fleet_connect_ms, fleet_command_ms, fleet_reconnect_ms;
  lr_log_target fleet_log; /* luaretry_policy_on_fleet; else `log` */
  /* what luaretry_policy_prepare and _run_workflow returned last */
  void *prepared;
  char *workflow_body;
  size_t memory;            /* bytes of the load's first state */
  int warn_globals;         /* luaretry_policy_warn_undefined_globals */
  char origin[F_COUNT][64]; /* luaretry_policy_origin: "" for the script's own */
  lr_latency latency;       /* recent attempts, for hedge.delay = "pNN" */
};

/* ---- request.c: headers added to *r (attempt_header's, propagate's),
 * over any of the same names; the new header array in *block (freed
 * first), the values copied into it, the names kept as given. */
luaretry_code lr_add_headers(const luaretry_header *add, size_t n_add, luaretry_request *r,
                             void **block);
/* ---- propagate.c: the headers the rules add to attempt `attempt` of c
 * (c NULL: attempt_header's alone), as lr_add_headers. */
luaretry_code lr_add_policy_headers(const lr_rules *r, int attempt, const luaretry_call *c,
                                    luaretry_request *out, void **block);

/* ---- gen.c */

/* A load of `text` (taken over): no state made yet.  NULL: out of memory. */
lr_gen *lr_gen_new(luaretry_policy *p, char *text, size_t len, const char *chunkname,
                   const char *script_path);
void lr_gen_ref(lr_gen *g);
void lr_gen_unref(lr_gen *g);
/* g becomes the policy's current load: its references go by stripe. */
void lr_gen_publish(lr_gen *g);
/* g, current until now, is replaced (or its policy freed): its references
 * are counted as one again, and the policy's is given back. */
void lr_gen_retire(lr_gen *g);
/* Borrowing the hard way: `slot` is taken but has no script yet, or is
 * NULL (the thread's last slot was busy): a free slot is found (the
 * blocks grown if every slot is busy) and its script made if need be.
 * Out of line, so the common case pays for none of its stack. */
lr_script *lr_gen_borrow_slow(lr_gen *g, lr_slot *slot, char *err, size_t errlen);
/* The slot of the first block a thread took last (gen.c). */
extern _Thread_local unsigned lr_slot_hint;

/* A free state of g, made if none is; NULL with err when none can be.
 * The slot this thread had last, in the first block, is nearly always
 * free: one exchange takes it (its script is read once the slot is
 * taken: another thread may be making it).  Inline, on every decision. */
static inline lr_script *lr_gen_borrow(lr_gen *g, char *err, size_t errlen) {
  lr_slot *slot = &g->slots.slot[lr_slot_hint];
  if (atomic_load_explicit(&slot->busy, memory_order_relaxed) ||
      atomic_exchange_explicit(&slot->busy, 1, memory_order_acquire))
    return lr_gen_borrow_slow(g, NULL, err, errlen);
  lr_script *s = slot->script;
  return s ? s : lr_gen_borrow_slow(g, slot, err, errlen);
}
/* Gives s's slot back: one store. */
static inline void lr_gen_return(lr_script *s) {
  atomic_store_explicit(&s->slot->busy, 0, memory_order_release);
}
/* Puts s (made by the load that validated g) in g's first slot. */
void lr_gen_adopt(lr_gen *g, lr_script *s);

/* ---- load.c */

/* What loading a script reads out of it. */
typedef struct {
  lr_gen *gen;
  lr_field fields[F_COUNT];
  int refs[F_COUNT];
  char *warnings[MAX_WARNINGS];
  size_t warning_count;
  char chunk_src[1024]; /* short_src, for messages */
  lr_script *script;    /* the instance being made */
  int syntax_error;
  int io_error;             /* the file opened but cannot be read */
  char origin[F_COUNT][64]; /* the module a field was inherited from, or "" */
  int origins;              /* while loading: the stack index of name -> module */
} lr_load;

/* A new state of g running its script: refs and rules filled in, the
 * fields and warnings it read left in *ld.  NULL with err set. */
lr_script *lr_script_new(lr_gen *g, lr_load *ld, luaretry_code *rc, char *err, size_t errlen);
void lr_script_free(lr_script *s);

/* ---- judge.c */

int lr_info_index(lua_State *L); /* info's __index */
int lr_info_newindex(lua_State *L);
/* The load's judge (ud: the load). */
lr_judge lr_gen_judge(lr_gen *g);
/* The script's on_breaker(state), if it has one; errors go to its log. */
void lr_gen_on_breaker(lr_gen *g, const char *state);
/* The same, its error (file and line) in err instead. */
luaretry_code lr_gen_call_on_breaker(lr_gen *g, const char *state, char *err, size_t errlen);

/* ---- lint.c: what `check` adds to a load */

/* With the policy's warn_undefined_globals on: a trap on the globals of
 * state L (unless the script set a metatable of its own) that adds a
 * warning for each read of an undefined global.  Under protection. */
void lr_lint_trap_globals(lua_State *L, lr_gen *g);
/* Warnings in the line order of script `src`, others after. */
void lr_sort_warnings(char **w, size_t n, const char *src);
/* is_idempotent(request) and prepare(request, attempt, info) in a state of
 * g; prepare's copy of the request goes into *prepared (one malloc'ed
 * block, freed there first).  Errors in err. */
luaretry_code lr_gen_is_idempotent(lr_gen *g, const luaretry_request *r, int *yes,
                                   const lr_attempt_ctx *ctx, char *err, size_t errlen);
luaretry_code lr_gen_prepare(lr_gen *g, const luaretry_request *in, int attempt,
                             luaretry_request *out, void **prepared, const lr_attempt_ctx *ctx,
                             char *err, size_t errlen);

/* ---- callstore.c: info.call, a table kept between a call's decisions */

/* Pushes the call's table (made from ctx->data, or empty). */
void lr_callstore_push(lua_State *L, lr_call_data *data);
/* Keeps the table at idx in data for the next decision; raises on a value
 * that cannot be kept. */
void lr_callstore_save(lua_State *L, int idx, lr_call_data *data);
/* Inside a protected call into the script, after the hook returned: the
 * call's table, if the hook touched it, kept for the call's next one. */
void lr_script_keep_call(lua_State *L, lr_script *s);
/* info.call, made on first use in a call into the script. */
void lr_script_push_call(lua_State *L, lr_script *s);

/* ---- policy.c */

/* The current load, referenced (release it with lr_gen_unref); NULL before
 * a load. */
lr_gen *lr_policy_current(luaretry_policy *p);
/* What fn returns before a load: LUARETRY_E_STATE, errmsg saying so. */
luaretry_code lr_policy_unloaded(luaretry_policy *p, const char *fn);
/* Read as bytes: a foreign handle need not have a policy's alignment. */
static inline int lr_policy_ok(const luaretry_policy *p) {
  uint32_t magic = 0;
  if (p) memcpy(&magic, (const void *)p, sizeof magic);
  return magic == LR_POLICY_MAGIC;
}
lr_shared *lr_policy_shared(luaretry_policy *p);
/* The policy's message, from a function any thread may call (under the
 * writer lock, as loads and sets write it). */
/* The calling thread's buffer for a policy-level failure on p
 * (luaretry_policy_errmsg), LR_ERRMSG_SIZE bytes. */
#define LR_ERRMSG_SIZE 4096
/* ---- errmsg.c: the thread's last failure on a policy */
char *lr_policy_errbuf(const luaretry_policy *p);
/* p is freed: its message is no one's (a new policy may get its address) */
void lr_policy_errbuf_forget(const luaretry_policy *p);
void lr_policy_error(luaretry_policy *p, const char *msg);
/* LUARETRY_E_ARG, the thread's message "FN: ARG is NULL" (else it would
 * name an older failure). */
luaretry_code lr_policy_refuse_null(const luaretry_policy *p, const char *fn, const char *arg);
/* ---- fleet_link.c: the fleet a load uses */

/* The host's defaults for the fleet's settings; what the policy holds of
 * them (luaretry_policy_free). */
void lr_policy_fleet_init(luaretry_policy *p);
void lr_policy_fleet_free(luaretry_policy *p);
/* Whether `url` is a Redis URL the fleet takes (no I/O); if not, why (no
 * credentials in it). */
int lr_fleet_url_ok(const char *url, char *err, size_t errlen);
/* For a new load g with tuning *t of the policy named `name` (under the
 * writer lock, before it is published): the fleet it uses, if
 * fleet.redis or fleet.local is set and there is a guard to share, into g->fleet and
 * g->rules.remote (the current load's link again when nothing but the
 * guard numbers changed); fills t's fleet fields.  0, or -1 with err. */
int lr_policy_fleet_attach(luaretry_policy *p, lr_gen *g, lr_tuning *t, const char *name, char *err,
                           size_t errlen);
/* A load's reference to its link; the last one sends what was counted and
 * not sent yet (one bounded round trip, none while Redis is down) and
 * closes the connection. */
void lr_fleet_link_unref(struct lr_fleet_link *l);
/* The link's store: Redis's handle, or the local store's (the other NULL). */
struct lr_fleet *lr_fleet_link_fleet(struct lr_fleet_link *l);
struct lr_local *lr_fleet_link_local(struct lr_fleet_link *l);
const char *lr_fleet_link_key(struct lr_fleet_link *l); /* the fleet key */
/* Whose counts decide now (LOCAL for no link), and the fleet's tokens and
 * breaker state when they are the fleet's. */
luaretry_guards_scope lr_fleet_link_scope(struct lr_fleet_link *l, double *tokens,
                                          luaretry_breaker_state *breaker);

#endif
