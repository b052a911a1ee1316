/* args.c: the command line of `luaretry run`, and the request it
 * describes.  Options shared with curl keep curl's spelling and meaning
 * (curlopts.c applies them to the handle): long and short names, short
 * flags bundled (-sSL), a short option's value attached (-XPUT) or next. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "cli/cli.h"
#include "run.h"

#define MAX_PARALLEL 1000

typedef enum {
  O_VERBOSE,
  O_QUIET,
  O_SILENT,
  O_SHOW_ERROR,
  O_STATS,
  O_STATS_JSON,
  O_LOCATION,
  O_LOCATION_TRUSTED,
  O_INSECURE,
  O_COMPRESSED,
  O_INCLUDE,
  O_FAIL,
  O_HEAD,
  O_STDOUT_LIVE,
  O_STDOUT_FINAL,
  O_CREATE_DIRS,
  O_FAIL_WITH_BODY,
  O_REMOTE_NAME,
  O_REMOTE_NAME_ALL,
  O_GET,
  O_PARALLEL_CURL,
  O_NO_PROGRESS,
  O_PROGRESS_BAR,
  O_REMOTE_HEADER_NAME,
  O_NO_BUFFER,
  O_GLOBOFF,
  O_IPV4,
  O_IPV6,
  O_HTTP11,
  O_HTTP2,
  O_FAIL_EARLY,
  O_RETRY_CONNREFUSED,
  O_RETRY_ALL_ERRORS,
  O_TLS12,
  O_TLS13,
  /* with a value from here on */
  O_REQUEST,
  O_HEADER,
  O_DATA,
  O_DATA_BINARY,
  O_DATA_RAW,
  O_OUTPUT,
  O_USER,
  O_USER_AGENT,
  O_CACERT,
  O_CERT,
  O_KEY,
  O_MAX_REDIRS,
  O_DUMP_HEADER,
  O_WRITE_OUT,
  O_MAX_TIME,
  O_RETRY_MAX_TIME,
  O_CONNECT_TIMEOUT,
  O_SEED,
  O_SET,
  O_LOG_JSON,
  O_URLS,
  O_OUTPUT_DIR,
  O_METRICS_FILE,
  O_REDIS,
  O_FLEET,
  O_TRACE_ASCII,
  O_SPEED_LIMIT,
  O_SPEED_TIME,
  O_CONTINUE_AT,
  O_CHECKSUM,
  O_UPLOAD_FILE,
  O_FORM,
  O_FORM_STRING,
  O_COOKIE,
  O_COOKIE_JAR,
  O_RESOLVE,
  O_PROXY,
  O_CONFIG,
  O_PARALLEL_MAX,
  O_URL,
  O_REFERER,
  O_LIMIT_RATE,
  O_MAX_FILESIZE,
  O_RETRY,
  O_RETRY_DELAY,
  O_RETRY_ON_EXIT,
  O_FINAL_ON_EXIT,
  O_RETRY_IF_OUTPUT,
  O_FINAL_IF_OUTPUT,
  O_BEFORE_RETRY,
  O_EXIT_STATUS
} option_id;

typedef struct {
  char short_name;       /* 0: none */
  const char *long_name; /* NULL: none */
  option_id id;
} run_option;

static const run_option OPTIONS[] = {
  { 'v', "--verbose", O_VERBOSE },
  { 'q', "--quiet", O_QUIET },
  { 's', "--silent", O_SILENT },
  { 'S', "--show-error", O_SHOW_ERROR },
  { 0, "--stats", O_STATS },
  { 0, "--stats=json", O_STATS_JSON },
  { 'L', "--location", O_LOCATION },
  { 0, "--location-trusted", O_LOCATION_TRUSTED },
  { 'k', "--insecure", O_INSECURE },
  { 0, "--compressed", O_COMPRESSED },
  { 'i', "--include", O_INCLUDE },
  { 'f', "--fail", O_FAIL },
  { 'I', "--head", O_HEAD },
  { 'X', "--request", O_REQUEST },
  { 'H', "--header", O_HEADER },
  { 'd', "--data", O_DATA },
  { 0, "--data-ascii", O_DATA },
  { 0, "--data-binary", O_DATA_BINARY },
  { 0, "--data-raw", O_DATA_RAW },
  { 'o', "--output", O_OUTPUT },
  { 'u', "--user", O_USER },
  { 'A', "--user-agent", O_USER_AGENT },
  { 0, "--cacert", O_CACERT },
  { 'E', "--cert", O_CERT },
  { 0, "--key", O_KEY },
  { 0, "--max-redirs", O_MAX_REDIRS },
  { 'D', "--dump-header", O_DUMP_HEADER },
  { 'w', "--write-out", O_WRITE_OUT },
  { 'm', "--max-time", O_MAX_TIME },
  { 0, "--retry-max-time", O_RETRY_MAX_TIME },
  { 0, "--connect-timeout", O_CONNECT_TIMEOUT },
  { 0, "--seed", O_SEED },
  { 0, "--set", O_SET },
  { 0, "--log-json", O_LOG_JSON },
  { 0, "--urls", O_URLS },
  { 0, "--output-dir", O_OUTPUT_DIR },
  { 'Z', "--parallel", O_PARALLEL_CURL },
  { 0, "--metrics-file", O_METRICS_FILE },
  { 0, "--redis", O_REDIS },
  { 0, "--fleet", O_FLEET },
  { 0, "--stdout=live", O_STDOUT_LIVE },
  { 0, "--stdout=final", O_STDOUT_FINAL },
  { 0, "--trace-ascii", O_TRACE_ASCII },
  { 0, "--create-dirs", O_CREATE_DIRS },
  { 0, "--fail-with-body", O_FAIL_WITH_BODY },
  { 'O', "--remote-name", O_REMOTE_NAME },
  { 0, "--remote-name-all", O_REMOTE_NAME_ALL },
  { 'G', "--get", O_GET },
  { 'Y', "--speed-limit", O_SPEED_LIMIT },
  { 'y', "--speed-time", O_SPEED_TIME },
  { 'C', "--continue-at", O_CONTINUE_AT },
  { 0, "--checksum", O_CHECKSUM },
  { 'T', "--upload-file", O_UPLOAD_FILE },
  { 'F', "--form", O_FORM },
  { 0, "--form-string", O_FORM_STRING },
  { 'b', "--cookie", O_COOKIE },
  { 'c', "--cookie-jar", O_COOKIE_JAR },
  { 0, "--resolve", O_RESOLVE },
  { 'x', "--proxy", O_PROXY },
  { 'K', "--config", O_CONFIG },
  { 0, "--parallel-max", O_PARALLEL_MAX },
  { 0, "--url", O_URL },
  /* curl's, harmless or with curl's meaning under retries (curlopts.c) */
  { 0, "--no-progress-meter", O_NO_PROGRESS },
  { '#', "--progress-bar", O_PROGRESS_BAR },
  { 'J', "--remote-header-name", O_REMOTE_HEADER_NAME },
  { 'N', "--no-buffer", O_NO_BUFFER },
  { 'g', "--globoff", O_GLOBOFF },
  { 'e', "--referer", O_REFERER },
  { '4', "--ipv4", O_IPV4 },
  { '6', "--ipv6", O_IPV6 },
  { 0, "--http1.1", O_HTTP11 },
  { 0, "--http2", O_HTTP2 },
  { 0, "--limit-rate", O_LIMIT_RATE },
  { 0, "--max-filesize", O_MAX_FILESIZE },
  { 0, "--fail-early", O_FAIL_EARLY },
  { 0, "--tlsv1.2", O_TLS12 },
  { 0, "--tlsv1.3", O_TLS13 },
  /* curl's retry options, mapped onto the policy (retryopts.c) */
  { 0, "--retry", O_RETRY },
  { 0, "--retry-delay", O_RETRY_DELAY },
  { 0, "--retry-connrefused", O_RETRY_CONNREFUSED },
  { 0, "--retry-all-errors", O_RETRY_ALL_ERRORS },
  /* a command's rules without Lua (retryopts.c) */
  { 0, "--retry-on-exit", O_RETRY_ON_EXIT },
  { 0, "--final-on-exit", O_FINAL_ON_EXIT },
  { 0, "--retry-if-output", O_RETRY_IF_OUTPUT },
  { 0, "--final-if-output", O_FINAL_IF_OUTPUT },
  { 0, "--before-retry", O_BEFORE_RETRY },
  { 0, "--exit-status", O_EXIT_STATUS },
};
#define N_OPTIONS (sizeof OPTIONS / sizeof OPTIONS[0])

