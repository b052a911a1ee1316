/* quota.c: pacing by the server's own word, before a 429 comes
 * (rate = { headers = true }).  A `RateLimit: "name";r=R;t=T` field
 * (draft-ietf-httpapi-ratelimit-headers; RateLimit-Remaining/-Reset and
 * X-RateLimit-Remaining/-Reset of older drafts and of common use) says R
 * more requests are taken in the next T seconds: the policy's next
 * attempts, all its calls together, are spread over the T seconds so that
 * at most R go (R = 0: none until T passes).  Attempts already sent when
 * the answer was read may not be in the server's count: an answer's R is
 * lowered by the attempts paced after its own, so answers read in any
 * order agree.  Answers whose resets fall within a quarter of the window
 * of each other are the same window's: the lower count wins.  Past the
 * window the attempts go `spacing` apart (RateLimit-Policy's w / q, else
 * T / (R + 1) of the window's first answer) until the server says more;
 * a slot there is not held ahead: the call asks again when it comes, as
 * the server's answers by then may say more.
 * The window is taken to end 2% after its reset; a reset past
 * max_retry_after is ignored, as fields that do not read are.  The state
 * is the policy's in this process (the fleet's Redis does not share it).
 * Time is the guard clock (virtual in simulations). */
#include <math.h>
#include <time.h>

#include "engine.h"

/* A window is taken to end a little after its reset: a server's clock and
 * its rounding of t to whole seconds must not make the next attempt early. */
#define SLACK 1.02

static void lock(lr_quota_pace *q) { lr_lock(&q->lock); }

static void unlock(lr_quota_pace *q) { lr_unlock(&q->lock); }

void lr_quota_reset(lr_quota_pace *q) {
  lock(q);
  q->until = q->span = q->next = q->spacing = 0;
  q->left = 0;
  q->sent = 0;
  unlock(q);
}

double lr_quota_reserve(lr_shared *s, double at, double latest, double u, unsigned long long *seq,
                        int *held) {
  lr_quota_pace *q = &s->pace.quota;
  lock(q);
  double start = q->next > at ? q->next : at, next;
  int in_window = start < q->until && q->left > 0;
  if (in_window) {
    next = start + (q->until - start) / (double)q->left; /* the rest spread over what is left */
  } else {
    if (start < q->until) start = q->until; /* spent: none until the window ends */
    next = start + q->spacing;
  }
  if (latest >= 0 && start > latest) {
    unlock(q);
    return -1;
  }
  *held = in_window || start <= at;
  if (!*held) {
    /* past the window the server has said nothing yet: ask again then
     * (spread over a slot), when its answers may have */
    unlock(q);
    return start - at + u * q->spacing;
  }
  if (in_window) q->left--;
  q->next = next;
  *seq = ++q->sent;
  unlock(q);
  return start - at;
}

/* What the fields said, into the state (under its lock). */
static void merge(lr_quota_pace *q, const lr_quota_hint *h, unsigned long long seq, double now) {
  double until = now + h->reset * SLACK;
  long long later = seq && q->sent >= seq ? (long long)(q->sent - seq) : 0;
  long long left = (long long)h->remaining - later;
  if (left < 0) left = 0;
  if (q->until <= now || until > q->until + q->span / 4) { /* a new window */
    q->until = until;
    q->span = h->reset;
    q->left = left;
    q->next = now; /* the attempts paced past the old window are counted in `later` */
    q->spacing = h->remaining > 0 ? h->reset / (h->remaining + 1) : 0;
  } else { /* the same window: the lower count, the later end */
    if (left < q->left) q->left = left;
    if (until > q->until) q->until = until;
  }
  if (h->quota > 0) q->spacing = h->window / h->quota;
}

int lr_quota_answer(lr_shared *s, const lr_guards *g, const luaretry_header *headers, size_t count,
                    unsigned long long seq, double now) {
  if (!g->rate_headers || !isfinite(now) || !count) return 0;
  struct timespec wall; /* an epoch reset is measured against it */
  clock_gettime(CLOCK_REALTIME, &wall);
  lr_quota_hint h;
  int v = lr_quota_read(headers, count, (double)wall.tv_sec + (double)wall.tv_nsec * 1e-9, &h);
  if (v <= 0) return v;
  double most = g->rate_headers_max_wait;
  if (h.reset > most) return -1; /* never a wait past max_retry_after */
  if (h.quota > 0 && h.window / h.quota > most) h.quota = 0;
  lr_quota_pace *q = &s->pace.quota;
  lock(q);
  merge(q, &h, seq, now);
  unlock(q);
  return 1;
}
