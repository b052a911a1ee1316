/* redis_acl.c: what an ACL user of the fleet needs, and the words that
 * say so when it lacks one.  Redis 7 checks the ACL at every redis.call
 * inside a script, so a user allowed EVALSHA and EVAL (@scripting) is
 * still refused the commands the scripts run, and Redis 7.0's words name
 * neither the command nor what is needed ("ERR The user executing the
 * script can't run this command or subcommand script: SHA, on
 * @user_script:2.").  The command is found on that line of the script (or
 * in 7.2's words: "ERR ACL failure in script: this user has no permissions
 * to run the 'time' command script: ..."), and the list is said with it.
 * luaretry(1) --redis lists the same commands; spec/fleet_acl_spec.lua
 * holds the list to the scripts' redis.call and to a real Redis. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "fleet_internal.h"

/* Redis's words for a command the ACL refuses (not a key: a key pattern
 * that misses the fleet's keys is said in Redis's own words), in a script
 * (7.0, 7.2) or outside one. */
static const char *const REFUSALS[] = {
  "can't run this command or subcommand", /* 7.0, in a script */
  "no permissions to run the",            /* NOPERM; 7.2 in a script */
};

/* The command of redis.call on line `line` of script, upper-cased. */
static void command_on_line(const char *script, long line, char *cmd, size_t size) {
  const char *p = script;
  for (long l = 1; p && l < line; l++) {
    p = strchr(p, '\n');
    if (p) p++;
  }
  if (!p || line < 1) return;
  const char *end = strchr(p, '\n'), *call = strstr(p, "redis.call('");
  if (!call || (end && call > end)) return;
  call += strlen("redis.call('");
  size_t n = strcspn(call, "'\n");
  for (size_t i = 0; i < n && i + 1 < size; i++) {
    cmd[i] = (char)toupper((unsigned char)call[i]);
    cmd[i + 1] = '\0';
  }
}

int lr_acl_refused(const redisReply *r, const char *script, char *cmd, size_t size, size_t *shown) {
  if (size) cmd[0] = '\0';
  if (!r || r->type != REDIS_REPLY_ERROR || !r->str) return 0;
  int refused = 0;
  for (size_t i = 0; i < sizeof REFUSALS / sizeof REFUSALS[0] && !refused; i++)
    refused = strstr(r->str, REFUSALS[i]) != NULL;
  if (!refused) return 0;
  /* a script's error ends " script: SHA, on @user_script:LINE.": the line
   * names the command when Redis's words do not (7.0's), and the rest is
   * noise */
  const char *tail = NULL;
  for (const char *p = strstr(r->str, " script: "); p; p = strstr(p + 1, " script: ")) tail = p;
  const char *at = tail ? strstr(tail, "@user_script:") : NULL;
  if (at && script && !strstr(r->str, "to run the '"))
    command_on_line(script, strtol(at + strlen("@user_script:"), NULL, 10), cmd, size);
  *shown = at ? (size_t)(tail - r->str) : r->len;
  return 1;
}
