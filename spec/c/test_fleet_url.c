/* test_fleet_url.c: the Redis URL and the fleet key, without any I/O:
 * what is accepted, what each part becomes, and that no message (error or
 * redacted URL) carries a credential. */
#include <stdio.h>
#include <string.h>

#include <hiredis.h>

#include "fleet.h"
#include "fleet_internal.h"
#include "check.h"

static void parses(const char *url, const char *host, int port, int db) {
  lr_redis_url u;
  char err[300] = "";
  if (!CHECK_EQ_INT(lr_redis_url_parse(url, &u, err, sizeof err), LR_FLEET_OK)) {
    fprintf(stderr, "  %s: %s\n", url, err);
    return;
  }
  CHECK_EQ_STR(u.host, host);
  CHECK_EQ_INT(u.port, port);
  CHECK_EQ_INT(u.db, db);
  CHECK_EQ_INT(u.is_unix, 0);
}

static void refuses(const char *url, const char *why) {
  lr_redis_url u;
  char err[300] = "";
  CHECK_EQ_INT(lr_redis_url_parse(url, &u, err, sizeof err), LR_FLEET_E_ARG);
  CHECK_CONTAINS(err, why);
  CHECK(strstr(err, "s3cret") == NULL);
}

static void test_tcp(void) {
  parses("redis://127.0.0.1:6390/2", "127.0.0.1", 6390, 2);
  parses("redis://localhost", "localhost", 6379, 0);
  parses("redis://cache.internal/", "cache.internal", 6379, 0);
  parses("redis://[::1]:7000/15", "::1", 7000, 15);
  parses("redis://:pw@h:1/0", "h", 1, 0);
  refuses("redis://h:0/1", "PORT 1-65535");
  /* a byte no host name holds: named here, not as a host not found */
  parses("redis://my_host.example-1:7000/2", "my_host.example-1", 7000, 2);
  refuses("redis://localhost#frag", "the host \"localhost#frag\" holds '#'");
  refuses("redis://loc alhost:1", "holds the byte 0x20");
  refuses("redis://h\x01/0", "holds the byte 0x01");
  refuses("redis://h:65536", "PORT 1-65535");
  refuses("redis://h:6379/x", "DB a number");
  refuses("redis://:s3cret@h:6379/x", "DB a number");
  refuses("redis://", "HOST");
  refuses("http://h", "expected redis://");
  refuses("rediss://h", "TLS (rediss://) needs a hiredis built with TLS support");
  refuses(NULL, "expected redis://");
}

static void test_credentials(void) {
  lr_redis_url u;
  char err[300] = "";
  CHECK_EQ_INT(lr_redis_url_parse("redis://alice:s3cret%40x@10.0.0.3:6380/1", &u, err, sizeof err),
               LR_FLEET_OK);
  CHECK_EQ_STR(u.user, "alice");
  CHECK_EQ_STR(u.password, "s3cret@x");
  CHECK_EQ_STR(u.redacted, "redis://***@10.0.0.3:6380/1");
  /* as redis-cli: userinfo without a colon is a password alone */
  CHECK_EQ_INT(lr_redis_url_parse("redis://s3cret@h", &u, err, sizeof err), LR_FLEET_OK);
  CHECK_EQ_STR(u.user, "");
  CHECK_EQ_STR(u.password, "s3cret");
  CHECK_EQ_STR(u.redacted, "redis://***@h:6379/0");
  /* the last '@' ends the userinfo: a password may hold one unencoded */
  CHECK_EQ_INT(lr_redis_url_parse("redis://:a@b@h", &u, err, sizeof err), LR_FLEET_OK);
  CHECK_EQ_STR(u.password, "a@b");
  CHECK_EQ_STR(u.host, "h");
  refuses("redis://:s3cret%zz@h", "percent-encode");
  refuses("redis://:s3cret%00@h", "percent-encode");
  /* a '/' or '?' unencoded in a password ends the userinfo early: the
   * form's message alone would not say so */
  refuses("redis://:s3/cret@h:1/0", "'/', '?' or '#' in a user or password must be percent");
  refuses("redis://:s3?cret@h:1/0", "must be percent-encoded");
  refuses("unix://:s3/cret@/tmp/r.sock", "must be percent-encoded");
  refuses("redis-sentinel://:s3#cret@h:1#m", "must be percent-encoded");
  /* a server's message that quotes a credential is scrubbed */
  char msg[200] = "ERR user alice with s3cret@x denied";
  CHECK_EQ_INT(lr_redis_url_parse("redis://alice:s3cret%40x@h", &u, err, sizeof err), LR_FLEET_OK);
  lr_redis_url_scrub(&u, msg);
  CHECK_EQ_STR(msg, "ERR user *** with *** denied");
}

