/* test_errors.c: error codes and their names, NULL arguments, load
 * failures (I/O, syntax, sandbox limits), calls on unloaded policies, and
 * the memory a loaded policy holds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "luaretry.h"
#include "luaretry_tool.h"
#include "check.h"

#ifndef LUARETRY_DATADIR
#define LUARETRY_DATADIR "."
#endif

static void test_strerror(void) {
  const char *unknown = luaretry_strerror((luaretry_code)9999);
  CHECK(unknown != NULL && unknown[0] != '\0');
  const char *names[64];
  int n = 0;
  while (n < 64) {
    const char *s = luaretry_strerror((luaretry_code)n);
    if (!CHECK(s != NULL)) break;
    if (strcmp(s, unknown) == 0) break;
    names[n++] = s;
  }
  CHECK(n >= LUARETRY_E_SYSTEM + 1); /* every code up to the last known */
  for (int i = 0; i < n; i++) {
    CHECK(names[i][0] != '\0');
    for (int j = 0; j < i; j++)
      if (!CHECK(strcmp(names[i], names[j]) != 0))
        fprintf(stderr, "  codes %d and %d share \"%s\"\n", j, i, names[i]);
  }
  CHECK(strcmp(luaretry_strerror(LUARETRY_OK), "") != 0);
  CHECK(strcmp(luaretry_strerror((luaretry_code)-1), unknown) == 0);
}

static void test_names(void) {
  static const struct {
    luaretry_reason r;
    const char *name;
  } reasons[] = {
    { LUARETRY_REASON_NONE, "retry" },
    { LUARETRY_REASON_SUCCESS, "success" },
    { LUARETRY_REASON_FINAL, "final" },
    { LUARETRY_REASON_EXHAUSTED, "exhausted" },
    { LUARETRY_REASON_DEADLINE, "deadline" },
    { LUARETRY_REASON_POLICY_ERROR, "policy_error" },
    { LUARETRY_REASON_CANCELLED, "cancelled" },
    { LUARETRY_REASON_BUDGET, "budget" },
    { LUARETRY_REASON_CIRCUIT_OPEN, "circuit_open" },
  };
  for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
    CHECK_EQ_STR(luaretry_reason_name(reasons[i].r), reasons[i].name);
  const char *r_unknown = luaretry_reason_name((luaretry_reason)999);
  CHECK(r_unknown != NULL && r_unknown[0] != '\0');
  for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
    CHECK(strcmp(reasons[i].name, r_unknown) != 0);

  static const struct {
    luaretry_wait_source s;
    const char *name;
  } sources[] = {
    { LUARETRY_WAIT_NONE, "none" },       { LUARETRY_WAIT_BACKOFF, "backoff" },
    { LUARETRY_WAIT_SERVER, "server" },   { LUARETRY_WAIT_SCRIPT, "script" },
    { LUARETRY_WAIT_CLAMPED, "clamped" },
  };
  for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++)
    CHECK_EQ_STR(luaretry_wait_source_name(sources[i].s), sources[i].name);
  const char *s_unknown = luaretry_wait_source_name((luaretry_wait_source)999);
  CHECK(s_unknown != NULL && s_unknown[0] != '\0');
}

static luaretry_code noop_op(void *ud, luaretry_call *c, int attempt, double timeout,
                             luaretry_outcome *out) {
  (void)ud;
  (void)c;
  (void)attempt;
  (void)timeout;
  out->status = 200;
  return LUARETRY_OK;
}

static luaretry_class noop_classify(void *ud, const luaretry_outcome *o, int attempt,
                                    double *wait) {
  (void)ud;
  (void)o;
  (void)attempt;
  (void)wait;
  return LUARETRY_CLASS_SUCCESS;
}

/* Every function, given NULL where a pointer belongs: an error, no crash.
 * One line per public function, so its length follows the API's. */
