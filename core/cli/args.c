/* args.c: the command line of `luaretry run`, and the request it
 * describes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "run.h"

#define MAX_PARALLEL 1000

static const char *const WITH_VALUE[] = { "-X", "-H", "-d", "-o", "--seed", "--set",
                                          "--log-json", "--urls", "--output-dir",
                                          "--parallel", "--redis", NULL };

static int takes_value(const char *opt) {
  for (int k = 0; WITH_VALUE[k]; k++)
    if (strcmp(opt, WITH_VALUE[k]) == 0) return 1;
  return 0;
}

static int set_parallel(run_args *a, const char *v) {
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (end == v || *end || errno || n < 1 || n > MAX_PARALLEL)
    return cli_usage("run: --parallel %s: expected a whole number from 1 to 1000", v);
  a->parallel = n;
  return 0;
}

static int set_seed(run_args *a, const char *v) {
  char *end;
  errno = 0;
  unsigned long long seed = strtoull(v, &end, 10);
  if (end == v || *end || errno || v[0] == '-')
    return cli_usage("run: --seed %s: expected a whole number, 0 or more", v);
  a->seed = seed;
  a->has_seed = 1;
  return 0;
}

static int add_header(run_args *a, char *v) {
  if (a->nheaders == MAX_HEADERS) return cli_usage("run: too many -H", NULL);
  if (!strchr(v, ':') && (!v[0] || v[strlen(v) - 1] != ';'))
    return cli_usage("run: -H '%s': expected 'Name: value'", v);
  a->headers[a->nheaders++] = v;
  return 0;
}

/* One option of WITH_VALUE and its value; 0 or a usage status. */
static int take_value(run_args *a, const char *opt, char *v) {
  if (strcmp(opt, "-X") == 0) a->method = v;
  else if (strcmp(opt, "-d") == 0) a->data = v;
  else if (strcmp(opt, "-o") == 0) a->output = v;
  else if (strcmp(opt, "--log-json") == 0) a->log_json = v;
  else if (strcmp(opt, "--urls") == 0) a->urls_file = v;
  else if (strcmp(opt, "--output-dir") == 0) a->output_dir = v;
  else if (strcmp(opt, "--redis") == 0) a->redis = v;
  else if (strcmp(opt, "--parallel") == 0) return set_parallel(a, v);
  else if (strcmp(opt, "-H") == 0) return add_header(a, v);
  else if (strcmp(opt, "--set") == 0) {
    if (a->nsets == MAX_SETS) return cli_usage("run: too many --set", NULL);
    a->sets[a->nsets++] = v;
  } else return set_seed(a, v);
  return 0;
}

/* Options that do not go together. */
static int check_combinations(const run_args *a) {
  if (!a->policy) return cli_usage("run: which POLICY?", NULL);
  if ((a->nwords || a->urls_file) && a->command)
    return cli_usage("run: a URL or a COMMAND, not both", NULL);
  if (a->command && (a->method || a->data || a->nheaders || a->output))
    return cli_usage("run: -X, -H, -d and -o are for URLs, not commands", NULL);
  if (a->command && (a->output_dir || a->parallel))
    return cli_usage("run: --parallel and --output-dir are for URLs, not commands", NULL);
  if (a->output && a->output_dir) return cli_usage("run: -o or --output-dir, not both", NULL);
  if (a->urls_file && a->data && strcmp(a->urls_file, "-") == 0 && strcmp(a->data, "@-") == 0)
    return cli_usage("run: --urls - and -d @- cannot both read standard input", NULL);
  return 0;
}

int parse_run(int argc, char **argv, run_args *a, char **words) {
  memset(a, 0, sizeof *a);
  a->words = words;
  a->verbosity = 1;
  for (int i = 0; i < argc; i++) {
    char *s = argv[i];
    int status = 0;
    if (strcmp(s, "--") == 0) {
      if (i + 1 >= argc) return cli_usage("run: -- needs a COMMAND", NULL);
      a->command = argv + i + 1;
      break;
    }
    if (strcmp(s, "-v") == 0) a->verbosity = 2;
    else if (strcmp(s, "-q") == 0) a->verbosity = 0;
    else if (strcmp(s, "--stats") == 0) a->stats = 1;
    else if (takes_value(s)) {
      if (i + 1 >= argc) return cli_usage("run: %s needs a value", s);
      status = take_value(a, s, argv[++i]);
    } else if (s[0] == '-' && s[1]) {
      return cli_usage("run: unknown option %s", s);
    } else if (!a->policy) {
      a->policy = s;
    } else {
      a->words[a->nwords++] = s;
    }
    if (status) return status;
  }
  return check_combinations(a);
}

/* "Name: value", or "Name;" for an empty header as curl spells it. */
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
  h->value = v;
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