static void test_unix(void) {
  lr_redis_url u;
  char err[300] = "";
  CHECK_EQ_INT(lr_redis_url_parse("unix:///run/redis/redis.sock", &u, err, sizeof err),
               LR_FLEET_OK);
  CHECK_EQ_INT(u.is_unix, 1);
  CHECK_EQ_STR(u.path, "/run/redis/redis.sock");
  CHECK_EQ_INT(u.db, 0);
  CHECK_EQ_STR(u.redacted, "unix:///run/redis/redis.sock?db=0");
  CHECK_EQ_INT(lr_redis_url_parse("unix://:s3cret@/tmp/r.sock?db=4", &u, err, sizeof err),
               LR_FLEET_OK);
  CHECK_EQ_STR(u.path, "/tmp/r.sock");
  CHECK_EQ_STR(u.password, "s3cret");
  CHECK_EQ_INT(u.db, 4);
  CHECK_EQ_STR(u.redacted, "unix://***@/tmp/r.sock?db=4");
  CHECK_EQ_INT(lr_redis_url_parse("redis+unix:///tmp/r.sock", &u, err, sizeof err), LR_FLEET_OK);
  refuses("unix://relative.sock", "absolute PATH");
  refuses("unix:///tmp/r.sock?database=1", "?db=N");
  char longpath[200];
  memset(longpath, 'x', sizeof longpath);
  memcpy(longpath, "unix:///", 8);
  longpath[sizeof longpath - 1] = '\0';
  refuses(longpath, "at most 107 bytes");
}

/* Lettuce's form: sentinels (26379 by default), the DB, the master */
static void test_sentinel(void) {
  lr_redis_url u;
  char err[300] = "";
  CHECK_EQ_INT(lr_redis_url_parse("redis-sentinel://alice:s3cret@10.0.0.1,10.0.0.2:26380,[::1]:7/3"
                                  "#my%2Dmaster",
                                  &u, err, sizeof err),
               LR_FLEET_OK);
  CHECK_EQ_INT(u.sentinels, 3);
  CHECK_EQ_STR(u.sentinel_host[0], "10.0.0.1");
  CHECK_EQ_INT(u.sentinel_port[0], 26379);
  CHECK_EQ_STR(u.sentinel_host[1], "10.0.0.2");
  CHECK_EQ_INT(u.sentinel_port[1], 26380);
  CHECK_EQ_STR(u.sentinel_host[2], "::1");
  CHECK_EQ_INT(u.sentinel_port[2], 7);
  CHECK_EQ_INT(u.db, 3);
  CHECK_EQ_STR(u.master, "my-master");
  CHECK_EQ_STR(u.user, "alice");
  CHECK_EQ_STR(u.password, "s3cret");
  CHECK_EQ_STR(u.redacted,
               "redis-sentinel://***@10.0.0.1:26379,10.0.0.2:26380,[::1]:7/3#my-master");
  CHECK_EQ_INT(lr_redis_url_parse("redis-sentinel://h#m", &u, err, sizeof err), LR_FLEET_OK);
  CHECK_EQ_INT(u.db, 0);
  CHECK_EQ_STR(u.redacted, "redis-sentinel://h:26379/0#m");
  refuses("redis-sentinel://:s3cret@h:26379/0", "the master's name (#MASTER) is missing");
  refuses("redis-sentinel://h:26379/0#", "(#MASTER) is missing");
  refuses("redis-sentinel://h/0#a%20b", "a space or control byte");
  refuses("redis-sentinel://h:0#m", "PORT 1-65535");
  refuses("redis-sentinel://h,,k#m", "expected redis-sentinel://");
  refuses("redis-sentinel://h/x#m", "DB a number");
  refuses("redis-sentinel://#m", "expected redis-sentinel://");
  refuses("redis-sentinel://a,b,c,d,e,f,g,h,i#m", "more than 8 sentinels");
  refuses("sentinel://h#m", "redis-sentinel://HOST:PORT");
}

/* The cluster's hash slot (CRC16-XMODEM mod 16384), as the Redis Cluster
 * specification's examples and `redis-cli cluster keyslot` give it, and
 * which redirects are believed. */
