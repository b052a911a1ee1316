/* usage.c: the command's usage and help texts (`luaretry help [COMMAND]`,
 * `luaretry COMMAND --help`, `luaretry --version`), and the usage error
 * every subcommand reports through. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char CLI_USAGE[] =
  "usage: luaretry run [POLICY] URL [-X METHOD] [-H 'Name: value']... [-d DATA | -d @FILE] [-o "
  "FILE]\n"
  "       luaretry run [POLICY] URL... | --urls FILE [-Z | --parallel-max N] [--output-dir DIR] "
  "[options]\n"
  "       luaretry run [POLICY] -- COMMAND [ARG]...\n"
  "       luaretry run POLICY [ARG]... [-- ARG...]   (a policy with a run() workflow)\n"
  "       luaretry check POLICY... [--set NAME=VALUE]... [--probe OUTCOME]...\n"
  "       luaretry simulate POLICY [--attempts N] [--seed N] [--json] [--set NAME=VALUE]...\n"
  "                [--probe OUTCOME]... | [--clients N [--outage SECONDS] [--status CODE] [--svg "
  "FILE]\n"
  "                [--fleet [--wave N@SECONDS] | --process]] | [--latency BASE[,SLOW@FRACTION]\n"
  "                [--calls N]]\n"
  "       luaretry list [--names | --set-names]\n"
  "       luaretry fleet POLICY [--fleet local | --redis URL] [--reset] [--set NAME=VALUE]...\n"
  "       luaretry faults [--listen ADDRESS:PORT [--listen-any]] SCRIPT\n"
  "       luaretry demo\n"
  "       luaretry help [COMMAND] | COMMAND --help | --version\n";

static const char HELP_INTRO[] =
  "luaretry: a retry policy engine; C owns time, Lua policies own judgement.\n"
  "\n"
  "POLICY with a / or ending in .lua is a file; a bare name is looked up (as NAME,\n"
  "then NAME.lua), never in the current folder, in the folders of LUARETRY_PATH, then\n"
  "$XDG_CONFIG_HOME/luaretry/policies (~/.config/...), then the installed\n"
  "share/luaretry/policies: `luaretry run gcs URL`.  `luaretry list` shows them.\n"
  "\n"
  "Commands (luaretry help COMMAND for each; man luaretry for all):\n"
  "  run        perform an HTTP request, a command or a workflow, retried by POLICY\n"
  "  check      load policies and report every problem, their tuning and verdicts\n"
  "  simulate   the wait schedule of a policy, or a herd of clients against an outage\n"
  "  list       the policies on the search path, with their descriptions\n"
  "  fleet      a policy's shared guards, as the local store or Redis holds them\n"
  "  faults     a fault-injecting HTTP server scripted in Lua\n"
  "  demo       policies/http.lua against the built-in fault server\n"
  "  help       this text, or a command's\n"
  "\n"
  "Environment: LUARETRY_PATH (policy folders, colon-separated), XDG_CONFIG_HOME,\n"
  "LUARETRY_FLEET=local and LUARETRY_REDIS (run and fleet: --fleet local, the Redis of\n"
  "--redis), XDG_RUNTIME_DIR (the local store's folder), LUARETRY_DATADIR (in place of\n"
  "the installed share/luaretry); http_proxy, https_proxy, no_proxy (libcurl's).\n"
  "\n";

static const char HELP_EXIT[] =
  "\n"
  "Exit status: 0 success; 1 a response the policy judged final (or a body, or any\n"
  "command's output, that could not be written); 2 usage error; 3 policy error;\n"
  "4 attempts exhausted; 5 deadline; 6 refused (budget, circuit); 130 interrupted\n"
  "(SIGINT, SIGTERM).\n";

static const char HELP_RUN[] =
  "luaretry run POLICY URL [options]       an HTTP request, retried by POLICY\n"
  "luaretry run POLICY URL URL... [options] several URLs (or --urls FILE), each its own call\n"
  "luaretry run POLICY -- COMMAND [ARG]... a command; status = its exit status\n"
  "luaretry run POLICY [ARG]... [-- ARG...] a policy's run(http, args) workflow; after --\n"
  "                                        each word is an ARG as it is (-x too)\n"
  "Without POLICY, a URL (a word with ://) uses http, -- COMMAND uses command (every\n"
  "non-zero exit retried but 126, 127, 130, 143: --set options.final_exit_codes=LIST).\n"
  "\n"
  "Options shared with curl, with curl's spelling and meaning:\n"
  "  -X, --request METHOD      request method (default GET, or POST with -d)\n"
  "  -H, --header 'Name: value'  a request header (repeatable; 'Name;' sends it empty, 'Name:'\n"
  "                              none, libcurl's own included)\n"
  "  -d, --data DATA|@FILE|@-  body, POST; several are joined with &; a file is sent\n"
  "                            as it is (curl drops its CR/LF); --data-ascii the same\n"
  "      --data-binary DATA|@FILE  body sent as it is      --data-raw DATA  no @FILE\n"
  "                            the body is sent whole again on every attempt\n"
  "  -o, --output FILE         the body to FILE, replaced only on success\n"
  "  -L, --location            follow redirects (http and https only)\n"
  "      --max-redirs N        at most N of them (default 50, as curl; -1: no limit)\n"
  "      --location-trusted    also send -u and Authorization/Cookie headers to other hosts\n"
  "                            (without it they go to the first host only, as in curl)\n"
  "  -u, --user USER:PASSWORD  Basic credentials (never prompts)\n"
  "  -A, --user-agent TEXT     User-Agent (default luaretry/" LUARETRY_VERSION
  "; '' sends none)\n"
  "      --compressed          ask for a compressed answer, write it decoded\n"
  "  -k, --insecure            do not verify the server's certificate\n"
  "      --cacert FILE         verify it against the CA certificates in FILE\n"
  "  -E, --cert FILE[:PASSWORD]  client certificate      --key FILE  its private key\n"
  "  -i, --include             write the final response's headers before its body\n"
  "  -D, --dump-header FILE    write them to FILE (- for standard output)\n"
  "  -w, --write-out FORMAT    after the body: %{http_code} %{num_attempts} %{time_total}\n"
  "                            (the whole call, waits included) %{num_redirects}\n"
  "                            %{url_effective} %{content_type} %{size_download}\n"
  "                            %{redirect_url} %{exitcode} %{verdict} %header{NAME};\n"
  "                            \\n \\t \\r escapes; @FILE reads the format\n"
  "  -f, --fail                write no body when the call failed\n"
  "      --fail-with-body      -o FILE gets a failure's answer too (it is kept only on\n"
  "                            success otherwise); the final log line always quotes\n"
  "                            the first line of a failure's answer\n"
  "      --create-dirs         make the folders -o FILE or --output-dir DIR need (0750)\n"
  "  -I, --head                a HEAD request, headers written (-X HEAD -i)\n"
  "  -O, --remote-name         the body to the URL's last path segment (in --output-dir,\n"
  "                            else here); --remote-name-all: the same, for every URL,\n"
  "                            as -O with several URLs (curl's -O: the first URL's only)\n"
  "      --url URL             a URL, as a word would be (curl's spelling, for -K files)\n"
  "  -T, --upload-file FILE    PUT FILE (sent whole on every attempt; a URL ending in /\n"
  "                            gets FILE's name)\n"
  "  -F, --form NAME=VALUE|NAME=@FILE[;type=T]|NAME=<FILE  multipart, POST; the body is\n"
  "                            built once and sent whole on every attempt (so a file that\n"
  "                            changes meanwhile never mixes two versions); --form-string\n"
  "  -G, --get                 -d's data in the URL's query, a GET\n"
  "  -b, --cookie FILE|'N=V; ...'  cookies read at the start of the call, once\n"
  "  -c, --cookie-jar FILE     cookies written at the end of the call, once (those set\n"
  "                            by a failed attempt are sent by the next, as curl's)\n"
  "      --resolve HOST:PORT:ADDRESS  connect there for HOST:PORT (repeatable)\n"
  "  -x, --proxy URL           through this proxy (else http_proxy, https_proxy, no_proxy)\n"
  "  -K, --config FILE         options from FILE in curl's syntax (- for standard input)\n"
  "  -Z, --parallel            a batch's URLs at once, as curl's (at most 50); a number\n"
  "                            after --parallel is refused: --parallel-max N\n"
  "      --parallel-max N      at most N at once (1 to 1000; default 1), without -Z too\n"
  "                            (curl's takes effect only with -Z)\n"
  "      --fail-early          a batch begins no URL after its first final failure\n"
  "  -J, --remote-header-name  with -O: the file (each URL's) named by Content-Disposition\n"
  "  -g, --globoff             taken: URLs are always literal ({a,b}, [1-9] not globbed);\n"
  "                            without it, -o naming #1..#9 (a glob's match) is refused\n"
  "  -e, --referer URL[;auto]  the Referer of every attempt\n"
  "  -4, --ipv4, -6, --ipv6, --http1.1, --http2, --tlsv1.2, --tlsv1.3   as curl's\n"
  "      --limit-rate BYTES[k|m|g]  each attempt's pace (above 0)\n"
  "      --max-filesize BYTES[k|m|g]  a larger body is final (too_large), not retried\n"
  "      --no-progress-meter   no progress meter      -#, --progress-bar  a bar instead\n"
  "  -N, --no-buffer           taken, changes nothing: a file's body is written as it\n"
  "                            comes; stdout's is held until the call ends (-o)\n"
  "  -Y, --speed-limit BYTES   with -y: an attempt slower than BYTES/s (default 1)...\n"
  "  -y, --speed-time SECONDS  ...for SECONDS fails as `stalled`, retried; the policy's\n"
  "                            stall_speed and stall_timeout (-Y alone: the policy's, or 30 s)\n"
  "  -C, --continue-at -       continue the -o (or -O) file where it ends (Range), one URL;\n"
  "                            what a failed call wrote stays, as with curl\n"
  "      --checksum ALG=HEX    the body's sha-256, sha-512 or md5 (aria2c's form): a\n"
  "                            mismatch is retried once from zero, then final (exit 1)\n"
  "  -m, --max-time SECONDS    per attempt, as curl's: the policy's attempt_timeout\n"
  "      --retry-max-time SECONDS  the whole call, waits included: the policy's deadline\n"
  "                            (0: none, for both)\n"
  "      --connect-timeout SECONDS  for the connection of each attempt\n"
  "  -s, --silent              nothing on standard error (a batch's lines neither); the\n"
  "                            exit status tells (still said: usage and write errors)\n"
  "  -S, --show-error          with -s: the one final line of a failure\n"
  "  -q, --quiet               as -sS: one line for every failure (a final answer, attempts\n"
  "                            spent, a refusal by the budget or a breaker, local or fleet)\n"
  "  -v, --verbose             as curl's: every attempt's request (> ) and response (< )\n"
  "                            headers and libcurl's notes (* ), and the script's print()\n"
  "      --trace-ascii FILE    every byte sent and received, as curl's (- standard\n"
  "                            output, % standard error); -v and it show Authorization,\n"
  "                            Proxy-Authorization, Cookie and Set-Cookie values as\n"
  "                            [redacted], and no URL's user:password\n"
  "curl's retry options, mapped onto the policy:\n"
  "      --retry N             max_attempts N+1 (0: one attempt)\n"
  "      --retry-delay S       every wait S seconds (throttled too), no jitter; 0: the\n"
  "                            policy's backoff, as 0 is curl's default\n"
  "      --retry-all-errors    what the policy calls final is retried too, any policy\n"
  "                            (never a POST without an Idempotency-Key): --set\n"
  "                            retry_all_errors=true\n"
  "      --retry-connrefused   taken: a refused connection is retried already\n"
  "-q is luaretry's own (one line per failure); curl's only skips a .curlrc.\n"
  "A GET whose attempt breaks (reset, truncated, stalled) after Accept-Ranges: bytes and a\n"
  "strong ETag or Last-Modified is resumed by the next with Range and If-Range; an answer\n"
  "that does not fit (200, another start, length or validator) restarts from zero, said\n"
  "once; two versions are never spliced.  Each attempt counts, progress or not.\n"
  "\n"
  "luaretry's own:\n"
  "  --seed N                  fixed jitter seed        --set NAME=VALUE  override a value\n"
  "                            (--set GUARD=none turns budget, breaker, admission, rate\n"
  "                            or hedge off)\n"
  "  --stats | --stats=json    the policy's counters at the end, on standard error\n"
  "  --log-json FILE           one JSON object per attempt, then a summary object\n"
  "                            (verdict, attempts, total_wait, exit); - for standard error\n"
  "  --metrics-file FILE       the counters in Prometheus text format, replaced whole\n"
  "  --urls FILE               more URLs, one a line (- for standard input)\n"
  "  --fleet local             share the budget, breaker, admission and fixed rate with\n"
  "                            this user's processes on this machine: a shared-memory\n"
  "                            file (0600) in $XDG_RUNTIME_DIR, no server; a file not\n"
  "                            its own is refused, said once (default\n"
  "                            $LUARETRY_FLEET=local)\n"
  "  --redis URL               share the budget, breaker and admission with every process\n"
  "                            naming this Redis (redis://[user:password@]host[:port]\n"
  "                            [/db], unix:///path, or redis-sentinel://[user:password@]\n"
  "                            host:port[,host:port]...[/db]#master; default\n"
  "                            $LUARETRY_REDIS; none: off); when Redis is slow or gone,\n"
  "                            the local guards decide, said once\n"
  "  --output-dir DIR          each body, on success only, to DIR/NAME (the URL's last\n"
  "                            path segment; NAME.1, NAME.2 for repeats)\n"
  "  --stdout=final            a command's standard output: the final attempt's only\n"
  "                            (default: a retried command's output is never doubled)\n"
  "  --stdout=live             every attempt's, as it comes\n"
  "A command's rules without Lua (the command policy's options):\n"
  "  --retry-on-exit LIST      only these exit statuses (0-255, commas) are retried\n"
  "  --final-on-exit LIST      these are final (default 126,127,130,143)\n"
  "  --final-if-output PATTERN a failure whose error output matches (a Lua pattern) is\n"
  "  --retry-if-output PATTERN final, or retried; before the exit statuses\n"
  "  --before-retry CMD        sh -c CMD before each retry; its failure is said\n"
  "  --exit-status command     exit with the final attempt's own status (127 not found,\n"
  "                            126 cannot run); luaretry's 2, 3, 5, 6, 130 still win\n"
  "  -w '%{exitcode} %{num_attempts} %{time_total} %{verdict}'   for a command too\n"
  "A batch (several URLs) shares the policy's budget, breaker and counters; a URL that\n"
  "failed gets a line ([i] URL: verdict, attempts, status, seconds, exit; -v: every URL,\n"
  "and every attempt), the batch a summary at the end (N URLs: S succeeded, F failed,\n"
  "bytes, seconds, exit), and exits with the worst status (0 < 1 < 4 < 5 < 6 < 2 < 3 <\n"
  "130; 2: a bad URL met in a list from a pipe).\n"
  "On a terminal one transfer shows a meter (every attempt's bytes, speed, time, and\n"
  "\"retry N in S s\" between attempts; -# a bar), a batch one live line (done, in\n"
  "flight, waiting, throttled, failed, bytes, rate, time left); not with -s, -q, -v,\n"
  "--no-progress-meter, nor on a pipe, nor when the body goes to the terminal.\n"
  "With -- COMMAND the body is the tail of the command's standard error; every\n"
  "attempt's standard error passes through as it is written, whole lines between\n"
  "luaretry's own.\n";

static const char HELP_CHECK[] =
  "luaretry check POLICY... [--set NAME=VALUE]... [--probe OUTCOME]...\n"
  "  Loads each policy and reports every problem (errors with file:line, unknown names\n"
  "  with the closest known one, clamped values, reads of undefined globals in hooks,\n"
  "  a hook that raises), then its effective tuning and its verdicts on probe outcomes\n"
  "  (statuses and transport failures; exit statuses for a command's policy).  Every\n"
  "  hook runs at least once; a workflow's run() with no network (every request\n"
  "  answered 200 '{}', args three URLs http://check.invalid/ARG1...).  Exit 0 when\n"
  "  every file is clean, 3 otherwise, 2 for a usage error.\n"
  "  --probe OUTCOME    add an outcome to the probes (repeatable), written\n"
  "                     '[METHOD] STATUS [ERROR] [Name: value]... [body=TEXT]':\n"
  "                     '429 [Retry-After: 5]', 'POST 503 [Idempotency-Key: k1]',\n"
  "                     '0 reset', '503 body={\"retry_in_ms\": 1500}'; a command's\n"
  "                     'exit STATUS [body=TEXT]' or 'exit timeout': 'exit 75'\n";

static const char HELP_SIMULATE[] =
  "luaretry simulate POLICY [options]   the wait schedule when every attempt fails\n"
  "  --attempts N       simulate N attempts (default: the policy's max_attempts)\n"
  "  --seed N           jitter seed (default 1); the same seed, the same waits\n"
  "  --json             one JSON object per attempt instead of text\n"
  "  --set NAME=VALUE   override a tuning value (max_attempts=3, backoff.initial=0.1)\n"
  "  --probe OUTCOME    the attempts meet these outcomes in order, the last repeating,\n"
  "                     written as for check: '429 [RateLimit: \"q\";r=0;t=30]', '200'\n"
  "  --clients N        N clients fail together at t=0 against an outage (503 before\n"
  "                     it ends, 200 after); prints attempts, outcomes and the peak\n"
  "                     of retries per 100 ms\n"
  "  --outage SECONDS   the outage's length (default 30)\n"
  "  --svg FILE         also draw a histogram of attempts over time\n"
  "  --fleet [local]    with --clients: the N clients sharing one budget, breaker,\n"
  "                     admission and fixed rate (as --redis makes them share; local:\n"
  "                     each outcome counted at once, as --fleet local does), next\n"
  "                     to N with their own; the requests per first attempt of\n"
  "                     each, when the last one starts, and the fleet's round trips\n"
  "                     to Redis per second of a client's life\n"
  "  --wave N@SECONDS   with --fleet: the clients start N at a time, a wave every\n"
  "                     SECONDS (100@5), as processes a batch starts\n"
  "  --latency BASE[,SLOW@FRACTION]\n"
  "                     calls whose attempts answer after BASE seconds, SLOW for a\n"
  "                     FRACTION of them (0.01,1@0.05), on the virtual clock, with\n"
  "                     the policy's hedge and without: p50, p99, p99.9, requests\n"
  "  --calls N          with --latency: the calls (default 1000)\n"

  "  --process          with --clients: the N clients as calls of one process sharing\n"
  "                     its guards (budget, breaker, admission, rate) in time order; the\n"
  "                     requests that reach the service and when the last one starts\n"
  "  --status CODE      with --clients: the outage's answer (default 503; 429 for\n"
  "                     throttling answers)\n";

static const char HELP_FLEET[] =
  "luaretry fleet POLICY [--fleet local | --redis URL] [--reset] [--set NAME=VALUE]...\n"
  "  With --fleet local ($LUARETRY_FLEET=local): every shared guard as the local store\n"
  "  holds it (budget, breaker, admission window, rate's slots ahead).  With --redis\n"
  "  ($LUARETRY_REDIS): the fleet's budget, breaker (and when it opened) and the\n"
  "  processes that synced in the last minute, as Redis holds them.  --reset clears\n"
  "  them.  Exit 1 when Redis cannot be read or the store is refused, 3 when the\n"
  "  policy has nothing to share.  Names are shown with control bytes escaped (\\xNN).\n"
  "  Processes share a key only with the same budget and breaker settings; one with\n"
  "  others is refused (its local guards decide) until --reset, or a minute after\n"
  "  the last process with the old ones.\n";

static const char HELP_LIST[] =
  "luaretry list [--names | --set-names]\n"
  "  The policies POLICY can name, folder by folder in search order (LUARETRY_PATH,\n"
  "  $XDG_CONFIG_HOME/luaretry/policies, the installed share/luaretry/policies), each\n"
  "  with the first comment line of its file.  A bare name is looked up there only,\n"
  "  never in the current folder; a path with a / or a NAME.lua is a file.  Regular\n"
  "  files only, at most 10000 a folder.  --names: the names alone.  --set-names: the\n"
  "  names --set takes (NAME=, from the schema), for completion.\n";

static const char HELP_FAULTS[] =
  "luaretry faults [--listen ADDRESS:PORT [--listen-any]] SCRIPT\n"
  "  A fault-injecting HTTP/1.1 server on loopback, answering as the Lua SCRIPT says\n"
  "  (statuses, delays, resets, hangs, truncated bodies); port 0 picks a free one\n"
  "  (default 127.0.0.1:0).  --listen-any: also a non-loopback ADDRESS (anyone who\n"
  "  can reach it drives the script).  The script API: man 5 luaretry-faults.\n";

static const char HELP_DEMO[] =
  "luaretry demo\n"
  "  Runs policies/http.lua against the built-in fault server: 503, a reset, 429 with\n"
  "  Retry-After, then 200.\n";

static const char HELP_HELP[] =
  "luaretry help [COMMAND]\n"
  "  The overview, or COMMAND's options (the same as luaretry COMMAND --help).\n";

static const struct {
  const char *name;
  const char *text;
} HELPS[] = {
  { "run", HELP_RUN },   { "check", HELP_CHECK }, { "simulate", HELP_SIMULATE },
  { "list", HELP_LIST }, { "fleet", HELP_FLEET }, { "faults", HELP_FAULTS },
  { "demo", HELP_DEMO }, { "help", HELP_HELP },
};

int cli_help(const char *command) {
  if (!command) {
    fputs(HELP_INTRO, stdout);
    fputs(CLI_USAGE, stdout);
    fputs(HELP_EXIT, stdout);
    return EXIT_OK;
  }
  for (size_t i = 0; i < sizeof HELPS / sizeof HELPS[0]; i++) {
    if (strcmp(HELPS[i].name, command) != 0) continue;
    fputs(HELPS[i].text, stdout);
    if (strcmp(command, "run") == 0 || strcmp(command, "check") == 0) fputs(HELP_EXIT, stdout);
    return EXIT_OK;
  }
  return cli_usage("help: no command %s (run, check, simulate, list, fleet, faults, demo)",
                   command);
}

static const char *usage_command, *usage_where;

void cli_usage_command(const char *command) { usage_command = command; }

const char *cli_usage_where(const char *where) {
  const char *was = usage_where;
  usage_where = where;
  return was;
}

/* CLI_USAGE's lines for `command` (each "luaretry COMMAND ..." line and the
 * lines that continue it), as a synopsis of its own; 0 when none are. */
