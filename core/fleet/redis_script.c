/* redis_script.c: the fleet's state changes only inside one Redis Lua
 * script, so that the deltas of many processes apply atomically and in one
 * round trip.  It runs by EVALSHA from the first sync on, its SHA1
 * computed here (libcrypto) rather than asked of Redis: a process lives a
 * few seconds in an outage, and a SCRIPT LOAD at every connect was a
 * third of its round trips.  A server that does not hold the script (its
 * first use, SCRIPT FLUSH, a restart, a failover, another cluster node)
 * answers NOSCRIPT without running anything, and the same batch then goes
 * once more by EVAL, which puts the script in the cache under the same SHA
 * (Redis's EVALSHA docs describe exactly this pattern).  The connect no
 * longer proves that the server runs scripts for this user: the first
 * script's error reply does (lr_script_refused), said once as any other. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <hiredis.h>
#include <openssl/evp.h>

#include "fleet_internal.h"

/* The semantics of core/guard.c on the fleet's counts.  Times are Redis's
 * own (TIME), so hosts whose clocks disagree still agree on when an open
 * breaker goes half-open.  State 0 closed, 1 open, 2 half-open (the
 * values of luaretry_breaker_state).
 *   KEYS[1]  hash: tokens (milli), state, fails, opened_at (ms),
 *            probes_left, max, updated_at, cfg, cfg_at, cfg_by; with the
 *            client-side throttle, its ten buckets tsI (the bucket's
 *            number: Redis's ms over bucket_ms), trI, taI (requests and
 *            accepts), I = 0..9;
 *            and leased (the tokens out in leases, budget_lease.c)
 *   KEYS[2]  sorted set: member -> time of its last sync (ms)
 *   KEYS[3]  hash: member -> "H D": the budget's block it holds (milli)
 *            once Redis was told it drew D from its blocks in all
 *   KEYS[4]  sorted set: member -> when that entry expires (ms), negated
 *            for an empty block (the positive scores count the holders)
 *   ARGV     max_milli failures open_ms probes ttl_ms member
 *            spent earned trail resets want cfg
 *            requests accepts throttled cost_milli bucket_ms
 *            ldrawn lwant lttl_ms owner (whose settings: the process for a
 *            default member, so a reload's new handle changes them at once)
 *            rinterval_ms rspan_ms (the reserve's question, reserve.c's
 *            ARGV: 0 0 when none is asked)
 *            returned rperiod (probe permits a closing process hands
 *            back, of the half-open period opened at rperiod: 0 0 none)
 *   returns  {tokens, state, fails, opened_at, probes_left, granted, now,
 *            requests, accepts, lease, leased, reserve} (requests,
 *            accepts: the throttle's window, this batch in; lease: this
 *            member's block now; leased: every block out; reserve: 0 none
 *            asked of it, 1 a retry of the reserve taken, 2 the reserve
 *            spent), or the error "LUARETRY_SETTINGS <cfg>" (nothing
 *            changed)
 *
 * `tokens` is the fleet's tokens not leased out; tokens + leased <=
 * max_milli.  The lease's arithmetic is budget_lease.c's (its header says
 * why): expired blocks back to tokens, then this member's draws since
 * Redis last saw its total (from its block, past it from tokens), blocks
 * above half a lowered max_milli taken back, the batch, and the block
 * resized, granted only from tokens above half.
 *
 * The throttle's window is kept in buckets, not as a decayed pair: ten
 * buckets of a tenth of the window each are what the local throttle keeps
 * (engine/pace.c), so the fleet's refusal is the local formula on the
 * sum of every process's counts, and `simulate --fleet` models it with the
 * local code; a bucket costs three hash fields, written only by a batch
 * that counted something.
 *
 * The reserve's question (reserve.c) rides on the sync a call makes
 * after its retry's wait, when the fleet's tokens refused the retry before
 * it: once the batch is applied, if the fleet's tokens still refuse a
 * retry (the process's own rule: T + L above half of max allow, the
 * blocks out being the fleet's tokens still), the reserve's GCRA runs on
 * the hash's field rtat with RESERVE_SCRIPT's arithmetic, and the answer
 * says whether it took a retry for the call; when the tokens allow, the
 * reserve is not touched (0), and the process asks reserve.c's script if
 * its own view then refuses the retry (another thread's failure landed
 * meanwhile).  So a retry that lives on the reserve costs the one round
 * trip its sync costs, never two reserve retries.
 *
 * A throttling answer is priced here, throttled * cost_milli, by the cost
 * that cfg makes every process share; it is neutral to the breaker
 * (decide.c counts it in neither resets nor trail): it neither ends a run
 * of failures nor closes a half-open breaker.  Its probe's permit goes
 * back to the process that took it (decide.c), and with the permits that
 * process holds when its handle closes (sync.c's flush) to the fleet:
 * `returned` adds to probes_left while the breaker is still half-open in
 * the same period (a permit of an earlier one was renewed already), never
 * beyond `probes`, before this batch's permits are handed out.
 *
 * cfg is the guard settings as text: processes that share a key must
 * share them, or one budget would be spent by different rules.  The first
 * writer's stand until no process with them has synced for a minute
 * (then a new version of the policy takes over) or the process that last
 * synced with them changes them (a reload); any other process with
 * different settings is refused and goes on under its local guards. */