/* curl's options that luaretry does not take, and what to do instead (the
 * README's table says the same). */
static const char *const NOT_TAKEN[][2] = {
  { "--parallel-immediate", "luaretry starts every transfer it may at once already" },
  { "--proto", "luaretry speaks http and https only, redirects included" },
  { "--netrc", "give -u USER:PASSWORD, or put it in a -K FILE" },
  { "--netrc-optional", "give -u USER:PASSWORD, or put it in a -K FILE" },
  { "-n", "give -u USER:PASSWORD, or put it in a -K FILE" },
};
#define N_NOT_TAKEN (sizeof NOT_TAKEN / sizeof NOT_TAKEN[0])

static const run_option *find_long(const char *name) {
  for (size_t k = 0; k < N_OPTIONS; k++)
    if (OPTIONS[k].long_name && strcmp(OPTIONS[k].long_name, name) == 0) return &OPTIONS[k];
  return NULL;
}

static const run_option *find_short(char c) {
  for (size_t k = 0; k < N_OPTIONS; k++)
    if (OPTIONS[k].short_name == c) return &OPTIONS[k];
  return NULL;
}

/* An option luaretry does not know: why, when it is one of curl's. */
static int unknown(const char *opt) {
  for (size_t k = 0; k < N_NOT_TAKEN; k++) {
    if (strcmp(NOT_TAKEN[k][0], opt) != 0) continue;
    char what[256];
    snprintf(what, sizeof what, "run: curl's %s is not taken: %s", opt, NOT_TAKEN[k][1]);
    return cli_usage("%s", what);
  }
  return cli_usage("run: unknown option %s", opt);
}

/* The options' numbers are read by the one rule (number.c, luaretry(1)
 * NUMBERS), and refused naming the option as typed: a usage error. */
static int set_parallel(run_args *a, const char *opt, const char *v) {
  long long n;
  if (!cli_whole(v, 1, MAX_PARALLEL, &n))
    return cli_number_usage("run", opt, v, "a whole number from 1 to 1000");
  a->parallel = (long)n;
  return 0;
}

static int set_seed(run_args *a, const char *opt, const char *v) {
  if (!cli_seed(v, &a->seed)) return cli_number_usage("run", opt, v, "a whole number, 0 or more");
  a->has_seed = 1;
  return 0;
}

/* Seconds, 0 or more (as curl's, at most 1e9); -1 if not. */
static double seconds(const char *v) {
  double s;
  return cli_decimal(v, &s) && s >= 0 && s <= 1e9 ? s : -1;
}

/* One override; `from`: the option that stands for it (its long name, or
 * NULL for --set itself), for a policy that does not load with it. */
static int add_set(run_args *a, char *v, const char *opt) {
  if (a->nsets == MAX_SETS) return cli_usage("run: too many --set", NULL);
  const run_option *o = !opt ? NULL : opt[1] == '-' ? find_long(opt) : find_short(opt[1]);
  a->set_from[a->nsets] = o ? o->long_name : NULL;
  a->sets[a->nsets++] = v;
  return 0;
}

/* The overrides an earlier `long_name` made, taken out (curl's last
 * --retry-delay wins, a 0 too). */
static void drop_sets_from(run_args *a, const char *long_name) {
  int kept = 0;
  for (int i = 0; i < a->nsets; i++) {
    if (a->set_from[i] && strcmp(a->set_from[i], long_name) == 0) continue;
    a->set_from[kept] = a->set_from[i];
    a->sets[kept++] = a->sets[i];
  }
  a->nsets = kept;
}

/* --max-time and --retry-max-time are the policy's attempt_timeout and
 * deadline, set in their place among the --set overrides (a later one
 * wins); 0 is curl's "no limit". */
static int set_time(run_args *a, const char *opt, const char *field, const char *v) {
  double s = seconds(v);
  if (s < 0) return cli_number_usage("run", opt, v, "seconds, 0 (none) or more");
  if (a->ntimes == MAX_TIMES) return cli_usage("run: too many time limits", NULL);
  char *set = a->times[a->ntimes++];
  snprintf(set, TIME_SET_SIZE, "%s=%s", field, s == 0 ? "none" : v);
  return add_set(a, set, opt);
}

