/* signals.c: exit statuses, and the stop signals as a cancel.
 *
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT, unless ignored at start (nohup),
 * cancel the call (or batch) in progress through the public cancel functions, which are safe in a signal
 * handler; the call then ends with its reason "cancelled", everything
 * unwinds (a temporary output file is removed) and the command exits 130.
 * A second stop signal also kills a running command's process group at
 * once, without its grace.  No SA_RESTART: a blocking open or read (a FIFO
 * that waits for its writer) returns EINTR and is abandoned. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "run.h"

static luaretry_call *volatile running_call;
static luaretry_curl_many *volatile running_many;
static volatile pid_t running_group;
/* Counts signals, including those that arrive before the call exists. */
static volatile sig_atomic_t stops;
/* Nothing to undo yet (cli_exit_on_stop_signal). */
static volatile sig_atomic_t exit_at_once;

static void on_signal(int sig) {
  (void)sig;
  if (exit_at_once) _exit(EXIT_INTERRUPTED);
  if (stops < 1000) stops++;
  luaretry_call *c = running_call;
  if (c) luaretry_call_cancel(c);
  luaretry_curl_many *m = running_many;
  if (m) luaretry_curl_many_cancel(m);
  pid_t g = running_group;
  if (g > 0 && stops >= 2) kill(-g, SIGKILL);
}

/* The signals whose disposition at start is noted, and which of them were
 * ignored then: nohup ignores SIGHUP, a shell's background job SIGINT and
 * SIGQUIT.  An ignored stop signal stays ignored, here and in a command's
 * child, as curl and retry(1) leave it. */
static const int NOTED[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE };
static int ignored_at_start[sizeof NOTED / sizeof NOTED[0]];

/* Read once, before any handler of ours is installed. */
static void note_start(void) {
  static int noted;
  if (noted) return;
  noted = 1;
  for (size_t i = 0; i < sizeof NOTED / sizeof NOTED[0]; i++) {
    struct sigaction old;
    ignored_at_start[i] = sigaction(NOTED[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN;
  }
}

int cli_signal_ignored_at_start(int sig) {
  note_start();
  for (size_t i = 0; i < sizeof NOTED / sizeof NOTED[0]; i++)
    if (NOTED[i] == sig) return ignored_at_start[i];
  return 0;
}

void cli_on_stop_signals(void (*handler)(int)) {
  static const int STOP[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
  note_start();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof STOP / sizeof STOP[0]; i++)
    if (!cli_signal_ignored_at_start(STOP[i])) sigaction(STOP[i], &sa, NULL);
  signal(SIGPIPE, SIG_IGN); /* a closed pipe is a write error, not a death */
}

void cli_catch_stop_signals(void) { cli_on_stop_signals(on_signal); }

int cli_interrupted(void) { return stops > 0; }

void cli_exit_on_stop_signal(int on) {
  exit_at_once = on;
  if (on && stops) _exit(EXIT_INTERRUPTED);
}

int cli_stop_signals(void) { return stops; }

void cli_cancel_on_signal(luaretry_call *call, luaretry_curl_many *many) {
  if (call || many) cli_catch_stop_signals();
  running_call = call;
  running_many = many;
  if (stops && call) luaretry_call_cancel(call);
  if (stops && many) luaretry_curl_many_cancel(many);
}

void cli_kill_on_second_signal(pid_t pgid) {
  running_group = pgid;
  if (pgid > 0 && stops >= 2) kill(-pgid, SIGKILL);
}

int cli_exit_status(luaretry_reason r) {
  switch (r) {
  case LUARETRY_REASON_SUCCESS: return EXIT_OK;
  case LUARETRY_REASON_FINAL: return EXIT_FINAL;
  case LUARETRY_REASON_EXHAUSTED: return EXIT_EXHAUSTED;
  case LUARETRY_REASON_DEADLINE:
  case LUARETRY_REASON_SERVER_WAIT_TOO_LONG: return EXIT_DEADLINE;
  case LUARETRY_REASON_GAVE_UP: return EXIT_POLICY; /* the attempt could not be made */
  case LUARETRY_REASON_POLICY_ERROR: return EXIT_POLICY;
  case LUARETRY_REASON_CANCELLED: return EXIT_INTERRUPTED;
  case LUARETRY_REASON_BUDGET:
  case LUARETRY_REASON_CIRCUIT_OPEN:
  case LUARETRY_REASON_ADMISSION:
  case LUARETRY_REASON_RATE_LIMIT: return EXIT_REFUSED;
  case LUARETRY_REASON_NONE: break;
  }
  return EXIT_POLICY;
}

/* The policy's own faults are 3; another error (a transfer the signal cut
 * short, say) counts as the interruption once a stop signal came. */
int cli_error_status(luaretry_code rc) {
  if (rc == LUARETRY_E_POLICY || rc == LUARETRY_E_LIMIT) return EXIT_POLICY;
  return stops ? EXIT_INTERRUPTED : EXIT_POLICY;
}
