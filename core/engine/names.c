/* names.c: the names of the public enums, each a switch without a default
 * (as curl_easy_strerror), so the compiler points at a value left out. */
#include "engine.h"

const char *luaretry_version(unsigned *num) {
  if (num) *num = LUARETRY_VERSION_NUM;
  return LUARETRY_VERSION;
}

const char *luaretry_strerror(luaretry_code code) {
  switch (code) {
  case LUARETRY_OK: return "no error";
  case LUARETRY_E_NOMEM: return "out of memory";
  case LUARETRY_E_ARG: return "bad argument";
  case LUARETRY_E_IO: return "policy file cannot be read";
  case LUARETRY_E_SYNTAX: return "policy script does not compile";
  case LUARETRY_E_POLICY: return "policy is invalid";
  case LUARETRY_E_LIMIT: return "policy script hit a sandbox limit";
  case LUARETRY_E_STATE: return "call used out of order";
  case LUARETRY_E_CANCELLED: return "cancelled";
  case LUARETRY_E_OPERATION: return "operation gave up";
  case LUARETRY_E_SYSTEM: return "system error";
  case LUARETRY_E_FLEET: return "the fleet's Redis could not be reached or refused";
  }
  return "unknown error code";
}

const char *luaretry_reason_name(luaretry_reason r) {
  switch (r) {
  case LUARETRY_REASON_NONE: return "retry";
  case LUARETRY_REASON_SUCCESS: return "success";
  case LUARETRY_REASON_FINAL: return "final";
  case LUARETRY_REASON_EXHAUSTED: return "exhausted";
  case LUARETRY_REASON_DEADLINE: return "deadline";
  case LUARETRY_REASON_POLICY_ERROR: return "policy_error";
  case LUARETRY_REASON_CANCELLED: return "cancelled";
  case LUARETRY_REASON_BUDGET: return "budget";
  case LUARETRY_REASON_CIRCUIT_OPEN: return "circuit_open";
  case LUARETRY_REASON_GAVE_UP: return "gave_up";
  case LUARETRY_REASON_SERVER_WAIT_TOO_LONG: return "server_wait_too_long";
  case LUARETRY_REASON_ADMISSION: return "admission";
  case LUARETRY_REASON_RATE_LIMIT: return "rate_limit";
  }
  return "unknown";
}

const char *luaretry_wait_source_name(luaretry_wait_source s) {
  switch (s) {
  case LUARETRY_WAIT_NONE: return "none";
  case LUARETRY_WAIT_BACKOFF: return "backoff";
  case LUARETRY_WAIT_SERVER: return "server";
  case LUARETRY_WAIT_SCRIPT: return "script";
  case LUARETRY_WAIT_CLAMPED: return "clamped";
  case LUARETRY_WAIT_THROTTLE: return "throttle";
  case LUARETRY_WAIT_RATE: return "rate";
  }
  return "unknown";
}

const char *luaretry_guards_scope_name(luaretry_guards_scope s) {
  switch (s) {
  case LUARETRY_GUARDS_LOCAL: return "local";
  case LUARETRY_GUARDS_FLEET: return "fleet";
  case LUARETRY_GUARDS_FALLBACK: return "fallback";
  }
  return "unknown";
}

const char *luaretry_breaker_state_name(luaretry_breaker_state state) {
  switch (state) {
  case LUARETRY_BREAKER_CLOSED: return "closed";
  case LUARETRY_BREAKER_OPEN: return "open";
  case LUARETRY_BREAKER_HALF_OPEN: return "half_open";
  }
  return "unknown";
}

const char *luaretry_backoff_kind_name(luaretry_backoff_kind k) {
  switch (k) {
  case LUARETRY_BACKOFF_EXPONENTIAL: return "exponential";
  case LUARETRY_BACKOFF_CONSTANT: return "constant";
  case LUARETRY_BACKOFF_LINEAR: return "linear";
  case LUARETRY_BACKOFF_SCRIPT: return "function";
  }
  return "unknown";
}

const char *luaretry_jitter_name(luaretry_jitter j) {
  switch (j) {
  case LUARETRY_JITTER_NONE: return "none";
  case LUARETRY_JITTER_ADDITIVE: return "additive";
  case LUARETRY_JITTER_FULL: return "full";
  case LUARETRY_JITTER_EQUAL: return "equal";
  case LUARETRY_JITTER_DECORRELATED: return "decorrelated";
  }
  return "unknown";
}
