/* many.c: many requests, each its own retried call of one policy, through
 * one libcurl multi handle driven by one loop: luaretry_curl_perform_many.
 * A call waiting for its backoff holds no transfer slot. */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "http.h"

struct luaretry_curl_many {
  CURLM *multi;
  int wake_fd; /* eventfd written by a cancel */
  int next_fd; /* luaretry_curl_many_next_fd's, or -1 */
  atomic_int cancelled;
};

luaretry_code luaretry_curl_many_new(luaretry_curl_many **out) {
  if (!out) return LUARETRY_E_ARG;
  *out = NULL;
  luaretry_curl_many *m = calloc(1, sizeof *m);
  if (!m) return LUARETRY_E_NOMEM;
  atomic_init(&m->cancelled, 0);
  m->next_fd = -1;
  m->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (m->wake_fd < 0) {
    free(m);
    return LUARETRY_E_SYSTEM;
  }
  m->multi = curl_multi_init();
  if (!m->multi) {
    close(m->wake_fd);
    free(m);
    return LUARETRY_E_NOMEM;
  }
  *out = m;
  return LUARETRY_OK;
}

void luaretry_curl_many_free(luaretry_curl_many *m) {
  if (!m) return;
  curl_multi_cleanup(m->multi);
  close(m->wake_fd);
  free(m);
}

void luaretry_curl_many_cancel(luaretry_curl_many *m) {
  if (!m) return;
  int saved = errno;
  atomic_store(&m->cancelled, 1);
  uint64_t one = 1;
  ssize_t n = write(m->wake_fd, &one, sizeof one);
  (void)n; /* a full counter is already readable: the loop wakes anyway */
  errno = saved;
}

int luaretry_curl_many_cancelled(const luaretry_curl_many *m) {
  return m ? atomic_load(&((luaretry_curl_many *)m)->cancelled) : 0;
}

CURLM *luaretry_curl_many_multi(luaretry_curl_many *m) { return m ? m->multi : NULL; }

luaretry_code luaretry_curl_many_next_fd(luaretry_curl_many *m, int fd) {
  if (!m || fd < -1) return LUARETRY_E_ARG;
  m->next_fd = fd;
  return LUARETRY_OK;
}

void luaretry_curl_many_options_init(luaretry_curl_many_options *o) {
  if (o) memset(o, 0, sizeof *o);
}

typedef struct slot slot;

/* A call in progress: in a transfer (s != NULL) or waiting until `due`.
 * A waiting call holds no easy handle either (the connections live in the
 * multi handle): its next attempt makes one from the template. */
#define MAX_HEDGES 10 /* hedge.max's bound */

typedef struct live_call {
  luaretry_call *c;
  CURL *h;
  size_t index;           /* the job's number */
  luaretry_curl_job *job; /* jobs[index], or `own` for a pulled job */
  luaretry_curl_job own;
  int next;                 /* the number of its next attempt */
  double due;               /* monotonic seconds */
  slot *s;                  /* its attempt's transfer (on h) */
  slot *hedges[MAX_HEDGES]; /* its hedges' transfers, each on a copy of h */
  int nhedges;
  lr_resume resume; /* what its sink holds of a download */
} live_call;

/* A transfer slot: its attempt's buffers, and the call using it. */
struct slot {
  lr_http_attempt a;
  live_call *call;
  CURL *h;       /* the transfer's handle */
  int id;        /* its attempt's number */
  char *request; /* a hedged round's copy of what prepare() made */
  int answered;  /* its answer's head moved the slow start already */
};

typedef struct {
  luaretry_curl_many *m;
  luaretry_policy *p;
  luaretry_curl_job *jobs; /* the array, or NULL when pulled from o->next */
  size_t n, next_job;
  int source_done;  /* o->next said there are no more */
  int source_later; /* ... none yet: asked again once the loop wakes */
  const luaretry_curl_many_options *o;
  luaretry_call_options copt;
  size_t body_limit;    /* the policy's, for each attempt */
  int hedging;          /* the policy has a hedge */
  double stall_timeout; /* the policy's */
  long stall_speed;
  slot *slots;
  size_t nslots, busy;
  size_t window;       /* transfers that may run: nslots, or less in a slow start */
  double window_at;    /* when it last grew (monotonic seconds) */
  live_call *calls;    /* ncalls entries; c == NULL: free */
  live_call **spare;   /* the free entries, a stack */
  live_call **waiting; /* calls waiting for their retry: a heap on due */
  size_t ncalls, nlive, nspare, nwaiting;
} batch;

