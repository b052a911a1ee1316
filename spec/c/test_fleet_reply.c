/* test_fleet_reply.c: the fleet's bounded reply reader and its decoders,
 * without any I/O (README "Fleet", "What is bounded"): each limit refuses
 * what passes it and takes what is just within it; every number of the
 * update script's answer is checked; a server's text is scrubbed of the
 * password before it is cut and has its control bytes escaped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "fleet.h"
#include "fleet_internal.h"
#include "check.h"

/* Feeds s whole; the first reply (freed by the caller) or NULL, the
 * code in *rc and why in err. */
static redisReply *read_one(const char *s, size_t n, lr_fleet_code *rc, char *err, size_t errlen) {
  struct redisReader *r = lr_reply_reader_new();
  redisReply *out = NULL;
  *rc = lr_reply_feed(r, s, n, err, errlen);
  if (*rc == LR_FLEET_OK) *rc = lr_reply_next(r, &out, err, errlen);
  lr_reply_reader_free(r);
  return out;
}

static void refused(const char *s, const char *why) {
  lr_fleet_code rc;
  char err[300] = "";
  redisReply *r = read_one(s, strlen(s), &rc, err, sizeof err);
  CHECK_EQ_INT(rc, LR_FLEET_E_PROTOCOL);
  CHECK(r == NULL);
  CHECK_CONTAINS(err, why);
  if (r) freeReplyObject(r);
}

static void test_limits(void) {
  refused("*4097\r\n", "an array of 4097 elements (at most 4096)");
  refused("*2000000000\r\n:1\r\n", "an array of 2000000000 elements");
  refused("*1\r\n*1\r\n*1\r\n:1\r\n", "nested deeper than 2");
  /* just within: 4096 elements, two levels */
  char *big = malloc(8 + 4096 * 4 + 1);
  strcpy(big, "*4096\r\n");
  for (int i = 0; i < 4096; i++) strcat(big + 7 + i * 4, ":1\r\n");
  lr_fleet_code rc;
  char err[300] = "";
  redisReply *r = read_one(big, strlen(big), &rc, err, sizeof err);
  CHECK_EQ_INT(rc, LR_FLEET_OK);
  if (CHECK(r != NULL)) CHECK_EQ_INT(r->elements, 4096);
  if (r) freeReplyObject(r);
  free(big);
  r = read_one("*1\r\n*1\r\n:1\r\n", 11, &rc, err, sizeof err);
  CHECK_EQ_INT(rc, LR_FLEET_OK);
  if (r) freeReplyObject(r);
  /* a line that never ends: refused once 1 MiB waits unparsed */
  struct redisReader *rd = lr_reply_reader_new();
  char chunk[65536];
  memset(chunk, 'a', sizeof chunk);
  chunk[0] = '+';
  rc = LR_FLEET_OK;
  int fed = 0;
  while (rc == LR_FLEET_OK && fed < 100) {
    rc = lr_reply_feed(rd, chunk, sizeof chunk, err, sizeof err);
    chunk[0] = 'a';
    fed++;
    redisReply *none = NULL;
    if (rc == LR_FLEET_OK) CHECK_EQ_INT(lr_reply_next(rd, &none, err, sizeof err), LR_FLEET_OK);
  }
  CHECK_EQ_INT(rc, LR_FLEET_E_PROTOCOL);
  CHECK_EQ_INT(fed, 17); /* 16 chunks make 1 MiB */
  CHECK_CONTAINS(err, "more than 1048576 bytes");
  lr_reply_reader_free(rd);
}

/* The update script's answer to a batch that asked `want` probe permits,
 * a block of `lwant` milli-tokens and the reserve (rasked).  A reply
 * written as the nine integers before leases ("*9...") gets a block of 0
 * and none out, and no reserve answer; one of the eleven before the
 * reserve's question ("*11..."), no reserve answer. */