const char LR_FLEET_SCRIPT[] =
  "if redis.replicate_commands then redis.replicate_commands() end\n"
  "local t = redis.call('TIME')\n"
  "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
  "local a = {}\n"
  "for i = 1, 20 do a[i] = tonumber(ARGV[i]) end\n"
  "local max, failures, open_ms, probes, ttl = a[1], a[2], a[3], a[4], a[5]\n"
  "local spent, earned, trail, resets, want = a[7], a[8], a[9], a[10], a[11]\n"
  "local ldrawn, lwant, lttl = a[18], a[19], a[20]\n"
  "local h = redis.call('HMGET', KEYS[1], 'tokens', 'state', 'fails', 'opened_at', 'probes_left',\n"
  "  'cfg', 'cfg_at', 'cfg_by', 'leased')\n"
  "if h[6] and h[6] ~= ARGV[12] and h[8] ~= ARGV[21] and now - (tonumber(h[7]) or 0) < 60000 then\n"
  "  return redis.error_reply('LUARETRY_SETTINGS ' .. h[6])\n"
  "end\n"
  "local tokens = tonumber(h[1]) or max\n"
  "local state = tonumber(h[2]) or 0\n"
  "local fails = tonumber(h[3]) or 0\n"
  "local opened = tonumber(h[4]) or 0\n"
  "local left = tonumber(h[5]) or 0\n"
  /* the blocks' record is the hash's count of them (leased), their hash
   * and their expiries, the last two kept in being by an entry "" each
   * (below).  One of the three lost (evicted, deleted), the blocks out go
   * back to the tokens, as if they had all expired, and the rest of the
   * record goes too, so that each holder starts afresh and learns at its
   * next sync that its block is gone (as one whose entry expired does).
   * Without this, a lost hash left its tokens counted out for good.  Two
   * reads a sync, both made: a key of another type is refused by them
   * (WRONGTYPE) before anything is deleted; PEXPIRE 0 deletes (no command
   * beyond the script's) */
  "local leased = tonumber(h[9])\n"
  "local blocks = redis.call('HGET', KEYS[3], '')\n"
  "local expiries = #redis.call('ZRANGEBYSCORE', KEYS[4], 'inf', 'inf')\n"
  "if not leased or not blocks or expiries == 0 then\n"
  "  tokens, leased = tokens + (leased or 0), 0\n"
  "  redis.call('PEXPIRE', KEYS[3], 0)\n"
  "  redis.call('PEXPIRE', KEYS[4], 0)\n"
  "end\n"
  /* entries whose members stopped syncing go, a few a sync: a block's
   * (its score: when it expires) back to the tokens; an empty block's
   * (its score: minus when it expires, so that the positive scores count
   * the holders) with nothing to give */
  "for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '(0', now, 'LIMIT', 0, 16)) do\n"
  "  local held = tonumber(string.match(redis.call('HGET', KEYS[3], m) or '', '^%d+')) or 0\n"
  "  redis.call('HDEL', KEYS[3], m)\n"
  "  redis.call('ZREM', KEYS[4], m)\n"
  "  leased = leased - held\n"
  "  tokens = tokens + held\n"
  "end\n"
  "for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], -now, '(0', 'LIMIT', 0, 16)) do\n"
  "  redis.call('HDEL', KEYS[3], m)\n"
  "  redis.call('ZREM', KEYS[4], m)\n"
  "end\n"
  /* this member's entry, "H D": the block H it holds (milli) once Redis
   * had been told it drew D from its blocks in all.  What it drew since
   * (totals, so any number of lost answers, applied or not, count once):
   * from its block, and past it (a block taken back while it still drew
   * on it, its answer lost) from the tokens.  No entry (it expired, the
   * process away; an empty Redis): nothing, as the outage's other counts
   * (sync.c drops them: the local guards had them) */
  "local v = redis.call('HGET', KEYS[3], ARGV[6]) or ''\n"
  "local keep = tonumber(string.match(v, '^%d+')) or 0\n"
  "local seen = tonumber(string.match(v, '^%d+ (%d+)$'))\n"
  "local used = seen and math.max(0, ldrawn - seen) or 0\n"
  "local paid = math.min(keep, used)\n"
  "leased, keep, spent = leased - paid, keep - paid, spent + used - paid\n"
  "leased = math.max(keep, leased)\n"
  /* blocks are granted only from the tokens above half, so the blocks
   * out are never more than those (top).  A reload lowered max below
   * them: what is over comes back, from this member's block first, then
   * from other holders' (they learn it at their next sync; what they draw
   * past it meanwhile is charged as above).  Only then: one entry a
   * holder, each read at most once */
  "local top = max - math.ceil(max / 2)\n"
  "if leased > top then\n"
  "  local back = math.min(leased - top, keep)\n"
  "  leased, keep = leased - back, keep - back\n"
  "  local z = leased > top and redis.call('ZRANGEBYSCORE', KEYS[4], '(0', '(inf', 'WITHSCORES')\n"
  "  for i = 1, z and #z or 0, 2 do\n"
  "    local m = z[i]\n"
  "    local held, rest = string.match(redis.call('HGET', KEYS[3], m) or '', '^(%d+)(.*)$')\n"
  "    back = math.min(leased - top, tonumber(held) or 0)\n"
  "    if m ~= ARGV[6] and back > 0 then\n"
  "      redis.call('HSET', KEYS[3], m, string.format('%d', held - back) .. rest)\n"
  "      if held - back <= 0 then redis.call('ZADD', KEYS[4], -tonumber(z[i + 1]), m) end\n"
  "      leased = leased - back\n"
  "    end\n"
  "    if leased <= top then break end\n"
  "  end\n"
  "  leased = math.min(leased, top)\n" /* a count that drifted from the blocks' */
  "end\n"
  /* the budget: -1000 per failure, +ratio*1000 per success, within [0, max]
   * with the blocks out */
  "local requests, accepts, throttled, cost, width = a[13], a[14], a[15], a[16], a[17]\n"
  "tokens = math.max(0, math.min(max - leased, tokens + earned - spent - throttled * cost))\n"
  /* the block resized: given back, or grown from the tokens above half */
  "if lwant < keep then\n"
  "  tokens, leased, keep = tokens + keep - lwant, leased - (keep - lwant), lwant\n"
  "elseif lwant > keep then\n"
  "  local g = math.min(lwant - keep, math.floor((tokens - math.ceil(max / 2)) / 1000) * 1000)\n"
  "  if g > 0 then tokens, leased, keep = tokens - g, leased + g, keep + g end\n"
  "end\n"
  /* kept from its first block on (D is what makes a lost answer count
   * once; and a block given back before any draw may still be drawn on by
   * a process whose answer is lost or on its way), an empty block too (its
   * expiry negated, as above), and expiring when it stops syncing */
  "if keep > 0 or ldrawn > 0 or seen then\n"
  "  redis.call('HSET', KEYS[3], ARGV[6], string.format('%d %d', keep, ldrawn))\n"
  "  redis.call('ZADD', KEYS[4], keep > 0 and now + lttl or -(now + lttl), ARGV[6])\n"
  "else\n"
  "  redis.call('HDEL', KEYS[3], ARGV[6])\n"
  "  redis.call('ZREM', KEYS[4], ARGV[6])\n"
  "end\n"
  /* both kept in being, as the hash and the registry are, by an entry
   * named "" (no member's name): a Cluster's slot migrated key by key
   * meets the script's four keys together */
  "redis.call('HSET', KEYS[3], '', 0)\n"
  "redis.call('ZADD', KEYS[4], 'inf', '')\n"
  "redis.call('PEXPIRE', KEYS[3], ttl)\n"
  "redis.call('PEXPIRE', KEYS[4], ttl)\n"
  /* open -> half-open once open_ms passed, with `probes` permits */
  "if state == 1 and now - opened >= open_ms then state, opened, left = 2, now, probes end\n"
  /* a success or an answer ends the run and closes a half-open breaker */
  "if resets > 0 then\n"
  "  fails = 0\n"
  "  if state == 2 then state = 0 end\n"
  "end\n"
  /* the failures after the batch's last success: a half-open breaker opens
   * again; a closed one opens at `failures` in a row */
  "fails = fails + trail\n"
  "if trail > 0 and state == 2 then state, opened = 1, now\n"
  "elseif state == 0 and failures > 0 and fails >= failures then state, opened = 1, now end\n"
  /* permits handed back, of this half-open period only */
  "local handed, rperiod = tonumber(ARGV[24]) or 0, tonumber(ARGV[25]) or -1\n"
  "if handed > 0 and state == 2 and opened == rperiod then\n"
  "  left = math.min(probes, left + handed)\n"
  "end\n"
  /* probe permits; permits handed out and never reported are renewed
   * after another open period */
  "local granted = 0\n"
  "if want > 0 and state == 2 then\n"
  "  if left <= 0 and now - opened >= open_ms then opened, left = now, probes end\n"
  "  granted = math.min(want, left)\n"
  "  left = left - granted\n"
  "end\n"
  /* the throttle's window: this batch into the bucket of now, the sum of
   * the buckets within the window */
  "local wr, wa = 0, 0\n"
  "if width > 0 then\n"
  "  local slot, f = math.floor(now / width), {}\n"
  "  for i = 0, 9 do f[#f + 1] = 'ts' .. i; f[#f + 1] = 'tr' .. i; f[#f + 1] = 'ta' .. i end\n"
  "  local b = redis.call('HMGET', KEYS[1], unpack(f))\n"
  "  local i = slot % 10\n"
  "  local r, c = tonumber(b[3 * i + 2]) or 0, tonumber(b[3 * i + 3]) or 0\n"
  "  if tonumber(b[3 * i + 1]) ~= slot then r, c = 0, 0 end\n"
  "  if requests + accepts > 0 then\n"
  "    r, c = r + requests, c + accepts\n"
  "    redis.call('HSET', KEYS[1], 'ts' .. i, slot, 'tr' .. i, r, 'ta' .. i, c)\n"
  "    b[3 * i + 1], b[3 * i + 2], b[3 * i + 3] = slot, r, c\n"
  "  end\n"
  "  for j = 0, 9 do\n"
  "    local s = tonumber(b[3 * j + 1])\n"
  "    if s and s > slot - 10 and s <= slot then\n"
  "      wr = wr + (tonumber(b[3 * j + 2]) or 0)\n"
  "      wa = wa + (tonumber(b[3 * j + 3]) or 0)\n"
  "    end\n"
  "  end\n"
  "end\n"
  /* the reserve's question: asked, and the fleet's tokens refuse a
   * retry (T + L at most half of max, as the process judges them) */
  "local reserve, rint, rspan = 0, tonumber(ARGV[22]) or 0, tonumber(ARGV[23]) or 0\n"
  "if rint > 0 and (tokens + leased) * 2 <= max then\n"
  "  local tat = tonumber(redis.call('HGET', KEYS[1], 'rtat')) or 0\n"
  "  if tat < now - rspan then tat = now - rspan end\n"
  "  if now - tat < rint then reserve = 2\n"
  "  else\n"
  "    redis.call('HSET', KEYS[1], 'rtat', string.format('%.17g', tat + rint))\n"
  "    reserve = 1\n"
  "  end\n"
  "end\n"
  "redis.call('HSET', KEYS[1], 'tokens', tokens, 'state', state, 'fails', fails,\n"
  "  'opened_at', opened, 'probes_left', left, 'max', max, 'updated_at', now,\n"
  "  'cfg', ARGV[12], 'cfg_at', now, 'cfg_by', ARGV[21], 'leased', leased)\n"
  "redis.call('PEXPIRE', KEYS[1], ttl)\n"
  "redis.call('ZADD', KEYS[2], now, ARGV[6])\n"
  "redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - 60000)\n"
  "redis.call('PEXPIRE', KEYS[2], ttl)\n"
  "return {tokens, state, fails, opened, left, granted, now, wr, wa, keep, leased, reserve}\n";

