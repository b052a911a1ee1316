/* usage.c: the command's usage and help texts, and the usage error every
 * subcommand reports through. */
#include <stdio.h>

#include "cli.h"

const char CLI_USAGE[] =
  "usage: luaretry run POLICY URL [-X METHOD] [-H 'Name: value']... [-d DATA | -d @FILE] [-o FILE]\n"
  "       luaretry run POLICY URL... | --urls FILE [--parallel N] [--output-dir DIR] [options]\n"
  "       luaretry run POLICY -- COMMAND [ARG]...\n"
  "       luaretry check POLICY... [--set NAME=VALUE]...\n"
  "       luaretry simulate POLICY [--attempts N] [--seed N] [--json] [--set NAME=VALUE]...\n"
  "                [--clients N [--outage SECONDS] [--svg FILE]]\n"
  "       luaretry faults [--listen 127.0.0.1:PORT] SCRIPT\n"
  "       luaretry demo\n"
  "       luaretry --help | --version\n";

const char CLI_HELP[] =
  "luaretry: a retry policy engine; C owns time, Lua policies own judgement.\n"
  "\n"
  "  luaretry run POLICY URL [options]    perform an HTTP request, retried by POLICY\n"
  "      -X METHOD        request method (default GET, or POST with -d)\n"
  "      -H 'Name: value' a request header (repeatable)\n"
  "      -d DATA | -d @FILE | -d @-   request body, sent whole on every attempt\n"
  "      -o FILE          write the body to FILE, only on success (atomic rename)\n"
  "  luaretry run POLICY URL URL... [options]   several URLs (or --urls): each its own\n"
  "                       retried call; all share the policy's budget, breaker and\n"
  "                       counters; attempt lines start with the URL's number [i],\n"
  "                       and each URL ends with a summary line on standard error\n"
  "                       ([i] URL: verdict, attempts, last status, seconds, exit)\n"
  "      --urls FILE      more URLs, one a line (- for standard input; blank lines\n"
  "                       and # comments skipped), after those on the command line\n"
  "      --parallel N     at most N transfers at once, 1 to 1000 (default 1); a call\n"
  "                       waiting for its backoff holds no transfer\n"
  "      --output-dir DIR each body, on success only, to DIR/NAME (the URL's last\n"
  "                       path segment, sanitized, \"index\" if empty; NAME.1, NAME.2\n"
  "                       for repeats), through a temporary renamed into place;\n"
  "                       without it the bodies go to standard output, each whole,\n"
  "                       as the calls end.  -o takes one URL only.\n"
  "                       Exit status: the worst of the calls' (0 < 1 < 4 < 5 < 6\n"
  "                       < 3 < 130); --seed N gives URL i the seed N+i-1\n"
  "  luaretry run POLICY -- COMMAND [ARG]...   run a command, retried by POLICY;\n"
  "                       status = exit status, body = tail of its standard error\n"
  "      --seed N         fixed jitter seed      --set NAME=VALUE  override a value\n"
  "      -v | -q          also the script's print() output | no attempt lines\n"
  "      --stats          the policy's counters at the end, on standard error\n"
  "      --log-json FILE  one JSON object per attempt (- for standard error)\n"
  "\n"
  "  luaretry simulate POLICY [options]   print the wait schedule of POLICY when\n"
  "                                       every attempt fails transiently\n"
  "      --attempts N     simulate N attempts (default: the policy's max_attempts)\n"
  "      --seed N         jitter seed (default 1); the same seed, the same waits\n"
  "      --json           one JSON object per attempt instead of text (with\n"
  "                       --clients: {client, attempt, time, status, verdict, wait})\n"
  "      --set NAME=VALUE override a tuning value (max_attempts=3, backoff.initial=0.1)\n"
  "      --clients N      N clients fail together at t=0 against an outage: each is\n"
  "                       its own call (seed + client index); attempts before the\n"
  "                       outage ends get 503, later ones 200; prints the attempts,\n"
  "                       who succeeded or gave up, and the peak per 100 ms\n"
  "      --outage SECONDS the outage's length (default 30)\n"
  "      --svg FILE       also draw a histogram of attempts over time (SVG)\n"
  "  luaretry check POLICY... [--set NAME=VALUE]   load each policy, report every\n"
  "                       problem (errors, unknown names, clamped values), print\n"
  "                       its tuning and its verdicts on probe outcomes; exit 0\n"
  "                       when all are clean, 3 otherwise\n"
  "  luaretry faults [--listen 127.0.0.1:PORT] SCRIPT   a fault-injecting HTTP\n"
  "                       server scripted in Lua (port 0: any free port)\n"
  "  luaretry demo        runs policies/http.lua against the built-in fault server\n"
  "  luaretry --help | --version\n"
  "\n"
  "Exit status: 0 success; 1 a response the policy judged final; 2 usage error;\n"
  "3 policy error; 4 attempts exhausted; 5 deadline; 6 refused (budget, circuit);\n"
  "130 interrupted (SIGINT, SIGTERM).\n";

int cli_usage(const char *fmt, const char *arg) {
  fprintf(stderr, "luaretry: ");
  fprintf(stderr, fmt, arg ? arg : "");
  fprintf(stderr, "\n%s", CLI_USAGE);
  return EXIT_USAGE;
}