static void test_null_arguments(void) {
  luaretry_policy *p = NULL;
  CHECK_CODE(luaretry_policy_new(NULL), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  if (!CHECK(p != NULL)) return;

  CHECK_CODE(luaretry_policy_set(NULL, "max_attempts", "3"), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_set(p, NULL, "3"), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_set(p, "max_attempts", NULL), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_load_file(NULL, "x.lua"), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_load_file(p, NULL), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_load_string(NULL, "@x", "max_attempts = 1"), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_load_string(p, "@x", NULL), LUARETRY_E_ARG);
  CHECK(luaretry_policy_errmsg(NULL) != NULL);
  CHECK_EQ_INT(luaretry_policy_warning_count(NULL), 0);
  CHECK(luaretry_policy_warning(NULL, 0) == NULL);
  CHECK(luaretry_policy_warning(p, 0) == NULL);
  CHECK_EQ_INT(luaretry_policy_memory(NULL), 0);
  CHECK_EQ_INT(luaretry_policy_memory(p), 0); /* nothing loaded yet */
  luaretry_tuning t;
  CHECK_CODE(luaretry_policy_tuning(NULL, &t), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_tuning(p, NULL), LUARETRY_E_ARG);
  luaretry_policy_on_log(NULL, NULL, NULL);
  CHECK_CODE(luaretry_policy_set_classifier(NULL, noop_classify, NULL), LUARETRY_E_ARG);
  int idem = -1;
  luaretry_request req = { .method = "GET", .url = "http://x.invalid/" };
  luaretry_request out;
  CHECK_CODE(luaretry_policy_is_idempotent(NULL, &req, &idem), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_is_idempotent(p, NULL, &idem), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_is_idempotent(p, &req, NULL), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_prepare(NULL, &req, 1, &out), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_prepare(p, NULL, 1, &out), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_prepare(p, &req, 1, NULL), LUARETRY_E_ARG);
  luaretry_outcome_init(NULL);
  luaretry_call_options_init(NULL);

  /* Calls. */
  luaretry_call *c = (luaretry_call *)&t; /* must be reset to NULL */
  CHECK_CODE(luaretry_call_begin(NULL, NULL, &c), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_call_begin(p, NULL, NULL), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_load_string(p, "@ok.lua", "max_attempts = 2"), LUARETRY_OK);
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK); /* options: NULL */
  {
    /* a flag this library does not know is refused, named, never ignored;
     * so is a call that says it is a workflow and one of its requests */
    luaretry_call *other = (luaretry_call *)&t;
    luaretry_call_options unknown;
    luaretry_call_options_init(&unknown);
    unknown.flags = LUARETRY_CALL_SEED | 0x100u | 0x80000000u;
    CHECK_CODE(luaretry_call_begin(p, &unknown, &other), LUARETRY_E_ARG);
    CHECK(other == NULL);
    CHECK_CONTAINS(luaretry_policy_errmsg(p), "unknown flags 0x80000100");
    unknown.flags = LUARETRY_CALL_WORKFLOW | LUARETRY_CALL_WORKFLOW_REQUEST;
    CHECK_CODE(luaretry_call_begin(p, &unknown, &other), LUARETRY_E_ARG);
    CHECK_CONTAINS(luaretry_policy_errmsg(p), "not both");
    unknown.flags = LUARETRY_CALL_WORKFLOW;
    CHECK_CODE(luaretry_call_begin(p, &unknown, &other), LUARETRY_OK);
    luaretry_call_free(other);
    /* reserved room that is not zero: a later version's fields, refused */
    unknown.reserved[1] = 7;
    CHECK_CODE(luaretry_call_begin(p, &unknown, &other), LUARETRY_E_ARG);
    CHECK_CONTAINS(luaretry_policy_errmsg(p), "reserved fields are not zero");
    unknown.reserved[1] = 0;
    unknown.reserved_32 = 1;
    CHECK_CODE(luaretry_call_begin(p, &unknown, &other), LUARETRY_E_ARG);
  }
  CHECK_EQ_DBL(luaretry_call_timeout(NULL), 0);
  CHECK_EQ_DBL(luaretry_call_elapsed(NULL), 0);
  CHECK(luaretry_call_errmsg(NULL) != NULL);
  CHECK_CODE(luaretry_call_wait(NULL, 0.001), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_call_wait(c, NAN), LUARETRY_E_ARG);
  luaretry_call_cancel(NULL);
  CHECK_EQ_INT(luaretry_call_cancelled(NULL), 0);
  luaretry_call_on_decision(NULL, NULL, NULL);
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  CHECK_EQ_DBL(o.retry_after, -1);
  luaretry_decision d;
  CHECK_CODE(luaretry_call_report(NULL, &o, &d), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_call_report(c, NULL, &d), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_call_report(c, &o, NULL), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_call_run(NULL, noop_op, NULL, &d), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_call_run(c, NULL, NULL, &d), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_call_run(c, noop_op, NULL, NULL), LUARETRY_E_ARG);
  /* None of these consumed an attempt: the call is still fresh. */
  CHECK_CODE(luaretry_call_run(c, noop_op, NULL, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.attempt, 1);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_SUCCESS);
  CHECK_CODE(luaretry_simulate(NULL, 1, 0, NULL, NULL), LUARETRY_E_ARG);

  /* Destructors accept NULL. */
  luaretry_call_free(NULL);
  luaretry_policy_free(NULL);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* Every bad script and the message it must get: a table written as code. */
static void test_load_errors(void) {
  luaretry_policy *p = NULL;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  if (!p) return;

  /* Unloaded: no calls, no tuning. */
  luaretry_call *c = (luaretry_call *)p;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_E_STATE);
  CHECK(c == NULL);
  luaretry_tuning t;
  CHECK_CODE(luaretry_policy_tuning(p, &t), LUARETRY_E_STATE);
  CHECK_CODE(luaretry_simulate(p, 1, 0, NULL, NULL), LUARETRY_E_STATE);

  CHECK_CODE(luaretry_policy_load_file(p, "spec/fixtures/c_no_such_policy.lua"), LUARETRY_E_IO);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "spec/fixtures/c_no_such_policy.lua");
  CHECK_CODE(luaretry_policy_load_file(p, "spec/fixtures"), LUARETRY_E_IO);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "spec/fixtures");

  CHECK_CODE(luaretry_policy_load_file(p, "spec/fixtures/c_syntax_error.lua"), LUARETRY_E_SYNTAX);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "spec/fixtures/c_syntax_error.lua:4:");
  CHECK_CODE(luaretry_policy_load_string(p, "@inline.lua", "max_attempts = 3\nfunction (\n"),
             LUARETRY_E_SYNTAX);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "inline.lua:2:");
  /* Binary chunks are refused. */
  CHECK_CODE(luaretry_policy_load_string(p, "@bin.lua", "\x1bLua"), LUARETRY_E_SYNTAX);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "binary");

  /* A runtime error and an invalid field: E_POLICY with file:line. */
  CHECK_CODE(luaretry_policy_load_string(p, "@rt.lua", "max_attempts = 3\nlocal x = nil + 1\n"),
             LUARETRY_E_POLICY);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "rt.lua:2:");
  CHECK_CODE(luaretry_policy_load_string(p, "@field.lua", "deadline = 5\nmax_attempts = 2.5\n"),
             LUARETRY_E_POLICY);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "field.lua:2: max_attempts");
  /* The sandbox: no io, no os.execute, no __gc. */
  CHECK_CODE(
    luaretry_policy_load_string(p, "@io.lua", "max_attempts = 3\nio.open('/etc/passwd')\n"),
    LUARETRY_E_POLICY);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "io.lua:2:");
  CHECK_CODE(luaretry_policy_load_string(p, "@os.lua", "max_attempts = 3\nos.execute('true')\n"),
             LUARETRY_E_POLICY);
  CHECK_CODE(luaretry_policy_load_string(
               p, "@gc.lua", "max_attempts = 3\nsetmetatable({}, { __gc = function() end })\n"),
             LUARETRY_E_POLICY);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "__gc");

  /* Sandbox limits at load: E_LIMIT, and a pcall cannot swallow them. */
  CHECK_CODE(luaretry_policy_load_file(p, "spec/fixtures/c_runaway.lua"), LUARETRY_E_LIMIT);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "time limit reached (0.25 s)");
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "spec/fixtures/c_runaway.lua:");
  CHECK_CODE(luaretry_policy_set(p, "memory_limit", "1048576"), LUARETRY_OK);
  /* the memory limit alone: a busy machine must not reach the time limit
   * (0.25 s) first */
  CHECK_CODE(luaretry_policy_set(p, "time_limit", "60"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, "@hog.lua",
                                         "max_attempts = 3\nlocal t = {}\n"
                                         "for i = 1, 1e8 do t[i] = ('x'):rep(100) .. i end\n"),
             LUARETRY_E_LIMIT);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "memory limit");
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "hog.lua:3");
  CHECK_CODE(luaretry_policy_set(p, "time_limit", "0.25"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "instruction_limit", "10000"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(
               p, "@count.lua", "max_attempts = 3\nlocal n = 0\nfor i = 1, 1e6 do n = n + i end\n"),
             LUARETRY_E_LIMIT);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "10000");

  /* Still nothing loaded, and the host goes on: a good script loads. */
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_E_STATE);
  CHECK_CODE(luaretry_policy_load_string(p, "@good.lua", "max_attempts = 3"), LUARETRY_OK);
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* Limits hit inside is_transient: a policy error for that call only. */
static void test_limits_at_decision(void) {
  luaretry_policy *p = NULL;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  if (!p) return;
  CHECK_CODE(luaretry_policy_set(p, "memory_limit", "2000000"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(
               p, "@hook.lua",
               "max_attempts = 3\n"
               "function is_transient(status, body)\n"
               "  if status == 500 then while true do pcall(error) end end\n"
               "  if status == 507 then local s = body while true do s = s .. s end end\n"
               "  return status == 503\n"
               "end\n"),
             LUARETRY_OK);
  static const int statuses[] = { 500, 507 };
  static const char *const words[] = { "time limit", "memory limit" };
  for (int i = 0; i < 2; i++) {
    luaretry_call *c = NULL;
    CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
    if (!c) continue;
    luaretry_outcome o;
    luaretry_outcome_init(&o);
    o.status = statuses[i];
    o.body = "0123456789abcdef";
    o.body_len = 16;
    luaretry_decision d;
    CHECK_CODE(luaretry_call_report(c, &o, &d), LUARETRY_OK);
    CHECK_EQ_INT(d.reason, LUARETRY_REASON_POLICY_ERROR);
    CHECK_CONTAINS(d.message, words[i]);
    CHECK_CONTAINS(d.message, "hook.lua:");
    CHECK_EQ_STR(d.rule, "hook.lua:2");
    luaretry_call_free(c);
    /* The policy still judges the next call. */
    CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
    o.status = 503;
    CHECK_CODE(luaretry_call_report(c, &o, &d), LUARETRY_OK);
    CHECK_EQ_INT(d.retry, 1);
    o.status = 404;
    CHECK_CODE(luaretry_call_report(c, &o, &d), LUARETRY_OK);
    CHECK_EQ_INT(d.reason, LUARETRY_REASON_FINAL);
    luaretry_call_free(c);
  }
  CHECK(luaretry_policy_memory(p) < 2000000);
  luaretry_policy_free(p);
}

static void test_memory(void) {
  luaretry_policy *p = NULL;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  if (!p) return;
  CHECK_CODE(luaretry_policy_load_file(p, "policies/http.lua"), LUARETRY_OK);
  size_t bytes = luaretry_policy_memory(p);
  CHECK(bytes > 0);
  CHECK(bytes < 64 * 1024);
  printf("policies/http.lua holds %zu bytes (%.1f KiB) of Lua state\n", bytes,
         (double)bytes / 1024);
  luaretry_policy_free(p);
}

/* What a decision points to lives until luaretry_call_free: two reloads
 * meanwhile (the old load retires when its last call ends) do not move
 * its rule (ASan sees a use after free if they did). */
static void test_decision_lifetime(void) {
  luaretry_policy *p = NULL;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, "@first.lua",
                                         "max_attempts = 3\n"
                                         "function is_transient(s) return s == 503 end\n"),
             LUARETRY_OK);
  luaretry_call_options o = { .flags = LUARETRY_CALL_VIRTUAL_TIME };
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  luaretry_outcome out;
  luaretry_outcome_init(&out);
  out.status = 503;
  luaretry_decision d;
  CHECK_CODE(luaretry_call_report(c, &out, &d), LUARETRY_OK);
  CHECK_EQ_STR(d.rule, "first.lua:2");
  for (int i = 0; i < 2; i++)
    CHECK_CODE(luaretry_policy_load_string(p, "@second.lua", "max_attempts = 2\n"), LUARETRY_OK);
  CHECK_EQ_STR(d.rule, "first.lua:2");
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* The verdict of policy p on a 503: 1 retry, 0 not. */
static int retries_503(luaretry_policy *p) {
  luaretry_call *c;
  luaretry_decision d;
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = 503;
  if (luaretry_call_begin(p, NULL, &c) != LUARETRY_OK) return -1;
  int yes =
    luaretry_call_next(c, &d) == LUARETRY_OK && luaretry_call_report(c, &o, &d) == 0 && d.retry;
  luaretry_call_free(c);
  return yes;
}

