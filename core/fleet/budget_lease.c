/* budget_lease.c: the retry budget's leases.  A process holds a block of
 * the fleet's budget tokens and spends it locally, so that most failures
 * make no round trip to Redis; what is left (and what successes earned)
 * goes back at the next sync.  The rate limiter leases blocks of slots in
 * the same way (engine/lease.c, redis_rate.c).
 *
 * What Redis holds (every key under the key's hash tag, one Cluster slot):
 *   luaretry:{KEY}          tokens: T, the fleet's tokens not leased out;
 *                           leased: L, the sum of the blocks out (milli)
 *   luaretry:{KEY}:leases   hash, member -> the block it holds (milli)
 *   luaretry:{KEY}:lexp     sorted set, member -> when its block expires
 *                           (Redis's ms)
 * T + L <= max_tokens always; T + L changes only by what outcomes earn and
 * spend (a block taken, given back or expired moves tokens between T and
 * L).  A block is granted only from T above max_tokens / 2, in whole
 * tokens: a lease never takes the fleet's count below half, where retries
 * stop.
 *
 * What a sync carries: the same one EVALSHA as before (redis_script.c),
 * no extra round trip, with three more numbers: lused (milli this process
 * spent from its block since its last sync: the failures the block
 * covered), ladj (milli: > 0 asks for that much more, < 0 gives that much
 * back) and the block's time to live.  The script, for the member:
 *   H = leases[member] (0 when its block expired)
 *   used = min(lused, H); H -= used; L -= used     (spent: gone for good)
 *   ladj < 0: back = min(-ladj, H); H -= back; L -= back; T += back
 *   ladj > 0: g = min(ladj, whole tokens of T - max/2, >= 0);
 *             T -= g; L += g; H += g
 *   H > 0: leases[member] = H, lexp[member] = now + ttl; else both gone
 *   then at most 16 expired blocks (lexp <= now) go back to T
 * and answers, beside the fleet's state, H (this process's block as Redis
 * keeps it) and L (the fleet's tokens out in leases).  The process's own
 * block becomes H less what it spent since the batch left.
 *
 * When a round trip happens (budget on; the breaker and admission counts
 * ride along):
 *   - a failure its block covers: none now; the sync of its sync period
 *     carries it (lr_fleet_maybe_sync: at most one a sync period while
 *     outcomes come);
 *   - a failure the block does not cover (none held, or empty), or the
 *     failure that empties it: at once (the worker), when the view shows
 *     tokens above half that a block could come from or is not fresh;
 *     otherwise the sync period's sync (a refused retry needs no news);
 *   - before a retry, a blocking call's refresh: none while the block
 *     holds a token and the view is fresh; otherwise as before;
 *   - a process holding a block and spending nothing: the worker's timer
 *     makes the sync that gives the block back one sync period later;
 *   - lr_fleet_flush (a process's end, a reload): the block goes back.
 *
 * The block's size, set at each sync: d, the failures counted since the
 * last sync scaled to a sync period (d * sync_ms / elapsed, elapsed at
 * least a quarter of sync_ms); block = ceil(d) within [1, cap], doubled
 * (within cap) when a failure found it empty since the last sync; d = 0:
 * no block, what is held goes back.  cap = max(1, floor(max_tokens / 8)):
 * a quarter of the tokens above half, so that four processes at least can
 * hold blocks at once.  The sync asks ladj = block - held.
 *
 * The retry gate stays the budget's: a retry goes while the fleet's
 * tokens as this process sees them are above half, its own block counted
 * among them: T at the last sync + the block it holds + its unsent
 * deltas.  Other processes' blocks are not seen (they are theirs to
 * spend), which refuses sooner, never later.
 *
 * The fleet's bound: its retries are at most what its budget allows (the
 * tokens above half: max_tokens / 2 and token_ratio for each success,
 * plus budget.reserve a second, the reserve's floor, reserve.c), plus the
 * tokens out in leases (at most N processes x cap: a block taken is paid
 * for before it is spent, but the block of a process killed before it
 * gave it back returns to T when it expires, whatever the process spent of
 * it), plus what a view one round trip old let through (a failure no block
 * covers, against the tokens above half it saw), as before leases.
 *
 * Expiry: a block lives stale_ms + command_timeout_ms + 1 s on Redis's
 * clock from the sync that granted or renewed it; the process stops
 * deciding with it after stale_ms (its view is no longer fresh), so it
 * never spends a block Redis gave back.  Redis down, slow or refusing:
 * the local guards decide (as before); failures meanwhile still draw the
 * block (they happened), which is spent then dropped: the next sync says
 * what was used, or finds the block expired and gives the process none. */
#include "fleet_internal.h"