/* A secret's value copied, and its word in argv blanked as curl blanks
 * it (spaces), so that /proc/PID/cmdline and ps show it no longer for the
 * run's life; the copy is what the run uses.  v itself when out of room. */
static char *hide(run_args *a, char *v) {
  char *copy = a->nsecrets < (int)(sizeof a->secrets / sizeof a->secrets[0]) ? strdup(v) : NULL;
  if (!copy) return v;
  a->secrets[a->nsecrets++] = copy;
  memset(v, ' ', strlen(v));
  return copy;
}

/* Whether a -H line carries a credential: Authorization, Cookie, and
 * Proxy-Authorization (what -v redacts too). */
static int secret_header(const char *line) {
  static const char *const NAMES[] = { "authorization", "cookie", "proxy-authorization" };
  size_t n = strcspn(line, ":;");
  while (n && (line[n - 1] == ' ' || line[n - 1] == '\t')) n--;
  for (size_t k = 0; k < sizeof NAMES / sizeof NAMES[0]; k++)
    if (strlen(NAMES[k]) == n && strncasecmp(line, NAMES[k], n) == 0) return 1;
  return 0;
}

static int add_header(run_args *a, char *v) {
  if (a->nheaders == MAX_HEADERS) return cli_usage("run: too many -H", NULL);
  if (!strchr(v, ':') && (!v[0] || v[strlen(v) - 1] != ';'))
    return cli_usage("run: -H '%s': expected 'Name: value'", v);
  a->headers[a->nheaders++] = secret_header(v) ? hide(a, v) : v;
  return 0;
}

static int add_data(run_args *a, data_kind kind, const char *v) {
  if (a->ndata == MAX_DATA) return cli_usage("run: too many -d", NULL);
  data_part *part = &a->data_parts[a->ndata];
  part->kind = kind;
  part->arg = v;
  snprintf(part->opt, sizeof part->opt, "%s", a->typed[0] ? a->typed : "-d");
  part->typed = v;
  a->ndata++;
  if (!a->data) a->data = v;
  return 0;
}

static int set_redirs(run_args *a, const char *opt, const char *v) {
  long long n;
  if (!cli_whole(v, -1, LONG_MAX, &n))
    return cli_number_usage("run", opt, v, "a whole number (-1: no limit)");
  a->max_redirs = (long)n;
  return 0;
}

/* The option being read, as typed, into `into` when it is the first of
 * its kind (a workflow's refusal names it). */
static void typed_as(run_args *a, char *into) {
  if (!into[0]) snprintf(into, sizeof a->typed, "%s", a->typed);
}

/* The overrides of curl's retry options and a command's rules
 * (retryopts.c), "field=value" each, in their place among the --set ones. */
static int add_retry_sets(run_args *a, const retry_sets *s, const char *opt) {
  for (int k = 0; k < s->n; k++) {
    size_t n = strlen(s->field[k]) + strlen(s->value[k]) + 2;
    char *set = run_args_keep(a, malloc(n));
    if (!set) return cli_usage("run: out of memory", NULL);
    snprintf(set, n, "%s=%s", s->field[k], s->value[k]);
    int status = add_set(a, set, opt);
    if (status) return status;
  }
  return 0;
}

static int set_flag(run_args *a, option_id id) {
  switch (id) {
  case O_VERBOSE: a->verbosity = 2; break;
  case O_QUIET: a->verbosity = 0, a->show_error = 1; break; /* curl's -sS */
  case O_SILENT: a->verbosity = 0; break;
  case O_SHOW_ERROR: a->show_error = 1; break;
  case O_STATS: a->stats = 1; break;
  case O_STATS_JSON: a->stats = 2; break;
  case O_LOCATION: a->location = 1; break;
  case O_LOCATION_TRUSTED: a->location = a->location_trusted = 1; break;
  case O_INSECURE: a->insecure = 1; break;
  case O_COMPRESSED: a->compressed = 1; break;
  case O_INCLUDE: a->include = 1; break;
  case O_FAIL: a->fail = 1; break;
  case O_HEAD:
    a->method = "HEAD", a->include = 1;
    typed_as(a, a->method_opt);
    break;
  case O_STDOUT_LIVE: a->stdout_live = 1; break;
  case O_STDOUT_FINAL: a->stdout_live = 0; break;
  case O_CREATE_DIRS: a->create_dirs = 1; break;
  case O_FAIL_WITH_BODY: a->fail_with_body = 1; break;
  case O_REMOTE_NAME:
    a->remote_name = 1;
    typed_as(a, a->remote_opt);
    break;
  case O_REMOTE_NAME_ALL:
    if (!a->remote_name) a->remote_name = 2; /* -o still names its own URL's file */
    typed_as(a, a->remote_opt);
    break;
  case O_GET: a->get = 1; break;
  case O_PARALLEL_CURL:
    a->parallel_z = 1;
    typed_as(a, a->parallel_opt);
    break;
  case O_NO_PROGRESS: a->progress = PROGRESS_OFF; break;
  case O_PROGRESS_BAR: a->progress = PROGRESS_BAR; break;
  case O_REMOTE_HEADER_NAME: a->remote_header_name = 1; break;
  case O_NO_BUFFER: break;               /* the body is written as it comes already */
  case O_GLOBOFF: a->globoff = 1; break; /* URLs are never globbed: -o's #N as it is */
  case O_IPV4: a->ip_version = 4; break;
  case O_IPV6: a->ip_version = 6; break;
  case O_HTTP11: a->http_version = 11; break;
  case O_HTTP2: a->http_version = 2; break;
  case O_FAIL_EARLY: a->fail_early = 1; break;
  case O_TLS12: a->tls_min = 12; break;
  case O_TLS13: a->tls_min = 13; break;
  case O_RETRY_CONNREFUSED: break; /* every shipped policy retries a refused connection */
  case O_RETRY_ALL_ERRORS: {
    retry_sets s = { .n = 0 };
    retryopts_all_errors(&s);
    return add_retry_sets(a, &s, "--retry-all-errors");
  }
  default: break;
  }
  return 0;
}

/* --speed-limit BYTES (a whole number, 1 or more) and --speed-time
 * SECONDS (above 0): the policy's stall_speed and stall_timeout, set among
 * the --set overrides.  curl's 0 ("off") is refused: --set stall_timeout=none
 * says that. */