int lr_script_sha(const char *script, char sha[41]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  sha[0] = '\0';
  if (!EVP_Digest(script, strlen(script), md, &n, EVP_sha1(), NULL) || n != 20) return 0;
  for (unsigned i = 0; i < n; i++) snprintf(sha + 2 * i, 3, "%02x", md[i]);
  return 1;
}

#define NEEDED " (Redis 5 or later with Lua scripting, for this user, is needed)"

/* A server without scripting for us: an ACL user without @scripting
 * (NOPERM), EVAL and EVALSHA renamed away (unknown command), a Redis too
 * old for the script (before 5: no redis.replicate_commands effects). */
static int no_scripting(const redisReply *r) {
  /* a NOPERM for a key ("...to access one of the keys", "...a key") is
   * the ACL's key pattern, not scripting: quoted as it is */
  if (r->str && strncmp(r->str, "NOPERM", 6) == 0) return strstr(r->str, "to run the") != NULL;
  static const char *const starts[] = { "ERR unknown command", "ERR unknown or disabled command" };
  for (size_t i = 0; r->str && i < sizeof starts / sizeof starts[0]; i++)
    if (strncmp(r->str, starts[i], strlen(starts[i])) == 0) return 1;
  return 0;
}

lr_fleet_code lr_script_refused(const lr_redis_url *u, const redisReply *r, const char *what,
                                const char *script, char *err, size_t errlen) {
  char text[204], cmd[32] = "";
  size_t shown = r->str ? r->len : 0;
  /* a command the user's ACL refuses, the script's or EVALSHA itself:
   * which, and every one the fleet needs (luaretry(1) --redis) */
  int acl = lr_acl_refused(r, script, cmd, sizeof cmd, &shown);
  lr_reply_quote_text(u, r->str ? r->str : "", shown, text, sizeof text);
  /* Redis 7 drops a long command (the sync's) sent before AUTH with this */
  int unauth = r->str && strncmp(r->str, "ERR Protocol error: unauthenticated", 35) == 0;
  char hint[240] = "";
  if (acl)
    lr_fmt(hint, sizeof hint, " (%s%sthe fleet's ACL user needs " LR_ACL_RUN "; +select for a /DB)",
           cmd, cmd[0] ? ": " : "");
  /* an ACL's refusal says what is needed: scripting is there */
  lr_fmt(err, errlen, "%s%s refused: %s%s%s", what,
         acl               ? ""
         : no_scripting(r) ? NEEDED
         : unauth          ? " (the server needs a password)"
                           : "",
         text, hint, lr_reply_wrongtype(r) ? WRONGTYPE_HINT : "");
  return lr_conn_error_code(r);
}

