/* budget_lease.c: the retry budget's leases.  A process holds a block of
 * the fleet's budget tokens and spends it locally, so that most failures
 * make no round trip to Redis; what is left (and what successes earned)
 * goes back at the next sync.  The rate limiter leases blocks of slots in
 * the same way (engine/lease.c, redis_rate.c).
 *
 * What Redis holds (every key under the key's hash tag, one Cluster slot):
 *   luaretry:{KEY}          tokens: T, the fleet's tokens not leased out;
 *                           leased: L, the sum of the blocks out (milli)
 *   luaretry:{KEY}:leases   hash, member -> "H D": the block it holds
 *                           (milli) once Redis was told it had drawn D
 *                           from its blocks in all (kept from its
 *                           first block on, an empty block too)
 *   luaretry:{KEY}:lexp     sorted set, member -> when its entry expires
 *                           (Redis's ms; negated for an empty block, so
 *                           that the positive scores count the holders)
 * (both kept in being by an entry named "", as the hash and the registry
 * are, so that a Cluster's slot migrated key by key meets them together).
 * T + L <= max_tokens always; T + L changes only by what outcomes earn and
 * spend (a block taken, given back or expired moves tokens between T and
 * L) and by a lowered max_tokens.  A block is granted only from T above
 * max_tokens / 2, in whole tokens, so L <= the tokens above half.
 * `luaretry fleet` shows T + L as the fleet's tokens, L and the processes
 * holding a block.
 *
 * What a sync carries: the same one EVALSHA as before (redis_script.c),
 * no extra round trip, with three more numbers: ldrawn, what this
 * process's blocks have paid since it started (milli; it only grows);
 * lwant, the block it wants; the block's time to live.  A total, not a
 * delta or the block held now, so that any number of lost answers (a
 * timeout, a cancel: Redis applied the sync or not, nobody knows) count
 * each draw once: the next sync's total covers them all.  The script,
 * for the member:
 *   at most 16 expired blocks (0 < lexp <= now) go back to T first, and
 *     16 expired empty entries go
 *   H, D = leases[member]; used = ldrawn - D (no entry: 0, it expired with
 *     the process away or Redis came back empty, and what the process
 *     drew meanwhile goes as the outage's other counts do: dropped)
 *   paid = min(H, used); H -= paid; L -= paid; spent += used - paid
 *     (what it drew past its block, on a block given back by a sync
 *     whose answer was lost or taken back by a lowered max_tokens, comes
 *     from T)
 *   L above half of max (a reload lowered max_tokens): the excess comes
 *     back, from H first, then from other holders' entries (they learn
 *     it at their next sync; what they draw past it meanwhile is charged
 *     as above), so the bound below holds at once
 *   the batch's deltas on T, within [0, max - L]
 *   lwant < H: T += H - lwant; L -= H - lwant; H = lwant   (given back)
 *   lwant > H: g = min(lwant - H, whole tokens of T - max/2, >= 0);
 *              T -= g; L += g; H += g                       (granted)
 *   H > 0, ldrawn > 0 or an entry was there: leases[member] =
 *     "H ldrawn", lexp[member] = now + ttl (negated when H = 0); else
 *     none (a block given back before any draw keeps its entry: the
 *     process may draw on it until the answer reaches it, and without
 *     the entry the next sync would drop that draw as an expired one's)
 * and answers, beside the fleet's state, H (this process's block as Redis
 * keeps it) and L (the fleet's tokens out in leases).  The process then
 * holds allot - drawn, allot = ldrawn + H: its block less what it drew
 * since the batch left; less than nothing (it drew past the block Redis
 * kept) is charged by the next sync's total.
 *
 * When a round trip happens (budget on; the breaker and admission counts
 * ride along):
 *   - a failure its block pays for: none now; the sync of its sync period
 *     carries it (at most one a sync period; when no outcome follows, the
 *     worker's timer sends it at the period's end:
 *     lr_fleet_sync_within_period);
 *   - a failure the block does not pay for (none held, or empty): at once
 *     (the worker), when the view shows a token above half that is in no
 *     block, or is not fresh; otherwise the sync period's sync, as above
 *     (a retry refused needs no news);
 *   - before a retry, a blocking call's refresh: none while the block
 *     holds a token and the view is fresh; otherwise as before (for a
 *     retry the fleet's tokens refused before its wait, it asks the
 *     fleet's reserve too: redis_script.c, reserve.c);
 *   - a process holding a block and spending nothing: the worker's timer
 *     makes the sync that gives the block back two sync periods after
 *     its last failure;
 *   - lr_fleet_flush (a process's end, a reload): the block goes back.
 *
 * The block's size, set at each sync: d, the failures counted since the
 * last sync scaled to a sync period (d * sync_ms / elapsed, elapsed at
 * least a quarter of sync_ms); block = ceil(2 d) within [1, cap], so that
 * the sync period's sync tops it up before it runs dry; doubled (within
 * cap) when a failure found it empty since the last sync; no failure for
 * two sync periods: no block, what is held goes back.
 * cap = max(1, floor(max_tokens / 8)): a quarter of the tokens above
 * half, so that four processes at least can hold blocks at once.
 *
 * The retry gate stays the budget's on the fleet's tokens: a retry goes
 * while they are above half as this process sees them: T + L at the last
 * sync (other processes' blocks are the fleet's tokens still), its own
 * block as it is now, its unsent deltas.
 *
 * The fleet's bound: its retries are at most what its budget allows (the
 * tokens above half: max_tokens / 2 and token_ratio for each success,
 * plus budget.reserve a second, the reserve's floor, reserve.c), plus the
 * tokens out in leases (at most N processes x cap, and never more than
 * the tokens above half): a process without a block may spend, against
 * the fleet's count, tokens that another holds in its block and spends
 * too; and the block of a process killed before it gave it back returns
 * to T when it expires, whatever the process spent of it.  Lost answers
 * add nothing to it (the totals above).  Views one round trip old let
 * through what they did before leases; a process whose failures its
 * block pays for sends them once a sync period.
 *
 * Expiry: an entry lives stale_ms + command_timeout_ms + 1 s on Redis's
 * clock from the member's last sync; the process stops deciding with its
 * block after stale_ms (its view is no longer fresh), so it never spends
 * a block Redis gave back.  Redis down, slow or refusing: the local
 * guards decide (as before); failures meanwhile still draw the block
 * (they happened), and the next sync's total charges them to the block
 * if Redis still keeps it; if it expired they are dropped, as the
 * outage's other counts are (sync.c). */