/* A setting's value is taken whole up to 4096 bytes (a pattern, a URL):
 * the script's option reads every byte; a longer one is refused naming
 * the limit; a set a loaded policy refuses leaves the value it had.  ASan
 * (make test's C tests) finds a copy freed twice or never. */
static void test_long_values(void) {
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  static char big[4098];
  memset(big, 'x', 4096);
  CHECK_CODE(luaretry_policy_set(p, "options.text", big), LUARETRY_OK); /* before the load */
  CHECK_CODE(luaretry_policy_load_string(p, "@long.lua",
                                         "options = { text = '', flag = true }\n"
                                         "max_attempts = 2\n"
                                         "function is_transient()\n"
                                         "  return #options.text == 4096 and options.flag\n"
                                         "end\n"),
             LUARETRY_OK);
  CHECK(retries_503(p) == 1);
  big[4096] = 'x';
  CHECK_CODE(luaretry_policy_set(p, "options.text", big), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p),
                 "options.text: value too long (4097 bytes; 4096 at most)");
  CHECK(retries_503(p) == 1);
  CHECK_CODE(luaretry_policy_set(p, "options.text", "y"), LUARETRY_OK); /* the long one freed */
  CHECK(retries_503(p) == 0);
  big[4096] = '\0';
  CHECK_CODE(luaretry_policy_set(p, "options.text", big), LUARETRY_OK);
  CHECK(retries_503(p) == 1);
  /* refused by the load (a boolean option): as a new name, then over a value */
  CHECK_CODE(luaretry_policy_set(p, "options.flag", "maybe"), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "options.flag");
  /* the next load (any setting's) is made without it */
  CHECK_CODE(luaretry_policy_set(p, "max_attempts", "3"), LUARETRY_OK);
  CHECK(retries_503(p) == 1);
  CHECK_CODE(luaretry_policy_set(p, "options.flag", "false"), LUARETRY_OK);
  CHECK(retries_503(p) == 0);
  CHECK_CODE(luaretry_policy_set(p, "options.flag", "maybe"), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_set(p, "max_attempts", "2"), LUARETRY_OK);
  CHECK(retries_503(p) == 0); /* still false */
  CHECK_CODE(luaretry_policy_set(p, "options.flag", "true"), LUARETRY_OK);
  CHECK(retries_503(p) == 1);
  luaretry_policy_free(p);
}