static int print_synopsis(FILE *out, const char *command) {
  size_t clen = strlen(command);
  int shown = 0, mine = 0;
  for (const char *line = CLI_USAGE; *line;) {
    const char *end = strchr(line, '\n');
    int len = end ? (int)(end - line) : (int)strlen(line);
    const char *text = line + (strncmp(line, "usage: ", 7) == 0 ? 7 : strspn(line, " "));
    int continues = text - line > 7; /* under the options of the line above */
    if (!continues)
      mine = strncmp(text, "luaretry ", 9) == 0 && strncmp(text + 9, command, clen) == 0 &&
             (text[9 + clen] == ' ' || text[9 + clen] == '\n');
    if (mine && continues) fprintf(out, "%.*s\n", len, line);
    if (mine && !continues)
      fprintf(out, "%s%.*s\n", shown++ ? "       " : "usage: ", len - (int)(text - line), text);
    line += len + (end != NULL);
  }
  return shown;
}

/* The message first, then the synopsis of the command it is about: the
 * other commands' lines would bury it. */
int cli_usage(const char *fmt, const char *arg) {
  fprintf(stderr, "luaretry: ");
  if (usage_where) fprintf(stderr, "%s: ", usage_where);
  /* the argument as the user typed it, but one line: a newline in it
   * (a quoted --probe) must not end the message */
  int n = snprintf(NULL, 0, fmt, arg ? arg : "");
  char *msg = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (msg) {
    snprintf(msg, (size_t)n + 1, fmt, arg ? arg : "");
    cli_text(stderr, msg);
    free(msg);
  } else {
    fprintf(stderr, fmt, arg ? arg : "");
  }
  fputc('\n', stderr);
  if (usage_command && print_synopsis(stderr, usage_command))
    fprintf(stderr, "'luaretry help %s' tells every option.\n", usage_command);
  else
    fputs(CLI_USAGE, stderr);
  return EXIT_USAGE;
}

