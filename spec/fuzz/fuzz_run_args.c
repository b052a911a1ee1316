/* fuzz_run_args.c: the command line of `luaretry run` (core/cli/run/args.c:
 * parse_run, split_headers, run_request) and the NAME=VALUE split of
 * --set (cli_split_set), on arbitrary words: the input cut at NUL bytes.
 * parse_run never exits: a usage error prints (standard error is closed
 * by -close_fd_mask=2) and returns EXIT_USAGE.  Invariants: 0 or
 * EXIT_USAGE; on 0 a policy, counts within their arrays, every pointer
 * one of the words. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/run/run.h"

#define MAX_WORDS 300

/* -K reads files (standard input too): not what this target explores. */
int config_words(const char *path, config_word_fn take, void *ud) {
  (void)path;
  (void)take;
  (void)ud;
  return 0;
} /* more than MAX_HEADERS and MAX_SETS together */

static int is_word(char **argv, int argc, const char *s) {
  for (int i = 0; i < argc; i++)
    if (argv[i] == s) return 1;
  return 0;
}

static void check_parsed(const run_args *a, char **argv, int argc) {
  if (!a->policy) abort();
  /* no POLICY given: the shipped one for what runs, else one of the words */
  if (a->policy_defaulted ? strcmp(a->policy, a->command ? "command" : "http") != 0
                          : !is_word(argv, argc, a->policy))
    abort();
  if (a->stdout_live && !a->command) abort();
  if (a->fail && a->fail_with_body) abort();
  if (a->nwords < 0 || a->nwords + !a->policy_defaulted > argc || a->nheaders > MAX_HEADERS ||
      a->nsets > MAX_SETS)
    abort();
  if (a->parallel < 0 || a->parallel > 1000 || a->verbosity < 0 || a->verbosity > 2) abort();
  for (int i = 0; i < a->nwords; i++)
    if (!is_word(argv, argc, a->words[i])) abort();
  /* after a POLICY named, what follows -- is a command or a workflow's
   * arguments, decided once the policy loads (command_unsure): words may
   * stand beside it, and a -- at the end leaves it empty */
  if (a->command && !(a->command_unsure && !a->command[0]) &&
      (a->command <= argv || a->command >= argv + argc))
    abort();
  if (a->command && !a->command_unsure && (a->nwords || a->urls_file)) abort();
  if (a->command_unsure && (!a->command || a->policy_defaulted)) abort();
}

/* What run.c does next with the options: --set split, -H split in place,
 * the request built. */
static void use_parsed(run_args *a) {
  for (int i = 0; i < a->nsets; i++) {
    char name[CLI_SET_NAME];
    const char *value;
    if (cli_split_set(a->sets[i], name, &value) == 0 &&
        (strlen(name) >= CLI_SET_NAME || !name[0] || !value))
      abort();
  }
  luaretry_header headers[MAX_HEADERS];
  split_headers(a, headers);
  for (int i = 0; i < a->nheaders; i++) {
    if (!headers[i].name) abort();
    /* a NULL value is a header removed: "Name:" with only blanks after */
    const char *after = headers[i].name + strlen(headers[i].name) + 1;
    if (!headers[i].value && after[strspn(after, " \t")]) abort();
  }
  upload body;
  memset(&body, 0, sizeof body);
  luaretry_request r = run_request(a, a->nwords ? a->words[0] : "http://x/", headers, &body);
  if (!r.method || !r.url || r.header_count != (size_t)a->nheaders) abort();
  /* a library message retold with "--set " before the lines of a set */
  if (a->nwords) free(cli_policy_message(a->words[a->nwords - 1], a->sets, a->nsets));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  char **argv = malloc(MAX_WORDS * sizeof *argv), **words = malloc(MAX_WORDS * sizeof *words);
  if (!text || !argv || !words) abort();
  memcpy(text, data, size);
  text[size] = '\0';
  int argc = 0;
  for (char *w = text; w <= text + size && argc < MAX_WORDS; w += strlen(w) + 1) argv[argc++] = w;
  if (size == 0) argc = 0;
  run_args a;
  int st = parse_run(argc, argv, &a, words);
  if (st != 0 && st != EXIT_USAGE) abort();
  if (st == 0) {
    check_parsed(&a, argv, argc);
    use_parsed(&a);
  }
  run_args_free(&a); /* the copies of the secrets it blanked */
  free(words);
  free(argv);
  free(text);
  return 0;
}