#include <math.h>

#include "fleet_internal.h"

#define MILLI 1000

long long lr_budget_lease_held(lr_fleet *f) {
  return atomic_load(&f->allot) - atomic_load(&f->drawn);
}

/* The fleet's tokens at the last sync (the blocks other processes held
 * then among them), with this process's block and what it has counted
 * since (sent or not), clamped as the script clamps. */
long long lr_fleet_tokens_milli(lr_fleet *f) {
  long long t = atomic_load(&f->tokens) + atomic_load(&f->others) + lr_budget_lease_held(f) +
                atomic_load(&f->inflight_net) + atomic_load(&f->earned) - atomic_load(&f->spent) -
                atomic_load(&f->throttled) * atomic_load(&f->cost_milli);
  long long max = atomic_load(&f->max_milli);
  return t < 0 ? 0 : t > max ? max : t;
}

long lr_budget_lease_cap(long long max_milli) {
  long cap = (long)(max_milli / MILLI / 8);
  return cap < 1 ? 1 : cap;
}

int lr_budget_lease_draw(lr_fleet *f) {
  atomic_fetch_add_explicit(&f->lfails, 1, memory_order_relaxed);
  long long d = atomic_load_explicit(&f->drawn, memory_order_relaxed);
  /* a settle moving allot meanwhile may let one draw past the block:
   * drawn says so, and the next sync charges it (exact either way) */
  while (atomic_load_explicit(&f->allot, memory_order_relaxed) - d >= MILLI)
    if (atomic_compare_exchange_weak_explicit(&f->drawn, &d, d + MILLI, memory_order_relaxed,
                                              memory_order_relaxed))
      return 1;
  /* none left: the next block is a bigger one */
  atomic_store_explicit(&f->lshort, 1, memory_order_relaxed);
  return 0;
}