/* A log callback that sets or loads the policy whose load printed (the
 * script's top level runs at each load and set): refused, naming why,
 * where it waited for itself for ever.  The alarm turns a hang into a
 * failure.  From a hook during a call it is a set like any other. */
static luaretry_policy *reentered;
static luaretry_code reentered_set, reentered_load;
static char reentered_msg[256];

static void reenter_log(void *ud, const char *line) {
  (void)ud;
  (void)line;
  reentered_set = luaretry_policy_set(reentered, "max_attempts", "5");
  snprintf(reentered_msg, sizeof reentered_msg, "%s", luaretry_policy_errmsg(reentered));
  reentered_load = luaretry_policy_load_string(reentered, "=again", "max_attempts = 2\n");
}

static void test_reentrant_log(void) {
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  reentered = p;
  luaretry_policy_on_log(p, reenter_log, NULL);
  alarm(20);
  reentered_set = reentered_load = LUARETRY_OK;
  CHECK_CODE(
    luaretry_policy_load_string(p, "=top", "max_attempts = 3 deadline = 5\nprint('top')\n"),
    LUARETRY_OK);
  CHECK_CODE(reentered_set, LUARETRY_E_STATE);
  CHECK_CONTAINS(reentered_msg, "luaretry_policy_set");
  CHECK_CONTAINS(reentered_msg, "log callback");
  CHECK_CODE(reentered_load, LUARETRY_E_STATE);
  CHECK_CODE(luaretry_policy_set(p, "max_attempts", "4"), LUARETRY_OK); /* the lock was let go */
  char v[16];
  CHECK_CODE(luaretry_policy_get(p, "max_attempts", v, sizeof v), LUARETRY_OK);
  CHECK_EQ_STR(v, "4");
  /* a hook's print during a call: no load under way, the set goes */
  CHECK_CODE(luaretry_policy_load_string(p, "=hook",
                                         "max_attempts = 3 deadline = 5\n"
                                         "function on_retry() print('hook') end\n"),
             LUARETRY_OK);
  reentered_set = LUARETRY_E_ARG;
  luaretry_call_options co;
  luaretry_call_options_init(&co);
  co.flags = LUARETRY_CALL_VIRTUAL_TIME;
  luaretry_call *c;
  luaretry_decision d;
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = 503;
  CHECK_CODE(luaretry_call_begin(p, &co, &c), LUARETRY_OK);
  CHECK_CODE(luaretry_call_report(c, &o, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  CHECK_CODE(reentered_set, LUARETRY_OK);
  luaretry_call_free(c);
  alarm(0);
  luaretry_policy_free(p);
}

/* An argument refused names itself in the message: the message of the
 * failure before (another attempt, another name) was left in place. */
static void test_refusal_named(void) {
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, "=named", "max_attempts = 3 deadline = 5\n"),
             LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "bogus", "1"), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "bogus");
  CHECK_CODE(luaretry_policy_set(p, NULL, "3"), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "name is NULL");
  CHECK_CODE(luaretry_policy_set(p, "max_attempts", NULL), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "max_attempts: the value is NULL");
  /* the policy's own functions name their NULL argument too: each
   * message differs from the one before, which was left in place */
  luaretry_request rq0 = { .method = "GET", .url = "http://127.0.0.1:1/" };
  int yes0;
  char err[8];
  CHECK_CODE(luaretry_call_begin(p, NULL, NULL), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "luaretry_call_begin: out is NULL");
  CHECK_CODE(luaretry_policy_tuning(p, NULL), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "luaretry_policy_tuning: t is NULL");
  CHECK_CODE(luaretry_policy_metrics(p, NULL), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "luaretry_policy_metrics: m is NULL");
  CHECK_CODE(luaretry_policy_sample_backoff(p, 0, 1, 0, NULL, 3), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "luaretry_policy_sample_backoff: out is NULL");
  CHECK_CODE(luaretry_policy_is_idempotent(p, NULL, &yes0), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "luaretry_policy_is_idempotent: r is NULL");
  CHECK_CODE(luaretry_policy_prepare(p, &rq0, 1, NULL), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "luaretry_policy_prepare: out is NULL");
  CHECK_CODE(luaretry_policy_fleet_status(p, NULL), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "luaretry_policy_fleet_status: st is NULL");
  CHECK_CODE(luaretry_policy_probe_on_breaker(p, NULL, err, sizeof err), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "luaretry_policy_probe_on_breaker: state is NULL");
  CHECK_CODE(luaretry_call_options_inbound(p, NULL, 0, NULL), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "luaretry_call_options_inbound: o is NULL");
  luaretry_call *c;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = 503;
  luaretry_decision d;
  CHECK_CODE(luaretry_call_report_attempt(c, 7, &o, &d), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "attempt 7 is not in flight");
  memset(&d, 0x5a, sizeof d);
  CHECK_CODE(luaretry_call_report_attempt(c, 0, &o, &d), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "attempt 0");
  CHECK_EQ_INT(d.retry, 0); /* cleared, as for any other refused report */
  CHECK(d.rule == NULL);
  CHECK_CODE(luaretry_call_report_attempt(c, -3, &o, &d), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "attempt -3");
  /* a NULL argument to a live call is named too */
  CHECK_CODE(luaretry_call_report(c, NULL, &d), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "luaretry_call_report: the outcome is NULL");
  CHECK_CODE(luaretry_call_report_attempt(c, 1, &o, NULL), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "luaretry_call_report_attempt: d is NULL");
  CHECK_CODE(luaretry_call_next(c, NULL), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "luaretry_call_next: d is NULL");
  CHECK_CODE(luaretry_call_hedge(c, NULL, &d), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "luaretry_call_hedge: the request is NULL");
  CHECK_CODE(luaretry_call_start(c, NULL), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "luaretry_call_start: attempt is NULL");
  CHECK_CODE(luaretry_call_run(c, NULL, NULL, &d), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "luaretry_call_run: the operation is NULL");
  int yes;
  CHECK_CODE(luaretry_call_is_idempotent(c, NULL, &yes), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "luaretry_call_is_idempotent: the request is NULL");
  luaretry_request rq = { .method = "GET" };
  CHECK_CODE(luaretry_call_prepare(c, &rq, 1, NULL), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "luaretry_call_prepare: out is NULL");
  CHECK_CODE(luaretry_call_stop_as(c, NULL, &d), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "luaretry_call_stop_as: the request's decision is NULL");
  CHECK_CODE(luaretry_call_report(c, &o, &d), LUARETRY_OK); /* nothing was used up */
  CHECK_EQ_INT(d.attempt, 1);
  CHECK_CODE(luaretry_call_wait(c, NAN), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "luaretry_call_wait: NaN seconds");
  luaretry_call_free(c);
  /* +infinity on the virtual clock: refused, the clock left where it was
   * (it stood at +infinity, and every elapsed after it) */
  luaretry_call_options vo;
  luaretry_call_options_init(&vo);
  vo.flags = LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_ISOLATED;
  CHECK_CODE(luaretry_call_begin(p, &vo, &c), LUARETRY_OK);
  CHECK_CODE(luaretry_call_wait(c, 2), LUARETRY_OK);
  CHECK_CODE(luaretry_call_wait(c, INFINITY), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "+infinity on the virtual clock never ends");
  CHECK_NEAR(luaretry_call_elapsed(c), 2, 1e-9);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* A request built with a slip (a count that takes in a {NULL, NULL}
 * sentinel, headers NULL with a count): refused naming it, with a script
 * hook or without (the propagate headers read the names too); it was read
 * through the NULL and crashed. */