static void test_cluster(void) {
  CHECK_EQ_INT(lr_cluster_slot("123456789", 9), 0x31C3); /* the CRC's check value */
  CHECK_EQ_INT(lr_cluster_slot("foo", 3), 12182);
  CHECK_EQ_INT(lr_cluster_slot("bar", 3), 5061);
  CHECK_EQ_INT(lr_cluster_slot("{user1000}.following", 20), lr_cluster_slot("user1000", 8));
  /* the first {...} decides; an empty one makes no tag (the whole key) */
  CHECK(lr_cluster_slot("foo{}{bar}", 10) != lr_cluster_slot("bar", 3));
  CHECK_EQ_INT(lr_cluster_slot("{}x", 3) == lr_cluster_slot("", 0), 0); /* {} is no tag */
  CHECK_EQ_INT(lr_cluster_slot("luaretry:{gcs}", 14), lr_cluster_slot("luaretry:{gcs}:procs", 20));
  lr_redis_conn c;
  lr_conn_init(&c);
  c.slot = 12182;
  redisReply r = { .type = REDIS_REPLY_ERROR };
  const char *ignored[] = { "MOVED 5061 127.0.0.1:7001", /* another slot */
                            "MOVED 12182 127.0.0.1:0",   /* no port */
                            "MOVED 12182 127.0.0.1",     /* no port */
                            "MOVED x 127.0.0.1:7001",    /* no slot */
                            "MOVED 12182 a b:7001",      /* a space */
                            "CLUSTERDOWN The cluster is down",
                            "TRYAGAIN",
                            "ASK 1 h:1" };
  for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++) {
    r.str = (char *)ignored[i];
    r.len = strlen(ignored[i]);
    lr_cluster_note(&c, &r);
    CHECK_EQ_INT(c.redirected, 0);
  }
  r.str = "MOVED 12182 127.0.0.1:7002";
  r.len = strlen(r.str);
  lr_cluster_note(&c, &r);
  CHECK_EQ_INT(c.redirected, 1);
  CHECK_EQ_STR(c.moved_host, "127.0.0.1");
  CHECK_EQ_INT(c.moved_port, 7002);
  int redirects = 0;
  CHECK_EQ_INT(lr_cluster_again(&c, &redirects), 1);
  r.str = "ASK 12182 [::1]:7003";
  r.len = strlen(r.str);
  lr_cluster_note(&c, &r);
  CHECK_EQ_STR(c.ask_host, "[::1]");
  CHECK_EQ_INT(c.ask_port, 7003);
  /* bounded: the fourth redirect in one round trip is not followed */
  CHECK_EQ_INT(lr_cluster_again(&c, &redirects), 1);
  c.redirected = 1;
  CHECK_EQ_INT(lr_cluster_again(&c, &redirects), 1);
  c.redirected = 1;
  CHECK_EQ_INT(lr_cluster_again(&c, &redirects), 0);
  CHECK_EQ_INT(c.ask_port, 0);
  /* no host (Redis 7's unknown-endpoint, the cluster specification): the
   * host the command went to, on the port given: this connection's MOVED
   * node, or "" for the URL's own */
  lr_fmt(c.moved_host, sizeof c.moved_host, "10.0.0.5");
  c.moved_port = 7001;
  r.str = "MOVED 12182 :7004";
  r.len = strlen(r.str);
  lr_cluster_note(&c, &r);
  CHECK_EQ_INT(c.redirected, 1);
  CHECK_EQ_STR(c.moved_host, "10.0.0.5");
  CHECK_EQ_INT(c.moved_port, 7004);
  c.moved_port = 0;
  lr_cluster_note(&c, &r);
  CHECK_EQ_STR(c.moved_host, "");
  CHECK_EQ_INT(c.moved_port, 7004);
  lr_conn_free(&c);
}

static void test_new(void) {
  lr_fleet_settings s;
  lr_fleet_settings_init(&s);
  lr_fleet *f = NULL;
  char err[300] = "";
  /* no I/O: a handle is made with nothing listening */
  CHECK_EQ_INT(lr_fleet_new("redis://:s3cret@127.0.0.1:1/0", "gcs", &s, &f, err, sizeof err),
               LR_FLEET_OK);
  lr_fleet_view v;
  lr_fleet_view_get(f, &v);
  CHECK_EQ_INT(v.health, LR_FLEET_UNKNOWN);
  CHECK_EQ_INT(v.fresh, 0);
  CHECK_EQ_STR(v.where, "redis://***@127.0.0.1:1/0");
  CHECK_EQ_INT(lr_fleet_budget_allows_retry(f), LR_FLEET_LOCAL);
  CHECK_EQ_INT(lr_fleet_breaker_admits(f, 1), LR_FLEET_LOCAL);
  lr_fleet_free(f);
  lr_fleet_free(NULL);
  const char *bad_keys[] = { "", "a b", "a{b", "x}", "tab\t" };
  for (size_t i = 0; i < sizeof bad_keys / sizeof *bad_keys; i++) {
    f = (lr_fleet *)&s;
    CHECK_EQ_INT(lr_fleet_new("redis://h", bad_keys[i], &s, &f, err, sizeof err), LR_FLEET_E_ARG);
    CHECK(f == NULL);
    CHECK_CONTAINS(err, "fleet key");
  }
  CHECK_EQ_INT(lr_fleet_new("redis://h", NULL, &s, &f, err, sizeof err), LR_FLEET_E_ARG);
  CHECK_EQ_STR(lr_fleet_strerror(LR_FLEET_E_TIMEOUT), "Redis did not answer in time");
  CHECK_EQ_STR(lr_fleet_health_name(LR_FLEET_DEGRADED), "degraded");
}

int main(void) {
  test_tcp();
  test_credentials();
  test_unix();
  test_sentinel();
  test_cluster();
  test_new();
  return check_done();
}
