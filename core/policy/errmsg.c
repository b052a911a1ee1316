/* errmsg.c: a policy-level failure's message.  Its own file: every
 * part of the policy side says its failures here, and none of them need
 * another for it (no loop between the files). */
#include "policy.h"

/* The failing thread's own: one buffer per thread, holding the message of
 * its last failure and the policy it was on.  Two threads failing at once
 * on one policy each read their own, whole; no lock, nothing another
 * thread writes. */
static _Thread_local struct {
  const luaretry_policy *owner;
  char msg[LR_ERRMSG_SIZE];
} thread_error;

char *lr_policy_errbuf(const luaretry_policy *p) {
  if (thread_error.owner != p) {
    thread_error.owner = p;
    thread_error.msg[0] = '\0';
  }
  return thread_error.msg;
}

void lr_policy_errbuf_forget(const luaretry_policy *p) {
  if (thread_error.owner == p) thread_error.owner = NULL;
}

const char *luaretry_policy_errmsg(const luaretry_policy *p) {
  if (!lr_policy_ok(p)) return "no policy";
  return thread_error.owner == p ? thread_error.msg : "";
}

luaretry_code lr_policy_unloaded(luaretry_policy *p, const char *fn) {
  lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE,
         "%s: no policy loaded (luaretry_policy_load_file or _load_string first)", fn);
  return LUARETRY_E_STATE;
}

void lr_policy_error(luaretry_policy *p, const char *msg) {
  lr_strlcpy(lr_policy_errbuf(p), msg, LR_ERRMSG_SIZE);
}

luaretry_code lr_policy_refuse_null(const luaretry_policy *p, const char *fn, const char *arg) {
  lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "%s: %s is NULL", fn, arg);
  return LUARETRY_E_ARG;
}