int lr_reply_wrongtype(const redisReply *r) {
  return r && r->type == REDIS_REPLY_ERROR && r->str && strncmp(r->str, "WRONGTYPE", 9) == 0;
}

void lr_fleet_cfg_text(const lr_fleet_limits *l, char *buf, size_t size) {
  lr_fmt(buf, size,
         "budget=%d max_tokens=%lld.%03lld token_ratio=%lld.%03lld breaker=%d "
         "failures=%lld open_ms=%lld probes=%lld throttle_cost=%lld.%03lld "
         "throttle_k=%lld.%03lld throttle_bucket_ms=%lld reserve=%lld.%03lld",
         l->budget, l->max_milli / 1000, l->max_milli % 1000, l->ratio_milli / 1000,
         l->ratio_milli % 1000, l->breaker, l->failures, l->open_ms, l->probes,
         l->cost_milli / 1000, l->cost_milli % 1000, l->k_milli / 1000, l->k_milli % 1000,
         l->bucket_ms, l->reserve_milli / 1000, l->reserve_milli % 1000);
}

lr_fleet_code lr_redis_script_append(lr_fleet_script *s, lr_redis_conn *c, const char *keys[4],
                                     const char *member, const char *owner,
                                     const lr_fleet_limits *l, const lr_fleet_batch *b) {
  enum { NUMS = 18 };
  long long nums[NUMS] = { l->max_milli, l->failures, l->open_ms,   l->probes,     l->ttl_ms,
                           b->spent,     b->earned,   b->trail,     b->resets,     b->want,
                           b->requests,  b->accepts,  b->throttled, l->cost_milli, l->bucket_ms,
                           b->ldrawn,    b->lwant,    b->lttl_ms };
  char text[NUMS][24], cfg[300], rq[2][32], back[2][24];
  for (int i = 0; i < NUMS; i++) lr_fmt(text[i], sizeof text[i], "%lld", nums[i]);
  /* as reserve.c sends them */
  lr_fmt(rq[0], sizeof rq[0], "%.17g", b->rinterval_ms);
  lr_fmt(rq[1], sizeof rq[1], "%.17g", b->rspan_ms);
  lr_fmt(back[0], sizeof back[0], "%lld", b->returned);
  lr_fmt(back[1], sizeof back[1], "%lld", b->rperiod);
  lr_fleet_cfg_text(l, cfg, sizeof cfg);
  if (!s->sha[0]) lr_script_sha(LR_FLEET_SCRIPT, s->sha); /* "" still: EVAL every time */
  int eval = s->use_eval || !s->sha[0];
  const char *argv[3 + LR_FLEET_KEYS + NUMS + 7] = { eval ? "EVAL" : "EVALSHA",
                                                     eval ? LR_FLEET_SCRIPT : s->sha, "4" };
  int n = 3;
  for (int i = 0; i < LR_FLEET_KEYS; i++) argv[n++] = keys[i];
  /* ARGV: the first five numbers, member, five more, cfg, the rest,
   * owner, the reserve's question, the permits handed back */
  for (int i = 0; i < NUMS; i++) {
    if (i == 5) argv[n++] = member;
    if (i == 10) argv[n++] = cfg;
    argv[n++] = text[i];
  }
  argv[n++] = owner;
  argv[n++] = rq[0];
  argv[n++] = rq[1];
  argv[n++] = back[0];
  argv[n++] = back[1];
  return lr_conn_append(c, n, argv, NULL);
}