/* --version: luaretry's, libcurl's and Lua's, and what is built in. */
int cli_version(void) {
  const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
  printf("luaretry %s\n", luaretry_version(NULL));
  printf("libcurl %s", v->version);
  if (v->ssl_version) printf(" (%s", v->ssl_version);
  if (v->libz_version) printf(" zlib/%s", v->libz_version);
  if (v->nghttp2_version) printf(" nghttp2/%s", v->nghttp2_version);
  printf("%s\n", v->ssl_version ? ")" : "");
  printf("%s\n", luaretry_lua_version());
  printf("features:");
  if (v->features & CURL_VERSION_SSL) printf(" https");
  if (v->features & CURL_VERSION_HTTP2) printf(" http2");
  if (v->features & CURL_VERSION_IPV6) printf(" ipv6");
  if (v->features & CURL_VERSION_LIBZ) printf(" gzip deflate");
  if (v->features & CURL_VERSION_BROTLI) printf(" br");
  if (v->features & CURL_VERSION_ZSTD) printf(" zstd");
  if (v->features & CURL_VERSION_ASYNCHDNS) printf(" async-dns");
  printf(" lua-sandbox fault-server\n");
  char dir[CLI_PATH_MAX];
  printf("policies:");
  luaretry_code rc;
  for (size_t i = 0; (rc = luaretry_policy_dir(i, dir, sizeof dir)) != LUARETRY_E_ARG; i++)
    if (rc == LUARETRY_OK) printf(" %s", dir); /* E_IO: one too long to open, skipped */
  printf("\n");
  return EXIT_OK;
}