static int set_speed(run_args *a, option_id id, const char *opt, const char *v) {
  double x;
  int whole = id == O_SPEED_LIMIT;
  if (!cli_decimal(v, &x) || !(x > 0) || x > 1e12 || (whole && x != floor(x)))
    return cli_number_usage("run", opt, v,
                            whole ? "bytes per second, a whole number above 0" : "seconds above 0");
  if (a->ntimes == MAX_TIMES) return cli_usage("run: too many time limits", NULL);
  char *set = a->times[a->ntimes++];
  snprintf(set, TIME_SET_SIZE, "%s=%s", whole ? "stall_speed" : "stall_timeout", v);
  if (whole)
    a->speed_limit = (long)x;
  else
    a->speed_time = x;
  return add_set(a, set, opt);
}

char *run_args_keep(run_args *a, char *s) {
  if (!s) return NULL;
  if (a->nowned == a->capowned) {
    int cap = a->capowned ? 2 * a->capowned : 16;
    char **o = realloc(a->owned, (size_t)cap * sizeof *o);
    if (!o) {
      free(s);
      return NULL;
    }
    a->owned = o;
    a->capowned = cap;
  }
  return a->owned[a->nowned++] = s;
}

void run_args_free(run_args *a) {
  for (int i = 0; i < a->nsecrets; i++) free(a->secrets[i]);
  a->nsecrets = 0;
  for (int i = 0; i < a->nowned; i++) free(a->owned[i]);
  free(a->owned);
  a->owned = NULL;
  a->nowned = a->capowned = 0;
}

/* A URL (or run()'s argument); -K's lines may add more than the command
 * line has words, so the list grows. */
static int add_word(run_args *a, char *s) {
  if (a->nwords == a->capwords) {
    int cap = a->capwords * 2 + 16;
    char **w = malloc((size_t)cap * sizeof *w);
    if (!w || !run_args_keep(a, (char *)w)) return cli_usage("run: out of memory", NULL);
    memcpy(w, a->words, (size_t)a->nwords * sizeof *w);
    a->words = w;
    a->capwords = cap;
  }
  a->words[a->nwords++] = s;
  return 0;
}

/* One line of a -K file, as if on the command line. */
static int config_line(void *ud, int n, char **words, const char *path, long line) {
  run_args *a = ud;
  for (int k = 0; k < n; k++)
    if (!run_args_keep(a, words[k])) {
      if (k == 0 && n == 2) free(words[1]);
      return cli_usage("run: out of memory", NULL);
    }
  char where[512];
  snprintf(where, sizeof where, "-K %s, line %ld", path, line);
  const char *outer = cli_usage_where(where); /* a -K line may read another -K */
  int i = 0, status = parse_word(a, n, words, &i);
  cli_usage_where(outer);
  if (status == 0 && i + 1 < n) {
    char what[512];
    snprintf(what, sizeof what, "run: -K %s, line %ld: %s takes no value", path, line, words[0]);
    return cli_usage("%s", what);
  }
  return status;
}

/* -K FILE: its options in its place among the command line's. */
static int read_config(run_args *a, const char *path) {
  if (a->config_depth >= 8) return cli_usage("run: -K %s: nested too deep", path);
  a->config_depth++;
  if (strcmp(path, "-") == 0) a->config_stdin = 1;
  int status = config_words(path, config_line, a);
  a->config_depth--;
  return status;
}

/* -T FILE: a PUT of the file as it is (--data-binary @FILE). */
static int set_upload_file(run_args *a, const char *v) {
  if (!v[0]) return cli_usage("run: %s '': expected a file (- for standard input)", a->typed);
  size_t n = strlen(v) + 2;
  char *at = run_args_keep(a, malloc(n));
  if (!at) return cli_usage("run: -T: out of memory", NULL);
  snprintf(at, n, "@%s", v);
  a->upload_file = v;
  int status = add_data(a, DATA_BINARY, at);
  if (status == 0) a->data_parts[a->ndata - 1].typed = v;
  return status;
}

/* --checksum ALG=HEX: aria2c's form (sha-256, sha-512 or md5, the hex
 * of that many bytes). */
static int set_checksum(run_args *a, char *v) {
  static const struct {
    const char *name;
    size_t hex;
  } ALGS[] = { { "sha-256=", 64 }, { "sha-512=", 128 }, { "md5=", 32 } };
  for (size_t k = 0; k < sizeof ALGS / sizeof ALGS[0]; k++) {
    size_t n = strlen(ALGS[k].name);
    if (strncasecmp(v, ALGS[k].name, n) != 0) continue;
    if (strlen(v + n) != ALGS[k].hex || strspn(v + n, "0123456789abcdefABCDEF") != ALGS[k].hex)
      return cli_usage("run: --checksum %s: expected the digest as hex of its length", v);
    a->checksum = v;
    return 0;
  }
  return cli_usage("run: --checksum %s: expected sha-256=HEX, sha-512=HEX or md5=HEX", v);
}

/* --resolve as libcurl reads it when a transfer starts (7.88's
 * Curl_loadhostpairs): [+]HOST:PORT:ADDRESS[,ADDRESS]..., PORT at most
 * 65535, each ADDRESS IPv4 or IPv6 ([v6] too), one at least; -HOST:PORT
 * removes, and libcurl takes any.  Checked here, a bad entry stops the run
 * before any attempt: libcurl would fail each attempt with
 * CURLE_SETOPT_OPTION_SYNTAX.  0 or a usage status. */
static int resolve_check(const char *v) {
  const char *host = v + (v[0] == '+'), *colon = strchr(host, ':'), *p = colon ? colon + 1 : NULL;
  unsigned long port = 0;
  if (v[0] == '-') return 0;
  if (!colon || colon - host >= 256 || !isdigit((unsigned char)*p))
    return cli_usage("run: --resolve %s: expected HOST:PORT:ADDRESS", v);
  for (; isdigit((unsigned char)*p) && port <= 65535; p++)
    port = port * 10 + (unsigned long)(*p - '0');
  if (port > 65535) return cli_usage("run: --resolve %s: the port is above 65535", v);
  if (*p != ':') return cli_usage("run: --resolve %s: expected HOST:PORT:ADDRESS", v);
  int addresses = 0;
  for (const char *s = p + 1;; s++) {
    size_t len = strcspn(s, ","), n = len;
    const char *addr = s;
    char ip[64];
    unsigned char bin[16];
    if (n > 0 && addr[0] == '[') { /* an IPv6 address in brackets */
      if (n < 2 || addr[n - 1] != ']') return cli_usage("run: --resolve %s: an unclosed [", v);
      addr++, n -= 2;
    }
    if (n >= sizeof ip)
      return cli_usage("run: --resolve %s: an address longer than an IP address", v);
    memcpy(ip, addr, n);
    ip[n] = '\0';
    if (n > 0 && inet_pton(AF_INET, ip, bin) != 1 && inet_pton(AF_INET6, ip, bin) != 1)
      return cli_usage("run: --resolve %s: an address that is not an IPv4 or IPv6 address", v);
    addresses += n > 0;
    s += len;
    if (!*s) break;
  }
  return addresses ? 0 : cli_usage("run: --resolve %s: no address", v);
}