static void test_bad_request(void) {
  static const char *const scripts[] = {
    "max_attempts = 2 deadline = 5\n"
    "function prepare(r) return r end\n"
    "function is_idempotent(r) return true end\n",
    "max_attempts = 2 deadline = 5\npropagate = {}\n",
  };
  for (size_t k = 0; k < sizeof scripts / sizeof *scripts; k++) {
    luaretry_policy *p;
    CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
    CHECK_CODE(luaretry_policy_load_string(p, "=req", scripts[k]), LUARETRY_OK);
    luaretry_header h[] = { { "accept", "*/*" }, { NULL, NULL } };
    luaretry_request r = {
      .method = "GET", .url = "http://x.invalid/", .headers = h, .header_count = 2
    };
    luaretry_request out;
    int idem = -1;
    CHECK_CODE(luaretry_policy_prepare(p, &r, 1, &out), LUARETRY_E_ARG);
    CHECK_CONTAINS(luaretry_policy_errmsg(p), "header 2 of 2 has a NULL name");
    CHECK_CODE(luaretry_policy_is_idempotent(p, &r, &idem), LUARETRY_E_ARG);
    CHECK_CONTAINS(luaretry_policy_errmsg(p), "header 2 of 2 has a NULL name");
    luaretry_call *c;
    CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
    CHECK_CODE(luaretry_call_prepare(c, &r, 1, &out), LUARETRY_E_ARG);
    CHECK_CONTAINS(luaretry_call_errmsg(c), "header 2 of 2 has a NULL name");
    r.headers = NULL;
    CHECK_CODE(luaretry_call_is_idempotent(c, &r, &idem), LUARETRY_E_ARG);
    CHECK_CONTAINS(luaretry_call_errmsg(c), "2 headers and no array of them");
    r.header_count = 0; /* no headers at all: fine */
    CHECK_CODE(luaretry_call_prepare(c, &r, 1, &out), LUARETRY_OK);
    CHECK_CODE(luaretry_call_is_idempotent(c, &r, &idem), LUARETRY_OK);
    CHECK_EQ_INT(idem, 1);
    luaretry_call_free(c);
    luaretry_policy_free(p);
  }
}