int lr_budget_lease_worth_asking(lr_fleet *f) {
  if (!atomic_load_explicit(&f->budget, memory_order_relaxed)) return 1; /* as before leases */
  if (!lr_fleet_fresh(f, lr_monotonic_coarse_ms())) return 1;
  /* a whole token above half that is in no block (blocks come from those) */
  long long max = atomic_load(&f->max_milli), half = (max + 1) / 2;
  return lr_fleet_tokens_milli(f) - lr_budget_lease_held(f) - atomic_load(&f->others) - half >=
         MILLI;
}

int lr_budget_lease_covers(lr_fleet *f) {
  return atomic_load_explicit(&f->budget, memory_order_relaxed) &&
         lr_budget_lease_held(f) >= MILLI && lr_fleet_fresh(f, lr_monotonic_coarse_ms());
}

/* Twice the failures of a sync period, from d counted over `elapsed` ms. */
static long block_for(lr_fleet *f, long long d, int64_t elapsed, int shortage, long cap) {
  int64_t floor_ms = f->set.sync_ms / 4 + 1;
  if (elapsed < floor_ms) elapsed = floor_ms;
  double two = 2.0 * (double)d * f->set.sync_ms / (double)elapsed;
  long block = two >= (double)cap ? cap : (long)ceil(two);
  if (shortage && block < 2 * f->lease_block) block = 2 * f->lease_block;
  return block < 1 ? 1 : block > cap ? cap : block;
}

void lr_budget_lease_take(lr_fleet *f, lr_fleet_batch *b, int64_t now) {
  b->lttl_ms = (long long)f->set.stale_ms + f->set.command_timeout_ms + 1000;
  long long d = atomic_exchange(&f->lfails, 0);
  int shortage = atomic_exchange(&f->lshort, 0);
  int64_t elapsed = f->lease_taken_at ? now - f->lease_taken_at : f->set.sync_ms;
  f->lease_taken_at = now;
  long long max = atomic_load(&f->max_milli);
  long block = f->lease_block;
  if (!atomic_load(&f->budget) || f->lease_closing)
    block = 0;
  else if (d > 0)
    block = block_for(f, d, elapsed, shortage, lr_budget_lease_cap(max)), f->lease_spent_at = now;
  else if (now - f->lease_spent_at >= 2 * (int64_t)f->set.sync_ms)
    block = 0; /* two sync periods without a failure: the block goes back */
  if (block > lr_budget_lease_cap(max)) block = lr_budget_lease_cap(max); /* a reload lowered it */
  f->lease_block = block;
  b->lwant = (long long)block * MILLI;
  /* what the blocks paid in all: a sync whose answer was lost may have
   * been applied or not, and the total makes the next one right either way */
  b->ldrawn = atomic_load(&f->drawn);
}

void lr_budget_lease_settle(lr_fleet *f, const lr_fleet_batch *b, const lr_fleet_reply *r,
                            lr_fleet_work_fn sync_fn) {
  f->lease_acked = b->ldrawn;
  atomic_store(&f->leased, r->leased);
  atomic_store(&f->others, r->leased - r->lease);
  f->lease_redis = r->lease;
  /* the block as Redis keeps it after the draws it was told of; draws
   * since come off it, and any past it the next sync charges */
  atomic_store(&f->allot, b->ldrawn + r->lease);
  /* a block held and nothing else due: the worker gives it back once two
   * sync periods pass without a failure (a sync before then sets it anew) */
  if (r->lease > 0 && !f->lease_closing)
    lr_fleet_timer(f, lr_monotonic_ms() + 2 * (int64_t)f->set.sync_ms + 1, sync_fn);
}