/* -x as libcurl reads it when a transfer starts (7.88's parse_proxy): a
 * URL, its scheme guessed when missing, one of those libcurl proxies
 * with.  Checked here, a bad one stops the run before any attempt:
 * libcurl would fail each attempt as a transport error (7, or 5).  ""
 * asks for no proxy.  0 or a usage status. */
static int proxy_check(const char *opt, const char *v) {
  static const char *const SCHEMES[] = { "http",    "https",  "socks",  "socks4",
                                         "socks4a", "socks5", "socks5h" };
  if (!v[0]) return 0;
  CURLU *u = curl_url();
  char *scheme = NULL, why[300];
  why[0] = '\0';
  CURLUcode uc =
    !u ? CURLUE_OUT_OF_MEMORY
       : curl_url_set(u, CURLUPART_URL, v, CURLU_NON_SUPPORT_SCHEME | CURLU_GUESS_SCHEME);
  if (uc == CURLUE_OK) uc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
  if (uc != CURLUE_OK) snprintf(why, sizeof why, "not a proxy URL (%s)", curl_url_strerror(uc));
  int known = 0;
  for (size_t k = 0; scheme && k < sizeof SCHEMES / sizeof SCHEMES[0]; k++)
    known |= strcasecmp(scheme, SCHEMES[k]) == 0;
  if (scheme && !known)
    snprintf(why, sizeof why,
             "the scheme %.40s is no proxy's (http, https, socks4, socks4a, socks5, socks5h)",
             scheme);
  else if (scheme && strcasecmp(scheme, "https") == 0 &&
           !(curl_version_info(CURLVERSION_NOW)->features & CURL_VERSION_HTTPS_PROXY))
    snprintf(why, sizeof why, "this libcurl has no HTTPS proxy");
  curl_free(scheme);
  curl_url_cleanup(u);
  if (!why[0]) return 0;
  char shown[600];
  snprintf(shown, sizeof shown, "run: %s %.200s: %s", opt, v, why);
  return cli_usage("%s", shown);
}

/* The options of downloads, uploads, cookies and connections that curl
 * scripts use with --retry. */
static int take_curl_value(run_args *a, option_id id, const char *opt, char *v) {
  switch (id) {
  case O_SPEED_LIMIT:
  case O_SPEED_TIME: return set_speed(a, id, opt, v);
  case O_CONTINUE_AT:
    if (strcmp(v, "-") != 0)
      return cli_usage("run: -C %s: only -C - (continue where the -o file ends) is taken", v);
    a->continue_at = 1;
    return 0;
  case O_CHECKSUM: return set_checksum(a, v);
  case O_UPLOAD_FILE: return set_upload_file(a, v);
  case O_FORM:
  case O_FORM_STRING:
    if (a->nforms == MAX_FORMS) return cli_usage("run: too many -F", NULL);
    if (!strchr(v, '=') || v[0] == '=')
      return cli_usage("run: -F '%s': expected NAME=VALUE, NAME=@FILE or NAME=<FILE", v);
    a->form_string[a->nforms] = id == O_FORM_STRING;
    typed_as(a, a->form_opt);
    a->forms[a->nforms++] = v;
    return 0;
  case O_COOKIE: a->cookie = v; return 0;
  case O_COOKIE_JAR: a->cookie_jar = v; return 0;
  case O_RESOLVE:
    if (a->nresolve == MAX_RESOLVE) return cli_usage("run: too many --resolve", NULL);
    if (resolve_check(v) != 0) return EXIT_USAGE;
    a->resolve[a->nresolve++] = v;
    return 0;
  case O_PROXY:
    if (proxy_check(opt, v) != 0) return EXIT_USAGE;
    a->proxy = v;
    return 0;
  case O_CONFIG: return read_config(a, v);
  case O_PARALLEL_MAX: typed_as(a, a->parallel_opt); return set_parallel(a, opt, v);
  case O_URL: return add_word(a, v);
  case O_REFERER: a->referer = v; return 0;
  case O_LIMIT_RATE: return retryopts_size(opt, v, &a->limit_rate);
  case O_MAX_FILESIZE: return retryopts_size(opt, v, &a->max_filesize);
  case O_RETRY:
  case O_RETRY_DELAY:
  case O_RETRY_ON_EXIT:
  case O_FINAL_ON_EXIT:
  case O_RETRY_IF_OUTPUT:
  case O_FINAL_IF_OUTPUT:
  case O_BEFORE_RETRY:
  case O_EXIT_STATUS: {
    retry_sets s = { .n = 0 };
    int status = id == O_RETRY || id == O_RETRY_DELAY ? retryopts_curl(&s, opt, v)
                                                      : retryopts_command(a, &s, opt, v);
    if (!status && id == O_RETRY_DELAY) drop_sets_from(a, "--retry-delay");
    return status ? status : add_retry_sets(a, &s, opt);
  }
  default: return 0;
  }
}