/* An outcome's headers NULL with a count: refused and named, where the
 * script's info.headers read through the NULL (a crash before). */
static void test_bad_outcome(void) {
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, "=out",
                                         "max_attempts = 3 deadline = 5\n"
                                         "function is_transient(status, body, info)\n"
                                         "  return info.headers['retry-after'] ~= nil\n"
                                         "end\n"),
             LUARETRY_OK);
  luaretry_call *c;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = 503;
  o.header_count = 2;
  luaretry_decision d;
  CHECK_CODE(luaretry_call_report(c, &o, &d), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "the outcome has 2 headers and no array of them");
  luaretry_header h[] = { { "retry-after", "1" }, { "x", "y" } };
  o.headers = h; /* the same call goes on: nothing was counted */
  CHECK_CODE(luaretry_call_report(c, &o, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.attempt, 1);
  CHECK_EQ_INT(d.retry, 1);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* luaretry_call_errmsg after calls that succeeded and never failed: "",
 * never the bytes of a buffer made for a message and not written. */
static void test_errmsg_before_any_failure(void) {
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, "=hedged",
                                         "max_attempts = 3 deadline = 5\n"
                                         "hedge = { delay = 0.05, max = 1 }\n"),
             LUARETRY_OK);
  luaretry_request r = { .method = "GET", .url = "http://x.invalid/" };
  luaretry_request out;
  int idem = 0;
  for (int k = 0; k < 3; k++) {
    luaretry_call_options opt;
    luaretry_call_options_init(&opt);
    opt.flags = LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_SEED;
    opt.seed = 1;
    luaretry_call *c;
    CHECK_CODE(luaretry_call_begin(p, &opt, &c), LUARETRY_OK);
    if (k == 0) CHECK_CODE(luaretry_call_is_idempotent(c, &r, &idem), LUARETRY_OK);
    if (k == 1) CHECK_CODE(luaretry_call_prepare(c, &r, 1, &out), LUARETRY_OK);
    if (k == 2) {
      int id;
      luaretry_decision d;
      CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
      CHECK_CODE(luaretry_call_wait(c, 0.05), LUARETRY_OK);
      CHECK_CODE(luaretry_call_hedge(c, &r, &d), LUARETRY_OK);
      CHECK_EQ_INT(d.hedge, 1);
    }
    CHECK_EQ_STR(luaretry_call_errmsg(c), "");
    luaretry_call_free(c);
  }
  luaretry_policy_free(p);
}

/* A workflow's transport that answers with a slip (headers NULL with a
 * count, a header with a NULL name): the workflow fails naming it; it
 * was read through the NULL. */
static int slip_kind;
static luaretry_header slip_headers[] = { { "etag", "x" }, { NULL, "y" } };