static lr_fleet_code decode_reserve(const char *s, long long want, long long lwant, int rasked,
                                    lr_fleet_reply *out, char *err, size_t errlen) {
  char grown[400];
  if (strncmp(s, "*9\r\n", 4) == 0) {
    snprintf(grown, sizeof grown, "*12\r\n%s:0\r\n:0\r\n:0\r\n", s + 4);
    s = grown;
  } else if (strncmp(s, "*11\r\n", 5) == 0) {
    snprintf(grown, sizeof grown, "*12\r\n%s:0\r\n", s + 5);
    s = grown;
  }
  static lr_redis_url u;
  lr_redis_url_parse("redis://127.0.0.1/0", &u, err, errlen);
  lr_fleet_limits l = { .max_milli = 10000,
                        .failures = 5,
                        .open_ms = 1000,
                        .probes = 1,
                        .ttl_ms = 60000,
                        .ratio_milli = 100,
                        .budget = 1,
                        .breaker = 1 };
  lr_fleet_script sc = { .sha = "", .use_eval = 0 };
  lr_fleet_code rc;
  redisReply *r = read_one(s, strlen(s), &rc, err, errlen);
  if (!r) return rc;
  int noscript = 0;
  rc = lr_redis_script_decode(&sc, &u, r, &l, want, lwant, rasked, out, &noscript, err, errlen);
  freeReplyObject(r);
  return rc;
}

static lr_fleet_code decode_lease(const char *s, long long want, long long lwant,
                                  lr_fleet_reply *out, char *err, size_t errlen) {
  return decode_reserve(s, want, lwant, 0, out, err, errlen);
}

static lr_fleet_code decode_asking(const char *s, long long want, lr_fleet_reply *out, char *err,
                                   size_t errlen) {
  return decode_lease(s, want, 0, out, err, errlen);
}

static lr_fleet_code decode(const char *s, lr_fleet_reply *out, char *err, size_t errlen) {
  return decode_asking(s, 0, out, err, errlen);
}

static void answer_refused(const char *s, const char *why) {
  lr_fleet_reply out;
  char err[300] = "";
  CHECK_EQ_INT(decode(s, &out, err, sizeof err), LR_FLEET_E_PROTOCOL);
  CHECK_CONTAINS(err, why);
}

static void test_ranges(void) {
  lr_fleet_reply out;
  char err[300] = "";
  CHECK_EQ_INT(decode("*9\r\n:10000\r\n:1\r\n:5\r\n:1764000000000\r\n:0\r\n:0\r\n"
                      ":1764000000999\r\n:0\r\n:0\r\n",
                      &out, err, sizeof err),
               LR_FLEET_OK);
  CHECK_EQ_INT(out.opened_at, 1764000000000LL);
  /* open for its whole period (1000 ms): the script would have half-opened
   * it; a breaker open for ever would refuse every call */
  answer_refused(
    "*9\r\n:10000\r\n:1\r\n:5\r\n:1000000000000\r\n:0\r\n:0\r\n"
    ":1764000000000\r\n:0\r\n:0\r\n",
    "a breaker still open after its open period");
  /* a permit asked for: only a half-open breaker (2) hands one out */
  CHECK_EQ_INT(decode_asking("*9\r\n:0\r\n:2\r\n:0\r\n:1764000000000\r\n:0\r\n:1\r\n"
                             ":1764000000000\r\n:0\r\n:0\r\n",
                             1, &out, err, sizeof err),
               LR_FLEET_OK);
  CHECK_EQ_INT(decode_asking("*9\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:1\r\n"
                             ":1764000000000\r\n:0\r\n:0\r\n",
                             1, &out, err, sizeof err),
               LR_FLEET_E_PROTOCOL);
  CHECK_CONTAINS(err, "probe permits from a breaker that is not half-open");
  answer_refused("*9\r\n:10001\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:1764000000000\r\n:0\r\n:0\r\n",
                 "tokens outside 0..max_tokens");
  answer_refused("*9\r\n:-1\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:1764000000000\r\n:0\r\n:0\r\n",
                 "tokens");
  answer_refused("*9\r\n:0\r\n:3\r\n:0\r\n:0\r\n:0\r\n:0\r\n:1764000000000\r\n:0\r\n:0\r\n",
                 "state");
  answer_refused("*9\r\n:0\r\n:0\r\n:-5\r\n:0\r\n:0\r\n:0\r\n:1764000000000\r\n:0\r\n:0\r\n",
                 "failure count");
  answer_refused("*9\r\n:0\r\n:0\r\n:0\r\n:0\r\n:-1\r\n:0\r\n:1764000000000\r\n:0\r\n:0\r\n",
                 "probe count");
  answer_refused("*9\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:1\r\n:1764000000000\r\n:0\r\n:0\r\n",
                 "permits");
  answer_refused(
    "*9\r\n:0\r\n:1\r\n:0\r\n:1764000000001\r\n:0\r\n:0\r\n:1764000000000\r\n:0\r\n:0\r\n",
    "opened in the future");
  answer_refused("*9\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:-9223372036854775808\r\n:0\r\n:0\r\n",
                 "time of day");
  answer_refused("*9\r\n$-1\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n",
                 "not 12 integers");
  answer_refused("*7\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:1764000000000\r\n", "not 12 integers");
  answer_refused("$-1\r\n", "not 12 integers");
  /* throttle counts: none without a throttle, never negative */
  answer_refused("*9\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:1764000000000\r\n:5\r\n:0\r\n",
                 "throttle counts");
  answer_refused("*9\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:1764000000000\r\n:0\r\n:-1\r\n",
                 "throttle counts");
  /* the budget's block: at most what was asked (2 tokens here), within the
   * blocks out, which are within max_tokens */
  const char *base = "*11\r\n:4000\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:1764000000000\r\n:0\r\n:0\r\n";
  char text[300];
  snprintf(text, sizeof text, "%s:2000\r\n:6000\r\n", base);
  CHECK_EQ_INT(decode_lease(text, 0, 2000, &out, err, sizeof err), LR_FLEET_OK);
  CHECK_EQ_INT(out.lease, 2000);
  CHECK_EQ_INT(out.leased, 6000);
  const char *bad[][2] = { { ":3000", ":6000" },  /* more than asked */
                           { ":-1000", ":6000" }, /* negative */
                           { ":2000", ":1000" },  /* more than every block out */
                           { ":0", ":10001" } };  /* more out than max_tokens */
  for (int i = 0; i < 4; i++) {
    snprintf(text, sizeof text, "%s%s\r\n%s\r\n", base, bad[i][0], bad[i][1]);
    CHECK_EQ_INT(decode_lease(text, 0, 2000, &out, err, sizeof err), LR_FLEET_E_PROTOCOL);
    CHECK_CONTAINS(err, "a lease that is");
  }
}