/* One option that takes a value, and its value; 0 or a usage status. */
static int take_value(run_args *a, option_id id, const char *opt, char *v) {
  if (id == O_DATA || id == O_DATA_BINARY || id == O_DATA_RAW) typed_as(a, a->data_opt);
  switch (id) {
  case O_REQUEST:
    a->method = v;
    typed_as(a, a->method_opt);
    break;
  case O_HEADER: return add_header(a, v);
  case O_DATA: return add_data(a, DATA_ASCII, v);
  case O_DATA_BINARY: return add_data(a, DATA_BINARY, v);
  case O_DATA_RAW: return add_data(a, DATA_RAW, v);
  case O_OUTPUT:
    if (!v[0]) return cli_usage("run: %s '': expected a file (- for standard output)", opt);
    /* curl writes the first and warns; one of two would be lost here */
    /* curl pairs each -o with a URL: not taken, and said what is */
    if (a->output)
      return cli_usage(
        "run: %s given twice: it names one URL's file (not one for each URL, "
        "as curl's); several URLs' bodies go to -O or --output-dir DIR",
        opt);
    a->output = v;
    break;
  case O_USER:
    if (!strchr(v, ':'))
      return cli_usage("run: -u %s: expected USER:PASSWORD (luaretry does not prompt)", v);
    a->user = hide(a, v);
    break;
  case O_USER_AGENT: a->user_agent = v; break;
  case O_CACERT: a->cacert = v; break;
  case O_CERT: a->cert = v; break;
  case O_KEY: a->key = v; break;
  case O_MAX_REDIRS: return set_redirs(a, opt, v);
  case O_DUMP_HEADER:
    if (!v[0]) return cli_usage("run: %s '': expected a file (- for standard output)", opt);
    a->dump_header = v;
    break;
  case O_WRITE_OUT: a->write_out = v; break;
  case O_MAX_TIME: return set_time(a, opt, "attempt_timeout", v);
  case O_RETRY_MAX_TIME: return set_time(a, opt, "deadline", v);
  case O_CONNECT_TIMEOUT:
    if ((a->connect_timeout = seconds(v)) < 0)
      return cli_number_usage("run", opt, v, "seconds, 0 (the attempt's) or more");
    return set_time(a, opt, "connect_timeout", v);
  case O_SEED: return set_seed(a, opt, v);
  case O_SET: return add_set(a, v, NULL);
  case O_LOG_JSON: a->log_json = v; break;
  case O_URLS:
    /* the first list would be dropped without a word */
    if (a->urls_file)
      return cli_usage("run: --urls given twice: one list (cat A B | luaretry run --urls -)%s", "");
    a->urls_file = v;
    break;
  case O_OUTPUT_DIR: a->output_dir = v; break;
  case O_REDIS: a->redis = hide(a, v); break;
  case O_FLEET: a->fleet = v; break;
  case O_METRICS_FILE: a->metrics_file = v; break;
  case O_TRACE_ASCII: a->trace_ascii = v; break;
  default: return take_curl_value(a, id, opt, v);
  }
  return 0;
}

/* The options only a URL's transfer reads (run.c's workflow_refused):
 * the first one typed is the one a workflow's refusal names. */
static int url_only(option_id id) {
  static const option_id ids[] = { O_UPLOAD_FILE,
                                   O_FORM,
                                   O_FORM_STRING,
                                   O_GET,
                                   O_REQUEST,
                                   O_HEAD,
                                   O_DATA,
                                   O_DATA_BINARY,
                                   O_DATA_RAW,
                                   O_HEADER,
                                   O_INCLUDE,
                                   O_DUMP_HEADER,
                                   O_WRITE_OUT,
                                   O_FAIL,
                                   O_FAIL_WITH_BODY,
                                   O_FAIL_EARLY,
                                   O_URLS,
                                   O_OUTPUT_DIR,
                                   O_PARALLEL_CURL,
                                   O_PARALLEL_MAX,
                                   O_MAX_FILESIZE,
                                   O_CONTINUE_AT,
                                   O_CHECKSUM,
                                   O_REMOTE_NAME,
                                   O_REMOTE_NAME_ALL,
                                   O_REMOTE_HEADER_NAME };
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
    if (ids[i] == id) return 1;
  return 0;
}

/* argv[*i], a long option; *i moves past its value. */
static int parse_long(run_args *a, int argc, char **argv, int *i) {
  const run_option *o = find_long(argv[*i]);
  if (!o) return unknown(argv[*i]);
  if (o->id == O_PARALLEL_CURL && *i + 1 < argc && argv[*i + 1][0] &&
      strspn(argv[*i + 1], "0123456789") == strlen(argv[*i + 1]))
    return cli_usage("run: --parallel is curl's flag (-Z) and takes no number: --parallel-max %s",
                     argv[*i + 1]);
  snprintf(a->typed, sizeof a->typed, "%s", o->long_name);
  if (url_only(o->id)) typed_as(a, a->url_only_opt);
  if (o->id < O_REQUEST) return set_flag(a, o->id);
  if (*i + 1 >= argc) return cli_usage("run: %s needs a value", o->long_name);
  *i += 1;
  return take_value(a, o->id, o->long_name, argv[*i]);
}

/* argv[*i], short options bundled (-sSL) and a value attached (-XPUT) or
 * in the next word (-X PUT). */
static int parse_short(run_args *a, int argc, char **argv, int *i) {
  const char *s = argv[*i];
  for (int j = 1; s[j]; j++) {
    const run_option *o = find_short(s[j]);
    if (!o) {
      char opt[3] = { '-', s[j], '\0' };
      return unknown(j == 1 && !s[2] ? opt : s);
    }
    snprintf(a->typed, sizeof a->typed, "-%c", o->short_name);
    if (url_only(o->id)) typed_as(a, a->url_only_opt);
    if (o->id < O_REQUEST) {
      int status = set_flag(a, o->id);
      if (status) return status;
      continue;
    }
    char opt[3] = { '-', o->short_name, '\0' };
    if (s[j + 1]) return take_value(a, o->id, opt, argv[*i] + j + 1);
    if (*i + 1 >= argc) return cli_usage("run: %s needs a value", opt);
    *i += 1;
    return take_value(a, o->id, opt, argv[*i]);
  }
  return 0;
}

/* -F's boundary, random so no part's bytes can contain it by chance, and
 * the Content-Type header that names it (form.c builds the body). */
void form_header_make(run_args *a) {
  unsigned char r[12] = { 0 };
  if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
    for (size_t i = 0; i < sizeof r; i++) r[i] = (unsigned char)(getpid() * 31 + (int)i * 7);
  char hex[25];
  for (size_t i = 0; i < sizeof r; i++) snprintf(hex + 2 * i, 3, "%02x", r[i]);
  snprintf(a->form_boundary, sizeof a->form_boundary, "------------------------%s", hex);
  snprintf(a->form_header, sizeof a->form_header, "Content-Type: multipart/form-data; boundary=%s",
           a->form_boundary);
  if (a->nheaders < MAX_HEADERS) a->headers[a->nheaders++] = a->form_header;
}