static luaretry_code slip_transport(void *ud, const luaretry_request *req, double timeout,
                                    luaretry_response *resp) {
  (void)ud;
  (void)req;
  (void)timeout;
  memset(resp, 0, sizeof *resp);
  resp->status = 200;
  resp->body = "ok";
  resp->body_len = 2;
  resp->headers = slip_kind ? slip_headers : NULL;
  resp->header_count = 2;
  return LUARETRY_OK;
}

static luaretry_code noop_transport(void *ud, const luaretry_request *req, double timeout,
                                    luaretry_response *resp);

static void test_bad_response(void) {
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, "=wf",
                                         "max_attempts = 2 deadline = 5\n"
                                         "function run(http, args)\n"
                                         "  local r = http.get('http://x.invalid/')\n"
                                         "  return r.status, r.body\n"
                                         "end\n"),
             LUARETRY_OK);
  luaretry_outcome o;
  for (slip_kind = 0; slip_kind < 2; slip_kind++) {
    CHECK_CODE(luaretry_policy_run_workflow(p, NULL, 0, slip_transport, NULL, 1, &o),
               LUARETRY_E_POLICY);
    CHECK_CONTAINS(luaretry_policy_errmsg(p), "http://x.invalid/");
    CHECK_CONTAINS(luaretry_policy_errmsg(p),
                   slip_kind ? "header 2 of 2 has a NULL name" : "2 headers and no array of them");
  }
  /* a request's header name: prepare's rule (a space was sent before) */
  static const char *const names[] = { "X Bad", "", "X:y", "X\\r" };
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char src[256];
    snprintf(src, sizeof src,
             "max_attempts = 2 deadline = 5\n"
             "function run(http, args)\n"
             "  local r = http.get('http://x.invalid/', { [\"%s\"] = '1' })\n"
             "  return r.status, r.body\n"
             "end\n",
             names[i]);
    CHECK_CODE(luaretry_policy_load_string(p, "=wf", src), LUARETRY_OK);
    CHECK_CODE(luaretry_policy_run_workflow(p, NULL, 0, noop_transport, NULL, 1, &o),
               LUARETRY_E_POLICY);
    CHECK_CONTAINS(luaretry_policy_errmsg(p), "is not a name (letters, digits and");
  }
  luaretry_policy_free(p);
}

static luaretry_code noop_transport(void *ud, const luaretry_request *req, double timeout,
                                    luaretry_response *resp) {
  (void)ud;
  (void)req;
  (void)timeout;
  memset(resp, 0, sizeof *resp);
  resp->status = 200;
  return LUARETRY_OK;
}

/* Every refusal of a live policy says what it refused (errmsg is the
 * thread's last failure on the policy; these left the one before). */
static void test_policy_refusals_named(void) {
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  char v[32];
  CHECK_CODE(luaretry_policy_set(p, "bogus", "1"), LUARETRY_E_ARG); /* a message to replace */
  CHECK_CODE(luaretry_policy_get(p, "max_attempts", v, sizeof v), LUARETRY_E_STATE);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "no policy loaded");
  CHECK_CODE(luaretry_policy_load_string(p, "=x", NULL), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "the source is NULL");
  CHECK_CODE(luaretry_policy_load_file(p, NULL), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "the path is NULL");
  /* the first thing a host gets wrong: a call before any load */
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_E_STATE);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "luaretry_call_begin: no policy loaded");
  CHECK_CODE(luaretry_policy_set(p, "bogus", "1"), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_simulate(p, 1, 0, NULL, NULL), LUARETRY_E_STATE);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "luaretry_simulate: no policy loaded");
  luaretry_request rq = { .method = "GET" }, rout;
  int idem;
  CHECK_CODE(luaretry_policy_is_idempotent(p, &rq, &idem), LUARETRY_E_STATE);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "luaretry_policy_is_idempotent: no policy loaded");
  CHECK_CODE(luaretry_policy_prepare(p, &rq, 1, &rout), LUARETRY_E_STATE);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "luaretry_policy_prepare: no policy loaded");
  luaretry_outcome wo;
  CHECK_CODE(luaretry_policy_run_workflow(p, NULL, 0, noop_transport, NULL, 1, &wo),
             LUARETRY_E_STATE);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "luaretry_policy_run_workflow: no policy loaded");
  int reloaded = -1;
  CHECK_CODE(luaretry_policy_reload_if_changed(p, &reloaded), LUARETRY_E_STATE);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "no policy loaded");
  CHECK_CODE(luaretry_policy_load_string(p, "=named",
                                         "max_attempts = 2 deadline = 5\n"
                                         "function run(http, args) return 200, 'ok' end\n"),
             LUARETRY_OK);
  CHECK_CODE(luaretry_policy_get(p, "backoff.inital", v, sizeof v), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "backoff.inital: unknown name, did you mean");
  CHECK_CODE(luaretry_policy_reload_if_changed(p, &reloaded), LUARETRY_E_STATE);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "not loaded from a file");
  CHECK_EQ_INT(reloaded, 0);
  CHECK_CODE(luaretry_policy_get(p, "is_transient", v, sizeof v), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "is_transient: not a setting");
  CHECK_CODE(luaretry_policy_get(p, "max_attempts", v, 0), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "max_attempts: no room");
  luaretry_outcome o;
  CHECK_CODE(luaretry_policy_run_workflow(p, NULL, 2, noop_transport, NULL, 1, &o), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "2 args and no array of them");
  const char *args[] = { "a" };
  CHECK_CODE(luaretry_policy_run_workflow(p, args, -1, noop_transport, NULL, 1, &o),
             LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "nargs -1");
  /* a NaN or negative timeout was taken for none */
  CHECK_CODE(luaretry_policy_run_workflow(p, args, 1, noop_transport, NULL, NAN, &o),
             LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "timeout nan is not a number of seconds");
  CHECK_CODE(luaretry_policy_run_workflow(p, args, 1, noop_transport, NULL, -1, &o),
             LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "timeout -1 is not");
  CHECK_CODE(luaretry_policy_run_workflow(p, args, 1, noop_transport, NULL, INFINITY, &o),
             LUARETRY_OK);
  CHECK_CODE(luaretry_policy_run_workflow(p, args, 1, noop_transport, NULL, 1, &o), LUARETRY_OK);
  luaretry_policy_free(p);
}

