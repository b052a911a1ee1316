/* sandbox.h: a Lua 5.4 state with a memory limit, an instruction limit and
 * only the libraries of CONTRACT.md section 6.  Shared by policy.c. */
#ifndef LUARETRY_SANDBOX_H
#define LUARETRY_SANDBOX_H

#include <lua.h>
#include <stddef.h>

#include "luaretry.h"

enum { LR_KILL_NONE = 0, LR_KILL_INSTRUCTIONS, LR_KILL_MEMORY };

typedef struct lr_sandbox {
  lua_State *L;
  size_t used, limit;
  long instruction_limit;   /* per call into the script */
  long remaining;
  int killed;               /* sticky until control is back in C */
  char where[256];          /* "file:line" of the kill, when known */
  char script_dir[4096];    /* "" when loaded from a string */
  luaretry_log_fn log;
  void *log_ud;
  void *owner;              /* the policy, for its C functions */
} lr_sandbox;

/* NULL when out of memory or when the state cannot be set up. */
lr_sandbox *lr_sandbox_new(size_t memory_limit, long instruction_limit,
                           const char *script_path);
void lr_sandbox_free(lr_sandbox *sb);
/* The sandbox a state belongs to (kept in its extra space). */
static inline lr_sandbox *lr_sandbox_of(lua_State *L) {
  return *(lr_sandbox **)lua_getextraspace(L);
}

/*
 * Calls f with the light userdata `arg` as its one argument, under
 * protection and with the instruction budget re-armed; leaves `nresults`
 * results on the stack on success (the caller pops them).
 * Returns LUARETRY_OK, LUARETRY_E_LIMIT (message names the limit and where
 * it was hit), or `failure` with the Lua error message, in err.
 */
luaretry_code lr_sandbox_call(lr_sandbox *sb, lua_CFunction f, void *arg,
                              int nresults, luaretry_code failure, char *err,
                              size_t errlen);

#endif