/* Whether -H gives a header of that (lower-case) name. */
static int has_header(const run_args *a, const char *name) {
  size_t n = strlen(name);
  for (int i = 0; i < a->nheaders; i++)
    if (strncasecmp(a->headers[i], name, n) == 0 && strchr(":;", a->headers[i][n])) return 1;
  return 0;
}

/* The same for curl's download, upload and cookie options. */
static int check_curl_combinations(run_args *a) {
  if (a->remote_header_name && !a->remote_name)
    return cli_usage("run: -J goes with -O (or --remote-name-all), as in curl%s", "");
  if (a->nforms && a->data) return cli_usage("run: -F or -d (or -T), not both", NULL);
  if (a->upload_file && a->ndata > 1) return cli_usage("run: -T or -d, not both", NULL);
  if (a->get && a->upload_file) return cli_usage("run: -G or -T, not both", NULL);
  if (a->get && a->nforms) return cli_usage("run: -G or -F, not both", NULL);
  if (a->remote_name == 1 && a->output) return cli_usage("run: -O or -o, not both", NULL);
  if (a->continue_at && !a->output && !a->remote_name)
    return cli_usage("run: -C - continues a file: it goes with -o FILE or -O", NULL);
  if (a->upload_file && !a->method) a->method = "PUT";
  if (a->upload_file && !has_header(a, "content-type") && a->nheaders < MAX_HEADERS) {
    /* none, as curl -T sends: libcurl gives the body it sends as a POST's
     * the form encoding's type unless told to send none ("Name:") */
    char *ct = run_args_keep(a, strdup("Content-Type:"));
    if (ct) a->headers[a->nheaders++] = ct;
  }
  if (a->nforms) {
    form_header_make(a);
    a->data = a->forms[0]; /* a body, POST unless -X */
  }
  if (a->get) a->data = NULL;                          /* the data goes in the query: no body */
  if (a->parallel_z && !a->parallel) a->parallel = 50; /* curl's --parallel-max default */
  return 0;
}

/* path's folder resolved, then its last name ("./x" and "x" alike), or
 * path itself when the folder cannot be. */
void run_canonical(const char *path, char *out, size_t size) {
  char dir[PATH_MAX], real[PATH_MAX];
  path_folder(path, dir, sizeof dir);
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  if (realpath(dir, real))
    snprintf(out, size, "%s/%s", real, base);
  else
    snprintf(out, size, "%s", path);
}

/* Whether two outputs name one file: by their names, or one file reached
 * by two.  Standard output ("-") is checked elsewhere. */
static int same_file(const char *x, const char *y) {
  if (!x || !y || strcmp(x, "-") == 0 || strcmp(y, "-") == 0) return 0;
  char cx[2 * PATH_MAX], cy[2 * PATH_MAX];
  run_canonical(x, cx, sizeof cx);
  run_canonical(y, cy, sizeof cy);
  if (strcmp(cx, cy) == 0) return 1;
  struct stat sx, sy;
  return stat(x, &sx) == 0 && stat(y, &sy) == 0 && sx.st_dev == sy.st_dev &&
         sx.st_ino == sy.st_ino && S_ISREG(sx.st_mode);
}

int run_outputs(const run_args *a, run_output *outs) {
  const run_output all[RUN_OUTPUTS] = { { "--urls", a->urls_file },
                                        { a->output_by_url ? a->remote_opt : "-o", a->output },
                                        { "-D", a->dump_header },
                                        { "--log-json", a->log_json },
                                        { "--metrics-file", a->metrics_file },
                                        { "--trace-ascii", a->trace_ascii },
                                        { "-c", a->cookie_jar } };
  int n = 0;
  for (int i = 0; i < RUN_OUTPUTS; i++)
    if (all[i].path && strcmp(all[i].path, "-") != 0) outs[n++] = all[i];
  return n;
}

/* Two of the files written at the end naming one: the later would write
 * over the earlier (-o X -D X kept only the headers); or one of them the
 * list of URLs, read as the batch goes (--log-json emptied it first). */
int run_check_outputs(const run_args *a) {
  run_output outs[RUN_OUTPUTS];
  int n = run_outputs(a, outs);
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (same_file(outs[i].path, outs[j].path)) {
        char what[64];
        snprintf(what, sizeof what, "%s and %s", outs[i].opt, outs[j].opt);
        return cli_usage("run: %s name the same file: one would write over the other", what);
      }
  /* a body's file the log or the trace, opened at the start, would empty
   * before it is read (an empty body went) */
  for (int k = 0; k < a->ndata; k++) {
    const data_part *d = &a->data_parts[k];
    if (d->kind == DATA_RAW || d->arg[0] != '@') continue;
    const char *opt = same_file(d->arg + 1, a->log_json)      ? "--log-json"
                      : same_file(d->arg + 1, a->trace_ascii) ? "--trace-ascii"
                                                              : NULL;
    if (opt) {
      char what[64];
      snprintf(what, sizeof what, "%s and %s", d->opt[0] ? d->opt : "-d", opt);
      return cli_usage("run: %s name the same file: the body would be lost", what);
    }
  }
  return 0;
}

/* -o FILE naming #N, curl's place for what URL glob N matched: luaretry
 * takes URLs literally, as curl -g does, so there is nothing to put there
 * (a file named f_#1.txt was written, for the one literal URL).  With -g,
 * as curl's, the name is taken as it is.  0 or a usage status. */
static int output_glob(const run_args *a) {
  if (!a->output || a->globoff) return 0;
  const char *h = a->output;
  while ((h = strchr(h, '#')) && !(h[1] >= '1' && h[1] <= '9')) h++;
  if (!h) return 0;
  char what[CLI_PATH_MAX + 256];
  snprintf(what, sizeof what,
           "run: -o %s: #%c is where curl puts what a URL glob matched, and luaretry takes "
           "URLs literally (as curl -g): give -g to write that name as it is",
           a->output, h[1]);
  return cli_usage("%s", what);
}