static int integer_at(const redisReply *r, size_t i, long long *out) {
  if (i >= r->elements || !r->element || !r->element[i] ||
      r->element[i]->type != REDIS_REPLY_INTEGER)
    return 0;
  *out = r->element[i]->integer;
  return 1;
}

/* Redis's clock in ms, as TIME gives it: after 2001, before 2200.  Within
 * it no difference of two times overflows. */
#define REDIS_MS_MIN 1000000000000LL
#define REDIS_MS_MAX 7258118400000LL
/* The throttle's counts over a window: far beyond any fleet's */
#define WINDOW_MAX   1000000000000000LL

/* What the script can answer, given what was sent: anything else is a
 * broken reply (a proxy's, a stranger's), never used. */
static const char *out_of_range(const lr_fleet_reply *o, const lr_fleet_limits *l, long long want,
                                long long lwant, int rasked) {
  if (o->state < 0 || o->state > 2) return "a breaker state other than 0, 1 or 2";
  if (o->tokens < 0 || o->tokens > l->max_milli) return "tokens outside 0..max_tokens";
  if (o->fails < 0 || o->fails > INT_MAX) return "a negative or huge failure count";
  if (o->probes_left < 0 || o->probes_left > INT_MAX) return "a negative or huge probe count";
  if (o->granted < 0 || o->granted > want) return "more probe permits than were asked";
  if (o->now_ms < REDIS_MS_MIN || o->now_ms > REDIS_MS_MAX) return "a time of day out of range";
  if (o->opened_at < 0 || o->opened_at > o->now_ms) return "a breaker opened in the future";
  /* the script half-opens a breaker whose open period (ours: ARGV) ended,
   * and hands permits out only from a half-open one */
  if (o->state == 1 && l->open_ms > 0 && o->now_ms - o->opened_at >= l->open_ms)
    return "a breaker still open after its open period";
  if (o->granted > 0 && o->state != 2) return "probe permits from a breaker that is not half-open";
  if (o->requests < 0 || o->accepts < 0 || o->requests > WINDOW_MAX || o->accepts > WINDOW_MAX ||
      (!l->bucket_ms && (o->requests || o->accepts)))
    return "throttle counts that are negative, huge, or sent for no throttle";
  /* a block is never more than was asked for, nor the blocks out more
   * than max_tokens */
  if (o->lease < 0 || o->lease > lwant || o->leased < 0 || o->leased > l->max_milli ||
      o->lease > o->leased)
    return "a lease that is negative, more than was asked, or more than max_tokens";
  /* the reserve answers only when asked, and then exactly when the
   * fleet's tokens (free and in blocks) refuse a retry */
  if (o->reserve < 0 || o->reserve > 2) return "a reserve answer other than 0, 1 or 2";
  if (o->reserve && !rasked) return "a reserve answer to no question";
  if (rasked && (o->reserve != 0) != ((o->tokens + o->leased) * 2 <= l->max_milli))
    return "a reserve answer the fleet's tokens contradict";
  return NULL;
}