/* The reserve's question, carried by the sync before a retry (issue 33):
 * its answer (the twelfth integer) is 0 when not asked, and when asked 1
 * (a retry of the reserve taken) or 2 (spent) exactly when the fleet's
 * tokens, free and in blocks, are at most half of max_tokens (10 here);
 * any other answer is a broken reply, never a retry of the reserve. */
static void test_reserve_answer(void) {
  lr_fleet_reply out;
  char err[300] = "", text[300];
  /* tokens free, tokens in blocks, the answer, asked, good */
  const struct {
    const char *tokens, *leased, *answer;
    int asked, good;
  } cases[] = {
    { "4000", "0", "1", 1, 1 },    /* 4 of 10: refused, a retry of the reserve taken */
    { "5000", "0", "2", 1, 1 },    /* exactly half refuses: the reserve spent */
    { "3000", "2000", "1", 1, 1 }, /* 3 free and 2 in blocks: half, refused */
    { "6000", "0", "0", 1, 1 },    /* 6: the tokens allow, the reserve untouched */
    { "4000", "2000", "0", 1, 1 }, /* 4 free and 2 in blocks: allowed */
    { "4000", "0", "0", 0, 1 },    /* not asked: none */
    { "4000", "0", "1", 0, 0 },    /* not asked, yet answered */
    { "4000", "0", "2", 0, 0 },    /* the same */
    { "4000", "0", "0", 1, 0 },    /* asked, the tokens refuse, no answer */
    { "6000", "0", "1", 1, 0 },    /* taken though the tokens allow */
    { "4000", "2000", "2", 1, 0 }, /* spent though the tokens allow */
    { "4000", "0", "3", 1, 0 },    /* no such answer */
    { "4000", "0", "-1", 1, 0 },   /* nor this */
    { "4000", "0", "$-1", 1, 0 },  /* nor a nil */
    { "4000", "0", "+1", 1, 0 },   /* nor a status */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int bulk = cases[i].answer[0] == '$' || cases[i].answer[0] == '+';
    snprintf(text, sizeof text,
             "*12\r\n:%s\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:1764000000000\r\n:0\r\n:0\r\n"
             ":%s\r\n:%s\r\n%s%s\r\n",
             cases[i].tokens, cases[i].leased, cases[i].leased, bulk ? "" : ":", cases[i].answer);
    lr_fleet_code rc = decode_reserve(text, 0, 2000, cases[i].asked, &out, err, sizeof err);
    if (!CHECK_EQ_INT(rc, cases[i].good ? LR_FLEET_OK : LR_FLEET_E_PROTOCOL))
      fprintf(stderr, "  case %zu: %s\n", i, err);
    if (cases[i].good) CHECK_EQ_INT(out.reserve, atoll(cases[i].answer));
    if (!cases[i].good && !bulk) CHECK_CONTAINS(err, "a reserve answer");
    if (bulk) CHECK_CONTAINS(err, "not 12 integers");
  }
}