/* ---- the waiting calls, earliest first */

static void heap_swap(live_call **h, size_t i, size_t j) {
  live_call *t = h[i];
  h[i] = h[j];
  h[j] = t;
}

static void wait_push(batch *b, live_call *lc) {
  live_call **h = b->waiting;
  size_t i = b->nwaiting++;
  h[i] = lc;
  while (i > 0 && h[(i - 1) / 2]->due > h[i]->due) {
    heap_swap(h, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
}

static live_call *wait_pop(batch *b) {
  live_call **h = b->waiting;
  live_call *top = h[0];
  h[0] = h[--b->nwaiting];
  for (size_t i = 0;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < b->nwaiting && h[l]->due < h[m]->due) m = l;
    if (r < b->nwaiting && h[r]->due < h[m]->due) m = r;
    if (m == i) break;
    heap_swap(h, i, m);
    i = m;
  }
  return top;
}

/* ---- jobs and calls */

static int more_jobs(const batch *b) { return b->jobs ? b->next_job < b->n : !b->source_done; }
/* A job may be asked for now (more_jobs, and o->next did not just say
 * "none yet"). */
static int job_ready(const batch *b) { return more_jobs(b) && !b->source_later; }

/* `why`: the batch's own reason for code (the host's sink refused...), or
 * NULL for the call's. */
static void finish_job(batch *b, luaretry_curl_job *job, size_t i, luaretry_code code,
                       const luaretry_decision *d, luaretry_call *c, const char *why) {
  luaretry_curl_result *r = &job->result;
  r->code = code;
  if (d) r->final = *d;
  r->elapsed = c ? luaretry_call_elapsed(c) : 0;
  if (code != LUARETRY_OK) {
    /* the call's own message; the policy's (this thread's) only when no
     * call began */
    const char *m = why ? why : c ? luaretry_call_errmsg(c) : luaretry_policy_errmsg(b->p);
    r->errmsg = m[0] ? m : luaretry_strerror(code);
  }
  if (b->o->done) b->o->done(b->o->done_ud, i, job);
  r->final.message = NULL;
  r->final.hook_error = NULL;
  r->errmsg = NULL;
}

/* A slot's transfer ends here (cancelled, or reported): its handle out of
 * the multi, its headers and request copy freed, the slot free again. */
static void free_slot(batch *b, slot *s) {
  curl_multi_remove_handle(b->m->multi, s->h);
  curl_easy_setopt(s->h, CURLOPT_HTTPHEADER, NULL);
  curl_slist_free_all(s->a.headers);
  s->a.headers = NULL;
  free(s->request);
  s->request = NULL;
  s->call = NULL;
  b->busy--;
}

/* The call's hedges still in flight, cancelled (never reported). */
static void drop_hedges(batch *b, live_call *lc) {
  for (int k = 0; k < lc->nhedges; k++) {
    CURL *h = lc->hedges[k]->h;
    free_slot(b, lc->hedges[k]);
    curl_easy_cleanup(h);
  }
  lc->nhedges = 0;
}

static void release(batch *b, live_call *lc) {
  if (lc->s) free_slot(b, lc->s); /* a call ended with its transfers in flight */
  drop_hedges(b, lc);
  if (lc->h) curl_easy_cleanup(lc->h);
  lr_resume_free(&lc->resume);
  memset(lc, 0, sizeof *lc);
  b->spare[b->nspare++] = lc;
  b->nlive--;
}

static void end_call_saying(batch *b, live_call *lc, luaretry_code code, const luaretry_decision *d,
                            const char *why) {
  finish_job(b, lc->job, lc->index, code, d, lc->c, why);
  luaretry_call_free(lc->c);
  release(b, lc);
}

static void end_call(batch *b, live_call *lc, luaretry_code code, const luaretry_decision *d) {
  end_call_saying(b, lc, code, d, NULL);
}

/* The next job as given: jobs[i], or one pulled from o->next into
 * lc->own.  NULL when there is none. */
static luaretry_curl_job *given_job(batch *b, live_call *lc) {
  if (b->jobs) return b->next_job < b->n ? &b->jobs[b->next_job++] : NULL;
  if (b->source_done || b->source_later) return NULL;
  memset(&lc->own, 0, sizeof lc->own);
  int given = b->o->next(b->o->next_ud, b->next_job, &lc->own);
  if (given <= 0) {
    if (given < 0) /* a list still being written: the calls go on meanwhile */
      b->source_later = 1;
    else
      b->source_done = 1;
    return NULL;
  }
  memset(&lc->own.result, 0, sizeof lc->own.result);
  b->next_job++;
  return &lc->own;
}

/* The next job whose request can be sent: one that cannot ends at once,
 * never begun (LUARETRY_E_ARG, its errmsg saying why), as luaretry_curl_perform
 * refuses it; the others go on.  NULL when there is none. */
static luaretry_curl_job *take_job(batch *b, live_call *lc) {
  for (luaretry_curl_job *job; (job = given_job(b, lc));) {
    char why[300] = "";
    /* a pulled job without a request ends so too, as the array's are refused */
    luaretry_code rc = !job->request || !job->request->url
                         ? LUARETRY_E_ARG
                         : lr_curl_sendable(job->request, why, sizeof why);
    if (rc == LUARETRY_OK) return job;
    finish_job(b, job, b->next_job - 1, rc, NULL, NULL, why[0] ? why : NULL);
  }
  return NULL;
}

/* Begins the next job's call; NULL when it ended at once (refused), the
 * call table is full, or there is no job left. */
static live_call *begin_next(batch *b) {
  if (!b->nspare) return NULL;
  live_call *lc = b->spare[b->nspare - 1];
  luaretry_curl_job *job = take_job(b, lc);
  if (!job) return NULL;
  size_t i = b->next_job - 1;
  b->nspare--;
  b->nlive++;
  lc->job = job;
  lc->index = i;
  luaretry_call_options opt = b->copt;
  if (job->call) { /* the job's own (a deadline of its own); the clock is the run's */
    opt = *job->call;
    opt.flags =
      (opt.flags & ~LUARETRY_CALL_VIRTUAL_TIME) | (b->copt.flags & LUARETRY_CALL_VIRTUAL_TIME);
  } else if (opt.flags & LUARETRY_CALL_SEED) {
    opt.seed += i;
  }
  luaretry_code rc = luaretry_call_begin(b->p, &opt, &lc->c);
  if (rc != LUARETRY_OK) {
    finish_job(b, job, i, rc, NULL, NULL, NULL);
    release(b, lc);
    return NULL;
  }
  luaretry_call_on_decision(lc->c, job->observer, job->observer_ud);
  lc->next = 1;
  if (lr_resume_init(&lc->resume, job->resume) != 0) {
    finish_job(b, job, i, LUARETRY_E_ARG, NULL, NULL, NULL);
    luaretry_call_free(lc->c);
    release(b, lc);
    return NULL;
  }
  return lc;
}

/* Ends lc as having failed before its attempt `next` could start. */
static void end_unstarted(batch *b, live_call *lc, luaretry_code rc) {
  luaretry_decision d;
  memset(&d, 0, sizeof d);
  d.attempt = lc->next - 1;
  d.elapsed = luaretry_call_elapsed(lc->c);
  end_call(b, lc, rc, &d);
}

/* Starts lc's next attempt on a free slot; ends the call instead when it
 * may not go on.  Kept whole: each failing step must undo the same
 * handle and slot state, which one exit path does. */
static void start_attempt(batch *b, live_call *lc) {
  luaretry_decision d;
  luaretry_code rc = luaretry_call_next(lc->c, &d);
  if (rc != LUARETRY_OK || !d.retry) {
    end_call(b, lc, rc, &d);
    return;
  }
  if (d.wait > 0) { /* the rate limiter's token comes later: wait without a slot */
    if (b->copt.flags & LUARETRY_CALL_VIRTUAL_TIME) {
      luaretry_call_wait(lc->c, d.wait);
      lc->due = 0;
    } else {
      lc->due = lr_curl_now() + d.wait;
    }
    wait_push(b, lc);
    return;
  }
  if (!lc->h) {
    lc->h = b->o->easy ? curl_easy_duphandle(b->o->easy) : curl_easy_init();
    if (lc->h && b->o->share) curl_easy_setopt(lc->h, CURLOPT_SHARE, b->o->share);
    if (!lc->h) {
      end_unstarted(b, lc, LUARETRY_E_NOMEM);
      return;
    }
    curl_easy_setopt(lc->h, CURLOPT_PRIVATE, (void *)lc);
  }
  slot *s = NULL;
  for (size_t k = 0; k < b->nslots && !s; k++)
    if (!b->slots[k].call) s = &b->slots[k];
  /* the attempt's timeout, clipped again when a full table made it late */
  double timeout = luaretry_call_timeout(lc->c);
  double deadline = luaretry_call_deadline(lc->c);
  if (deadline > 0) {
    double left = deadline - luaretry_call_elapsed(lc->c);
    if (left < 0.001) left = 0.001;
    if (timeout == 0 || left < timeout) timeout = left;
  }
  const luaretry_curl_job *job = lc->job;
  lr_io io = { .body_limit = b->body_limit,
               .sink = job->sink,
               .sink_ud = job->sink_ud,
               .restart = job->restart,
               .max_body = job->max_body,
               .upload = job->upload,
               .upload_ud = job->upload_ud,
               .stall_timeout = b->stall_timeout,
               .stall_speed = b->stall_speed,
               .resume = &lc->resume };
  int id = lc->next;
  if (b->hedging && (rc = luaretry_call_start(lc->c, &id)) != LUARETRY_OK) {
    end_unstarted(b, lc, rc);
    return;
  }
  rc = lr_curl_attempt_setup(lc->c, job->request, id, lc->h, timeout, &io, &s->a);
  if (rc == LUARETRY_OK && b->hedging && lr_curl_own_request(job->request, &s->a, &s->request) != 0)
    rc = LUARETRY_E_NOMEM;
  if (rc == LUARETRY_OK && curl_multi_add_handle(b->m->multi, lc->h) != CURLM_OK)
    rc = LUARETRY_E_NOMEM;
  if (rc != LUARETRY_OK) {
    curl_easy_setopt(lc->h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(s->a.headers);
    s->a.headers = NULL;
    free(s->request);
    s->request = NULL;
    end_unstarted(b, lc, rc);
    return;
  }
  s->call = lc;
  s->h = lc->h;
  s->id = id;
  s->answered = 0;
  lc->s = s;
  b->busy++;
}

/* A free transfer slot, or NULL. */
static slot *free_slot_of(batch *b) {
  for (size_t k = 0; k < b->nslots; k++)
    if (!b->slots[k].call) return &b->slots[k];
  return NULL;
}

/* Hedge `id` of lc on a free slot, a copy of lc's handle, its body kept
 * whole (the attempt on lc->h owns the stream).  An error ends the call. */
static void start_hedge(batch *b, live_call *lc, int id, double timeout) {
  slot *s = free_slot_of(b);
  CURL *h = s && lc->h && lc->nhedges < MAX_HEDGES ? curl_easy_duphandle(lc->h) : NULL;
  luaretry_code rc = LUARETRY_E_NOMEM;
  if (h) {
    const luaretry_curl_job *job = lc->job;
    lr_io io = { .body_limit = b->body_limit,
                 .sink = job->sink,
                 .sink_ud = job->sink_ud,
                 .upload = job->upload,
                 .upload_ud = job->upload_ud,
                 .stall_timeout = b->stall_timeout,
                 .stall_speed = b->stall_speed,
                 /* no restart: no Range; the host's checksum holds for it */
                 .resume = &lc->resume };
    curl_easy_setopt(h, CURLOPT_PRIVATE, (void *)lc);
    rc = lr_curl_attempt_setup(lc->c, job->request, id, h, timeout, &io, &s->a);
    if (rc == LUARETRY_OK && lr_curl_own_request(job->request, &s->a, &s->request) != 0)
      rc = LUARETRY_E_NOMEM;
    if (rc == LUARETRY_OK && curl_multi_add_handle(b->m->multi, h) != CURLM_OK)
      rc = LUARETRY_E_NOMEM;
  }
  if (h) {
    s->call = lc;
    s->h = h;
    s->id = id;
    s->answered = 0;
    lc->hedges[lc->nhedges++] = s;
    b->busy++;
  }
  if (rc == LUARETRY_OK) return;
  luaretry_decision d;
  memset(&d, 0, sizeof d);
  d.attempt = id;
  d.elapsed = luaretry_call_elapsed(lc->c);
  end_call(b, lc, rc, &d);
}

/* Hedges due now go; the ms until the next one is due, within `ms`. */
static int hedges_due(batch *b, int ms) {
  if (!b->hedging) return ms;
  for (size_t k = 0; k < b->ncalls; k++) {
    live_call *lc = &b->calls[k];
    if (!lc->c || (!lc->s && !lc->nhedges)) continue;
    double in = luaretry_call_hedge_in(lc->c);
    if (in < 0) continue;
    if (in > 0 || b->busy >= b->nslots) {
      int wait = in > 0 ? (int)ceil(in * 1000) : 1000;
      if (wait < ms) ms = wait;
      continue;
    }
    luaretry_decision d;
    luaretry_code rc = luaretry_call_hedge(lc->c, lc->job->request, &d);
    if (rc != LUARETRY_OK) {
      end_call(b, lc, rc, &d);
      continue;
    }
    if (d.retry) start_hedge(b, lc, d.attempt, d.next_timeout);
  }
  return ms;
}

/* The winner's body to the job's sink: a hedge's replaces what the
 * stream got.  0, or -1 when the host refused it (why in `why`). */
static int deliver(live_call *lc, slot *s, int hedge, const luaretry_decision *d, char *why,
                   size_t cap) {
  luaretry_curl_job *job = lc->job;
  if (!hedge && lr_resume_end(&s->a.t, d) != 0) {
    snprintf(why, cap, "%s", s->a.t.detail);
    return -1;
  }
  if (d->reason == LUARETRY_REASON_CANCELLED || !job->sink) return 0;
  if (!hedge && job->restart) return 0; /* streamed already */
  /* a deadline keeps the stream for a later call to resume, as a cancel
   * does: a hedge cut with the call won nothing */
  if (job->restart && d->reason == LUARETRY_REASON_DEADLINE) return 0;
  /* a hedge's empty body too: the stream's bytes are the loser's */
  return lr_curl_give_body(job->sink, hedge ? job->restart : NULL, job->sink_ud, s->a.t.body.data,
                           s->a.t.body.len, why, cap);
}

/* A transfer of lc (on slot s) ended with `res`: report it and follow the
 * decision. */
static void end_attempt(batch *b, live_call *lc, slot *s, CURLcode res) {
  int hedge = s != lc->s;
  curl_multi_remove_handle(b->m->multi, s->h);
  luaretry_outcome out;
  luaretry_decision d;
  memset(&d, 0, sizeof d);
  luaretry_code rc = lr_curl_attempt_finish(s->h, &s->a, res, &out);
  char why[sizeof s->a.t.detail] = ""; /* the host's sink or upload stopped it */
  if (rc == LUARETRY_E_OPERATION) snprintf(why, sizeof why, "%s", s->a.t.detail);
  if (rc == LUARETRY_OK)
    rc = b->hedging ? luaretry_call_report_attempt(lc->c, s->id, &out, &d)
                    : luaretry_call_report(lc->c, &out, &d);
  luaretry_curl_job *job = lc->job;
  if (rc == LUARETRY_OK) {
    job->result.status = out.status;
    job->result.error = out.error;
    /* a slow start: each answer that is not throttling lets one more run
     * (a 2xx or 3xx did as its head came: answered_heads) */
    if (out.status > 0 && !d.throttled && !s->answered && b->window < b->nslots) {
      b->window++;
      b->window_at = lr_curl_now();
    }
  }
  if (rc == LUARETRY_OK && !d.retry && d.reason == LUARETRY_REASON_NONE) {
    /* failed beside attempts still in flight: the call waits for them */
    if (!hedge) lc->s = NULL;
    for (int k = 0; hedge && k < lc->nhedges; k++)
      if (lc->hedges[k] == s) lc->hedges[k] = lc->hedges[--lc->nhedges];
    free_slot(b, s);
    if (hedge) curl_easy_cleanup(s->h);
    return;
  }
  if (rc == LUARETRY_OK && !d.retry && deliver(lc, s, hedge, &d, why, sizeof why) != 0)
    rc = LUARETRY_E_OPERATION;
  for (int k = 0; hedge && k < lc->nhedges; k++) /* the winner leaves the list */
    if (lc->hedges[k] == s) lc->hedges[k] = lc->hedges[--lc->nhedges];
  CURL *hedge_h = hedge ? s->h : NULL;
  free_slot(b, s);
  if (hedge_h) curl_easy_cleanup(hedge_h);
  if (lc->s && lc->s != s) free_slot(b, lc->s); /* the attempt the hedge beat */
  lc->s = NULL;
  drop_hedges(b, lc);
  lc->next++;
  if (rc != LUARETRY_OK || !d.retry) {
    end_call_saying(b, lc, rc, &d, why[0] ? why : NULL);
    return;
  }
  /* waiting: the handle goes back (its connection stays in the multi) */
  curl_easy_cleanup(lc->h);
  lc->h = NULL;
  if (b->copt.flags & LUARETRY_CALL_VIRTUAL_TIME) {
    luaretry_call_wait(lc->c, d.wait); /* advances the call's clock only */
    lc->due = 0;
  } else {
    lc->due = lr_curl_now() + d.wait;
  }
  wait_push(b, lc);
}

/* Cancelled: every call in progress stops; the jobs of the array not begun
 * end too (a job source is not asked for more). */
static void cancel_all(batch *b) {
  for (size_t k = 0; k < b->ncalls; k++) {
    live_call *lc = &b->calls[k];
    if (!lc->c) continue;
    luaretry_call_cancel(lc->c);
    if (lc->s || lc->nhedges) {
      /* as luaretry_curl_perform does: the attempt is reported, and the
       * report stops the call as cancelled */
      end_attempt(b, lc, lc->s ? lc->s : lc->hedges[0], CURLE_ABORTED_BY_CALLBACK);
      if (!lc->c) continue;
    }
    luaretry_decision d;
    memset(&d, 0, sizeof d);
    d.attempt = lc->next - 1;
    luaretry_call_stop_cancelled(lc->c, &d);
    end_call(b, lc, LUARETRY_OK, &d);
  }
  b->nwaiting = 0;
  while (b->jobs && b->next_job < b->n) {
    luaretry_decision d;
    memset(&d, 0, sizeof d);
    d.reason = LUARETRY_REASON_CANCELLED;
    d.rule = "cancel";
    finish_job(b, &b->jobs[b->next_job], b->next_job, LUARETRY_OK, &d, NULL, NULL);
    b->next_job++;
  }
}

/* Reports the transfers that ended; how many. */
static int collect_ended(batch *b) {
  int left, ended = 0;
  CURLMsg *msg;
  while ((msg = curl_multi_info_read(b->m->multi, &left))) {
    if (msg->msg != CURLMSG_DONE) continue;
    live_call *lc = NULL;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&lc);
    CURLcode res = msg->data.result;
    slot *s = lc && lc->s && lc->s->h == msg->easy_handle ? lc->s : NULL;
    for (int k = 0; lc && !s && k < lc->nhedges; k++)
      if (lc->hedges[k]->h == msg->easy_handle) s = lc->hedges[k];
    if (s) end_attempt(b, lc, s, res);
    ended++;
  }
  return ended;
}

/* A slow start that no answer moved for SLOW_START_IDLE seconds doubles:
 * a rate limiter answers at once (nginx's limit_req within a millisecond),
 * so a server slower than that to answer says nothing of one, and a batch
 * of slow URLs reaches --parallel-max in a few tenths of a second. */
#define SLOW_START_IDLE 0.1

/* The ms until the slow start's window grows by itself (b->busy fills it
 * and work waits), or `ms` when sooner or never; grows it when due. */
static int slow_start_due(batch *b, double now, int ms) {
  if (b->window >= b->nslots || b->busy < b->window || !(b->nwaiting || job_ready(b))) return ms;
  double left = b->window_at + SLOW_START_IDLE - now;
  if (left <= 0) {
    b->window = b->window * 2 < b->nslots ? b->window * 2 : b->nslots;
    b->window_at = now;
    return 0;
  }
  return left * 1000 < ms ? (int)ceil(left * 1000) : ms;
}

/* A slow start moves as answers come, not as bodies end: a 2xx or 3xx
 * head (never throttling) lets one more run at once, so a batch of slow
 * downloads ramps up in round trips, as TCP's does, not in whole
 * transfers.  Any other status waits for the policy's judgement at the
 * end of its transfer. */
static void answered_heads(batch *b) {
  for (size_t k = 0; k < b->nslots && b->window < b->nslots; k++) {
    slot *s = &b->slots[k];
    long code = 0;
    if (!s->call || s->answered ||
        curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK)
      continue;
    if (code >= 200 && code < 400) {
      s->answered = 1;
      b->window++;
      b->window_at = lr_curl_now();
    }
  }
}

static void run_batch(batch *b) {
  b->window_at = lr_curl_now();
  for (;;) {
    if (atomic_load(&b->m->cancelled)) {
      cancel_all(b);
      return;
    }
    /* start what may start: due retries first, then new calls */
    double now = lr_curl_now();
    int grow_ms = slow_start_due(b, now, 1000);
    while (b->busy < b->window && b->nwaiting && b->waiting[0]->due <= now)
      start_attempt(b, wait_pop(b));
    /* then due hedges: they cut the tail of calls already in progress */
    int hedge_ms = hedges_due(b, 1000);
    while (b->busy < b->window && b->nspare && job_ready(b)) {
      live_call *lc = begin_next(b);
      if (lc) start_attempt(b, lc);
    }
    if (b->nlive == 0 && !more_jobs(b)) return;

    int running = 0;
    if (b->busy) curl_multi_perform(b->m->multi, &running);
    if (collect_ended(b)) continue; /* slots came free: fill them first */
    if (b->window < b->nslots && b->busy) {
      size_t before = b->window;
      answered_heads(b);
      if (b->window > before) continue; /* room for more: start them */
    }

    /* sleep until a transfer moves, the next retry is due, or a cancel */
    int timeout_ms = 1000;
    if (b->nwaiting && b->busy < b->window) {
      double ms = ceil((b->waiting[0]->due - lr_curl_now()) * 1000);
      if (ms < timeout_ms) timeout_ms = ms < 0 ? 0 : (int)ms;
    }
    if (hedge_ms < timeout_ms) timeout_ms = hedge_ms;
    if (grow_ms < timeout_ms) timeout_ms = grow_ms;
    /* and while the source has no job yet, until its descriptor is
     * readable (or a second passed): then it is asked again */
    struct curl_waitfd wake[2] = { { b->m->wake_fd, CURL_WAIT_POLLIN, 0 },
                                   { b->m->next_fd, CURL_WAIT_POLLIN, 0 } };
    int watch_next = b->source_later && b->m->next_fd >= 0;
    curl_multi_poll(b->m->multi, wake, watch_next ? 2 : 1, timeout_ms, NULL);
    b->source_later = 0;
  }
}

/* The table sizes: transfers, and calls in progress at once. */
static void size_tables(batch *b, const luaretry_curl_many_options *o, size_t n) {
  b->nslots = o->max_transfers ? o->max_transfers : 1;
  /* fewer jobs than transfers: the rest is no use, but to hedges */
  if (n && !b->hedging && b->nslots > n) b->nslots = n;
  size_t calls = o->max_calls ? o->max_calls : LUARETRY_CURL_MAX_CALLS;
  if (calls < 2 * b->nslots) calls = 2 * b->nslots;
  if (o->max_calls && calls > o->max_calls) calls = o->max_calls;
  b->ncalls = calls < b->nslots ? b->nslots : calls;
  if (n && b->ncalls > n) b->ncalls = n;
}

static luaretry_code alloc_tables(batch *b) {
  b->slots = calloc(b->nslots, sizeof *b->slots);
  b->calls = calloc(b->ncalls, sizeof *b->calls);
  b->spare = calloc(b->ncalls, sizeof *b->spare);
  b->waiting = calloc(b->ncalls, sizeof *b->waiting);
  if (!b->slots || !b->calls || !b->spare || !b->waiting) return LUARETRY_E_NOMEM;
  for (size_t k = 0; k < b->ncalls; k++) b->spare[k] = &b->calls[b->ncalls - 1 - k];
  b->nspare = b->ncalls;
  return LUARETRY_OK;
}

static void free_tables(batch *b) {
  if (b->slots)
    for (size_t k = 0; k < b->nslots; k++) {
      lr_curl_attempt_free(&b->slots[k].a);
      free(b->slots[k].request);
    }
  free(b->slots);
  free(b->calls);
  free(b->spare);
  free(b->waiting);
}

luaretry_code luaretry_curl_perform_many(luaretry_curl_many *m, luaretry_policy *p,
                                         luaretry_curl_job *jobs, size_t n,
                                         const luaretry_curl_many_options *o) {
  luaretry_curl_many_options defaults;
  luaretry_curl_many_options_init(&defaults);
  if (!o) o = &defaults;
  if (!m || !p || (n && !jobs) || (o->next && n)) return LUARETRY_E_ARG;
  for (size_t i = 0; i < n; i++)
    if (!jobs[i].request || !jobs[i].request->url) return LUARETRY_E_ARG;
  luaretry_tuning t;
  luaretry_code rc = luaretry_policy_tuning(p, &t);
  if (rc != LUARETRY_OK) return rc;
  batch b;
  memset(&b, 0, sizeof b);
  b.m = m;
  b.p = p;
  b.jobs = o->next ? NULL : jobs;
  b.n = n;
  b.o = o;
  b.body_limit = t.body_limit;
  char hedge[32];
  b.hedging = luaretry_policy_get(p, "hedge.delay", hedge, sizeof hedge) == LUARETRY_OK &&
              strcmp(hedge, "none") != 0;
  b.stall_timeout = t.stall_timeout;
  b.stall_speed = t.stall_speed;
  luaretry_call_options_init(&b.copt);
  if (o->call) b.copt = *o->call;
  for (size_t i = 0; i < n; i++) {
    memset(&jobs[i].result, 0, sizeof jobs[i].result);
    jobs[i].result.code = LUARETRY_E_STATE;
  }
  if (!o->next && n == 0) return LUARETRY_OK;
  size_tables(&b, o, o->next ? 0 : n);
  /* An adaptive rate is unlimited until a throttling answer comes: the
   * batch's transfers ramp up as TCP's slow start does (one at first, one
   * more per answer that is not throttling), so a rate limiter answers
   * one or two of them with 429, not all --parallel-max sent at once. */
  char adaptive[16];
  b.window = luaretry_policy_get(p, "rate.adaptive", adaptive, sizeof adaptive) == LUARETRY_OK &&
                 strcmp(adaptive, "true") == 0
               ? 1
               : b.nslots;
  rc = alloc_tables(&b);
  if (rc == LUARETRY_OK) run_batch(&b);
  free_tables(&b);
  return rc;
}