/* The word "name=value" of text whose name is that of word w (up to its
 * '='): its start and length in *at, *n, or 0. */
static int find_setting(const char *text, const char *w, size_t wn, const char **at, size_t *n) {
  const char *eq = memchr(w, '=', wn);
  size_t name = eq ? (size_t)(eq - w) + 1 : wn;
  for (const char *p = text; *p;) {
    size_t len = strcspn(p, " ");
    if (len >= name && strncmp(p, w, name) == 0) {
      *at = p, *n = len;
      return 1;
    }
    p += len;
    p += strspn(p, " ");
  }
  return 0;
}

/* Appends w[0..n) to out (a space between words), when it fits. */
static void add_word(char *out, size_t size, const char *w, size_t n) {
  size_t o = strlen(out);
  if (o + n + 2 > size) return;
  if (o) out[o++] = ' ';
  memcpy(out + o, w, n);
  out[o + n] = '\0';
}

/* Only the settings in which theirs and ours differ: both in full are
 * longer than a message shows, and the difference was cut off. */
static void settings_differ(const char *theirs, const char *ours, char *t, char *o, size_t size) {
  t[0] = o[0] = '\0';
  for (const char *p = ours; *p;) {
    size_t len = strcspn(p, " "), tn;
    const char *tw;
    int found = find_setting(theirs, p, len, &tw, &tn);
    if (!found || tn != len || strncmp(tw, p, len) != 0) {
      add_word(o, size, p, len);
      if (found) add_word(t, size, tw, tn);
    }
    p += len;
    p += strspn(p, " ");
  }
  for (const char *p = theirs; *p;) { /* theirs alone */
    size_t len = strcspn(p, " "), on;
    const char *ow;
    if (!find_setting(ours, p, len, &ow, &on)) add_word(t, size, p, len);
    p += len;
    p += strspn(p, " ");
  }
  if (!t[0] && !o[0]) { /* the same words: show both as they are */
    lr_fmt(t, size, "%s", theirs);
    lr_fmt(o, size, "%s", ours);
  }
}

