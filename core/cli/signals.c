/* signals.c: exit statuses, and SIGINT and SIGTERM as a cancel.
 *
 * A stop signal cancels the call (or batch) in progress through the public
 * cancel functions, which are safe in a signal handler; the call then ends
 * with its reason "cancelled" and the command exits 130. */
#include <signal.h>
#include <string.h>

#include "cli.h"
#include "run.h"

static luaretry_call *volatile running_call;
static luaretry_curl_many *volatile running_many;
/* Covers a signal that arrives before the call exists. */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
  (void)sig;
  interrupted = 1;
  luaretry_call *c = running_call;
  if (c) luaretry_call_cancel(c);
  luaretry_curl_many *m = running_many;
  if (m) luaretry_curl_many_cancel(m);
}

void cli_on_stop_signals(void (*handler)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);  /* a closed pipe is a write error, not a death */
}

void cli_cancel_on_signal(luaretry_call *call, luaretry_curl_many *many) {
  if (call || many) cli_on_stop_signals(on_signal);
  running_call = call;
  running_many = many;
  if (interrupted && call) luaretry_call_cancel(call);
  if (interrupted && many) luaretry_curl_many_cancel(many);
}

int cli_exit_status(luaretry_reason r) {
  switch (r) {
  case LUARETRY_REASON_SUCCESS: return EXIT_OK;
  case LUARETRY_REASON_FINAL: return EXIT_FINAL;
  case LUARETRY_REASON_EXHAUSTED: return EXIT_EXHAUSTED;
  case LUARETRY_REASON_DEADLINE:
  case LUARETRY_REASON_SERVER_WAIT_TOO_LONG: return EXIT_DEADLINE;
  case LUARETRY_REASON_GAVE_UP: return EXIT_POLICY;  /* the attempt could not be made */
  case LUARETRY_REASON_POLICY_ERROR: return EXIT_POLICY;
  case LUARETRY_REASON_CANCELLED: return EXIT_INTERRUPTED;
  case LUARETRY_REASON_BUDGET:
  case LUARETRY_REASON_CIRCUIT_OPEN: return EXIT_REFUSED;
  case LUARETRY_REASON_NONE: break;
  }
  return EXIT_POLICY;
}

/* The policy's own faults are 3; another error (a transfer the signal cut
 * short, say) counts as the interruption once a stop signal came. */
int cli_error_status(luaretry_code rc) {
  if (rc == LUARETRY_E_POLICY || rc == LUARETRY_E_LIMIT) return EXIT_POLICY;
  return interrupted ? EXIT_INTERRUPTED : EXIT_POLICY;
}