/* A script's print of a string with a NUL byte: the host's line shows it
 * as \\0 and goes on; it was cut at the NUL (the rest never seen). */
static char printed[64];

static void keep_line(void *ud, const char *line) {
  (void)ud;
  snprintf(printed, sizeof printed, "%s", line);
}

static void test_print_nul(void) {
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  luaretry_policy_on_log(p, keep_line, NULL);
  CHECK_CODE(luaretry_policy_load_string(p, "=nul",
                                         "max_attempts = 2 deadline = 5\n"
                                         "print('a\\0b', 'c')\n"),
             LUARETRY_OK);
  CHECK_EQ_STR(printed, "a\\0b\tc");
  luaretry_policy_free(p);
}

/* prepare's refusal of a split header names the header. */
static void test_prepare_names_header(void) {
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(
    luaretry_policy_load_string(p, "=split",
                                "max_attempts = 2 deadline = 5\n"
                                "function prepare(r)\n"
                                "  r.headers = { ['X-Ok'] = 'a', ['X-Split'] = 'b\\r\\nc' }\n"
                                "  return r\n"
                                "end\n"),
    LUARETRY_OK);
  luaretry_request r = { .method = "GET", .url = "http://x.invalid/" }, out;
  CHECK_CODE(luaretry_policy_prepare(p, &r, 1, &out), LUARETRY_E_POLICY);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "header \"X-Split\": its value holds a line break");
  luaretry_policy_free(p);
}

/* helper-77's random sequences: a workflow's request refused before any
 * attempt took 1 off metrics.attempts each time (it wrapped below 0); a
 * stopped call's luaretry_call_run said nothing; luaretry_call_stall read
 * a handle of another kind. */
static luaretry_code op_unused(void *ud, luaretry_call *c, int attempt, double timeout,
                               luaretry_outcome *out) {
  (void)ud, (void)c, (void)attempt, (void)timeout;
  out->status = 200;
  return LUARETRY_OK;
}

/* A workflow's request of p (LUARETRY_CALL_WORKFLOW_REQUEST). */
static luaretry_call *request_call(luaretry_policy *p) {
  luaretry_call_options o;
  luaretry_call_options_init(&o);
  o.flags = LUARETRY_CALL_WORKFLOW_REQUEST;
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  return c;
}

static void test_random_sequences_found(void) {
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(
               p, "=r", "max_attempts = 3\ndeadline = 2\nrate = { limit = 0.1, burst = 1 }\n"),
             LUARETRY_OK);
  luaretry_call *c;
  luaretry_decision d;
  luaretry_metrics m;
  for (int i = 0; i < 4; i++) {
    c = request_call(p);
    if (i < 3) {
      CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
      CHECK_EQ_INT(d.retry, i == 0); /* the one token, then rate_limit */
    } else {
      luaretry_call_stop_cancelled(c, &d);
    }
    luaretry_call_free(c);
    CHECK_CODE(luaretry_policy_metrics(p, &m), LUARETRY_OK);
    CHECK_EQ_INT((long long)m.attempts, 0);
  }
  /* a call stopped by its answer: run says so, as report does */
  CHECK_CODE(luaretry_policy_load_string(p, "=s", "max_attempts = 3\ndeadline = 10\n"),
             LUARETRY_OK);
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  luaretry_outcome out;
  luaretry_outcome_init(&out);
  out.status = 200;
  CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
  CHECK_CODE(luaretry_call_report(c, &out, &d), LUARETRY_OK);
  CHECK_CODE(luaretry_call_run(c, op_unused, NULL, &d), LUARETRY_E_STATE);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "the call already stopped (success)");
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_SUCCESS);
  luaretry_call_free(c);
  /* a handle of another kind: refused, as every luaretry_call_* does */
  double secs = -1;
  long speed = -1;
  luaretry_call_stall((luaretry_call *)p, &secs, &speed);
  CHECK(secs == 0 && speed == 0);
  luaretry_policy_free(p);
}

int main(void) {
  if (chdir(LUARETRY_DATADIR) != 0) {
    perror(LUARETRY_DATADIR);
    return 1;
  }
  test_strerror();
  test_names();
  test_null_arguments();
  test_decision_lifetime();
  test_load_errors();
  test_limits_at_decision();
  test_memory();
  test_long_values();
  test_reentrant_log();
  test_refusal_named();
  test_bad_request();
  test_bad_outcome();
  test_errmsg_before_any_failure();
  test_bad_response();
  test_policy_refusals_named();
  test_print_nul();
  test_prepare_names_header();
  test_random_sequences_found();
  return check_done();
}