static void quoted(const char *url, const char *text, const char *want, const char *secret) {
  lr_redis_url u;
  char err[300] = "", out[204];
  if (!CHECK_EQ_INT(lr_redis_url_parse(url, &u, err, sizeof err), LR_FLEET_OK)) return;
  lr_reply_quote_text(&u, text, strlen(text), out, sizeof out);
  CHECK_EQ_STR(out, want);
  if (secret) CHECK(strstr(out, secret) == NULL);
}

static void test_quotes(void) {
  char pw[241], url[300], text[400], want[204];
  for (int i = 0; i < 240; i++) pw[i] = "Zq7-"[i % 4];
  pw[240] = '\0';
  snprintf(url, sizeof url, "redis://:%s@h/0", pw);
  snprintf(text, sizeof text, "ERR AUTH %s called without any password", pw);
  /* scrubbed before the cut: no piece of it */
  quoted(url, text, "ERR AUTH *** called without any password", "Zq7-Zq7-");
  quoted("redis://:pw@h/0", "ERR invalid password pw", "ERR", "pw");
  quoted("redis://:PW@h/0", "PW is wrong", "", "PW");
  quoted("redis://h/0", "ERR \x1b[2J\x07 and \\", "ERR \\x1b[2J\\x07 and \\\\", NULL);
  /* cut at 200 bytes, never inside an escape */
  memset(text, 'x', 198);
  strcpy(text + 198, "\x01\x02");
  memset(want, 'x', 198);
  want[198] = '\0';
  quoted("redis://h/0", text, want, NULL);
  /* a user name is no secret: a short one hides nothing, the password
   * (short, or not) still never shows */
  quoted("redis://lr:lrPW0rd@h/0", "ERR The user executing the script can't run this command",
         "ERR The user executing the script can't run this command", "lrPW0rd");
  quoted("redis://lr:pw@h/0", "ERR invalid password pw", "ERR", "pw");
}

/* A script's error reply from its text, as lr_script_refused words it. */
static void refused_in_script(const char *reply, const char *script, const char *want,
                              const char * not ) {
  lr_redis_url u;
  lr_fleet_code rc;
  char err[512] = "";
  if (!CHECK_EQ_INT(lr_redis_url_parse("redis://lr:lrPW0rd@h/0", &u, err, sizeof err), LR_FLEET_OK))
    return;
  redisReply *r = read_one(reply, strlen(reply), &rc, err, sizeof err);
  if (!CHECK(r != NULL)) return;
  CHECK_EQ_INT(lr_script_refused(&u, r, "EVALSHA", script, err, sizeof err), LR_FLEET_E_REFUSED);
  CHECK_CONTAINS(err, want);
  CHECK_CONTAINS(err, "the fleet's ACL user needs " LR_ACL_RUN);
  if (not ) CHECK(strstr(err, not ) == NULL);
  freeReplyObject(r);
}

static void test_acl(void) {
  /* Redis 7.0 names the script's line, not the command: found there */
  refused_in_script(
    "-ERR The user executing the script can't run this command or subcommand "
    "script: 681f2d3e13582129c3ecc0713bef8e47ba80699a, on @user_script:2.\r\n",
    LR_FLEET_SCRIPT,
    "EVALSHA refused: ERR The user executing the script can't run this command "
    "or subcommand (TIME: ",
    "681f2d3e");
  refused_in_script(
    "-ERR The user executing the script can't run this command or subcommand "
    "script: 681f, on @user_script:9.\r\n",
    LR_FLEET_SCRIPT, "subcommand (HMGET: ", NULL);
  /* 7.2 names it, in words of its own */
  refused_in_script(
    "-ERR ACL failure in script: this user has no permissions to run the 'zadd' "
    "command script: 681f, on @user_script:40.\r\n",
    LR_FLEET_SCRIPT,
    "EVALSHA refused: ERR ACL failure in script: this user has no permissions to "
    "run the 'zadd' command (the fleet's",
    "681f");
  /* EVALSHA itself: scripting is there, the ACL refuses it */
  refused_in_script("-NOPERM this user has no permissions to run the 'evalsha' command\r\n",
                    LR_FLEET_SCRIPT,
                    "EVALSHA refused: NOPERM this user has no permissions to run the 'evalsha' "
                    "command (the fleet's",
                    "Redis 5 or later");
}

int main(void) {
  test_limits();
  test_ranges();
  test_reserve_answer();
  test_quotes();
  test_acl();
  return check_done();
}