static lr_fleet_code refused(lr_fleet_script *s, const lr_redis_url *u, const redisReply *r,
                             const lr_fleet_limits *l, int *noscript, char *err, size_t errlen) {
  *noscript = r->str && strncmp(r->str, "NOSCRIPT", 8) == 0;
  if (*noscript) s->use_eval = 1;
  if (r->str && strncmp(r->str, "LUARETRY_SETTINGS ", 18) == 0) {
    char theirs[204], ours[300], t[204], o[204];
    lr_reply_quote_text(u, r->str + 18, r->len - 18, theirs, sizeof theirs);
    lr_fleet_cfg_text(l, ours, sizeof ours);
    settings_differ(theirs, ours, t, o, sizeof t);
    lr_fmt(err, errlen,
           "the key is shared with other settings (theirs: %s; ours: %s): "
           "give this policy a fleet.key of its own, or reset the fleet",
           t[0] ? t : "none of these", o[0] ? o : "none of these");
    return LR_FLEET_E_REFUSED;
  }
  return lr_script_refused(u, r, s->use_eval ? "EVAL" : "EVALSHA", LR_FLEET_SCRIPT, err, errlen);
}

lr_fleet_code lr_redis_script_decode(lr_fleet_script *s, const lr_redis_url *u, const redisReply *r,
                                     const lr_fleet_limits *l, long long want, long long lwant,
                                     int rasked, lr_fleet_reply *out, int *noscript, char *err,
                                     size_t errlen) {
  *noscript = 0;
  if (r->type == REDIS_REPLY_ERROR) return refused(s, u, r, l, noscript, err, errlen);
  enum { FIELDS = 12 };
  long long *fields[FIELDS] = { &out->tokens,      &out->state,   &out->fails,  &out->opened_at,
                                &out->probes_left, &out->granted, &out->now_ms, &out->requests,
                                &out->accepts,     &out->lease,   &out->leased, &out->reserve };
  int ok = r->type == REDIS_REPLY_ARRAY && r->elements == FIELDS;
  for (size_t i = 0; ok && i < FIELDS; i++) ok = integer_at(r, i, fields[i]);
  if (!ok) {
    lr_fmt(err, errlen, "the fleet script's reply is not %d integers (%s)", FIELDS,
           lr_reply_kind(r));
    return LR_FLEET_E_PROTOCOL;
  }
  const char *why = out_of_range(out, l, want, lwant, rasked);
  if (why) {
    lr_fmt(err, errlen, "the fleet script's reply is out of range: %s", why);
    return LR_FLEET_E_PROTOCOL;
  }
  s->use_eval = 0; /* EVALSHA worked, or EVAL put the script back */
  return LR_FLEET_OK;
}

lr_fleet_code lr_redis_script_run(lr_fleet_script *s, lr_redis_conn *c, const lr_redis_url *u,
                                  const char *keys[4], const char *member, const char *owner,
                                  const lr_fleet_limits *l, const lr_fleet_batch *b,
                                  int64_t deadline_ms, lr_fleet_reply *out, char *err,
                                  size_t errlen) {
  lr_fleet_code rc = LR_FLEET_OK;
  for (int round = 0; round < 2; round++) { /* EVALSHA, then EVAL on NOSCRIPT */
    redisReply *r = NULL;
    int noscript = 0;
    rc = lr_redis_script_append(s, c, keys, member, owner, l, b);
    if (rc == LR_FLEET_OK) rc = lr_conn_read(c, deadline_ms, &r, err, errlen);
    if (rc != LR_FLEET_OK) return rc;
    rc = lr_redis_script_decode(s, u, r, l, b->want, b->lwant, b->rinterval_ms > 0, out, &noscript,
                                err, errlen);
    freeReplyObject(r);
    if (!noscript) break;
  }
  return rc;
}