/* Options that do not go together. */
static int check_combinations(run_args *a) {
  int clash = run_check_outputs(a);
  if (clash) return clash;
  /* what follows -- is a command unless a POLICY named has run(): known
   * once it loads (run.c) */
  a->command_unsure = a->command && a->policy && !a->policy_defaulted;
  int kind = a->command_unsure ? 0 : run_check_kind(a);
  if (kind) return kind;
  if (!a->policy) return cli_usage("run: a URL, -- COMMAND or POLICY is needed", NULL);
  if (a->output && a->output_dir) return cli_usage("run: -o or --output-dir, not both", NULL);
  int glob = output_glob(a);
  if (glob) return glob;
  /* two readers of standard input: one would find it empty, said nowhere */
  const char *readers[4];
  int nreaders = 0;
  if (a->urls_file && strcmp(a->urls_file, "-") == 0) readers[nreaders++] = "--urls -";
  if (a->config_stdin) readers[nreaders++] = "-K -";
  if (a->data && strcmp(a->data, "@-") == 0)
    readers[nreaders++] = a->upload_file ? "-T -" : "-d @-";
  if (a->write_out && strcmp(a->write_out, "@-") == 0) readers[nreaders++] = "-w @-";
  if (nreaders > 1) {
    char both[64];
    snprintf(both, sizeof both, "%s and %s", readers[0], readers[1]);
    return cli_usage("run: %s cannot both read standard input", both);
  }
  if (a->key && !a->cert) return cli_usage("run: --key goes with --cert", NULL);
  if (a->fail && a->fail_with_body)
    return cli_usage("run: -f and --fail-with-body, not both (as in curl)", NULL);
  return check_curl_combinations(a);
}

/* The options of a command that is not one, or of a URL's transfer given
 * with a command. */
int run_check_kind(const run_args *a) {
  if (!a->command) {
    if (a->command_rules || a->before_retry || a->exit_command)
      return cli_usage(
        "run: --retry-on-exit, --final-on-exit, --retry-if-output, "
        "--final-if-output, --before-retry and --exit-status are for -- COMMAND%s",
        "");
    if (a->stdout_live)
      return cli_usage("run: --stdout=live is for -- COMMAND (a URL's body is never doubled)",
                       NULL);
    return 0;
  }
  if (!a->command[0]) return cli_usage("run: -- needs a COMMAND", NULL);
  if (a->nwords || a->urls_file) return cli_usage("run: a URL or a COMMAND, not both", NULL);
  if (a->method || a->data || a->nheaders || a->output || a->fail)
    return cli_usage("run: -X, -H, -d, -o and -f are for URLs, not commands", NULL);
  if (a->output_dir || a->parallel)
    return cli_usage("run: --parallel and --output-dir are for URLs, not commands", NULL);
  int url_only = a->include || a->dump_header || a->connect_timeout > 0 || a->location || a->user ||
                 a->insecure || a->cacert || a->cert || a->compressed || a->user_agent ||
                 a->speed_limit || a->speed_time > 0 || a->continue_at || a->checksum ||
                 a->remote_name || a->get || a->nforms || a->cookie || a->cookie_jar ||
                 a->nresolve || a->proxy || a->parallel_z || a->referer || a->ip_version ||
                 a->http_version || a->limit_rate || a->max_filesize || a->remote_header_name ||
                 a->fail_early || a->tls_min;
  if (url_only) return cli_usage("run: curl's options are for URLs, not commands", NULL);
  if (a->create_dirs || a->fail_with_body)
    return cli_usage("run: --create-dirs and --fail-with-body are for URLs, not commands", NULL);
  if (a->trace_ascii) return cli_usage("run: --trace-ascii is for URLs, not commands", NULL);
  return 0;
}

int run_args_workflow(run_args *a) {
  for (char **w = a->command; *w; w++) {
    int status = add_word(a, *w);
    if (status) return status;
  }
  a->command = NULL;
  a->command_unsure = 0;
  return run_check_kind(a);
}

int parse_word(run_args *a, int argc, char **argv, int *i) {
  char *s = argv[*i];
  if (s[0] == '-' && s[1] == '-') return parse_long(a, argc, argv, i);
  if (s[0] == '-' && s[1]) return parse_short(a, argc, argv, i);
  if (!a->policy && !a->nwords && !strstr(s, "://"))
    a->policy = s; /* the first word only */
  else
    return add_word(a, s);
  return 0;
}

/* No POLICY: `run -- COMMAND` takes the shipped `command`, `run URL` (a
 * word with "://" where POLICY goes) `http`, as a curl user expects. */
static void default_policy(run_args *a) {
  if (a->policy) return;
  if (a->command && !a->nwords)
    a->policy = "command", a->policy_defaulted = 1;
  else if ((a->nwords || a->urls_file) && !a->command)
    a->policy = "http", a->policy_defaulted = 1;
}

int parse_run(int argc, char **argv, run_args *a, char **words) {
  memset(a, 0, sizeof *a);
  a->words = words;
  a->capwords = argc;
  a->verbosity = 1;
  a->max_redirs = 50; /* curl's own default */
  static char *none[] = { NULL };
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      /* a command, or a workflow's arguments: run_check_kind() or run.c
       * decides, and an empty one is an error of a command's only */
      a->command = i + 1 < argc ? argv + i + 1 : none;
      break;
    }
    int status = parse_word(a, argc, argv, &i);
    if (status) return status;
  }
  default_policy(a);
  return check_combinations(a);
}

/* "Name: value"; as curl spells them, "Name;" for an empty header and
 * "Name:" with nothing after it for no header of that name at all (one
 * libcurl would send, such as Accept or Expect, removed): a NULL value. */
static void split_header(char *line, luaretry_header *h) {
  char *colon = strchr(line, ':');
  if (!colon) {
    line[strlen(line) - 1] = '\0';
    h->name = line;
    h->value = "";
    return;
  }
  *colon = '\0';
  char *v = colon + 1;
  while (*v == ' ' || *v == '\t') v++;
  h->name = line;
  h->value = *v ? v : NULL;
}

void split_headers(const run_args *a, luaretry_header *headers) {
  for (int i = 0; i < a->nheaders; i++) split_header(a->headers[i], &headers[i]);
}

luaretry_request run_request(const run_args *a, const char *url, const luaretry_header *headers,
                             const upload *body) {
  luaretry_request req;
  luaretry_request_init(&req);
  req.method = a->method ? a->method : (a->data ? "POST" : "GET");
  req.url = url;
  req.headers = headers;
  req.header_count = (size_t)a->nheaders;
  req.body = a->data ? body->data : NULL;
  req.body_len = body->len;
  return req;
}
