/* many.c: many requests, each its own retried call of one policy, through
 * one libcurl multi handle driven by one loop: luaretry_curl_perform_many.
 * A call waiting for its backoff holds no transfer slot. */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "http.h"

struct luaretry_curl_many {
  CURLM *multi;
  int wake_fd;                  /* eventfd written by a cancel */
  atomic_int cancelled;
};

luaretry_code luaretry_curl_many_new(luaretry_curl_many **out) {
  if (!out) return LUARETRY_E_ARG;
  *out = NULL;
  luaretry_curl_many *m = calloc(1, sizeof *m);
  if (!m) return LUARETRY_E_NOMEM;
  atomic_init(&m->cancelled, 0);
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
  (void)n;  /* a full counter is already readable: the loop wakes anyway */
  errno = saved;
}

int luaretry_curl_many_cancelled(const luaretry_curl_many *m) {
  return m ? atomic_load(&((luaretry_curl_many *)m)->cancelled) : 0;
}

CURLM *luaretry_curl_many_multi(luaretry_curl_many *m) { return m ? m->multi : NULL; }

void luaretry_curl_many_options_init(luaretry_curl_many_options *o) {
  if (o) memset(o, 0, sizeof *o);
}

typedef struct slot slot;

/* A call in progress: in a transfer (s != NULL) or waiting until `due`. */
typedef struct {
  luaretry_call *c;
  CURL *h;
  size_t job;
  int next;                     /* the number of its next attempt */
  double due;                   /* monotonic seconds */
  slot *s;
} live_call;

/* A transfer slot: its attempt's buffers, and the call using it. */
struct slot {
  attempt a;
  live_call *call;
};

typedef struct {
  luaretry_curl_many *m;
  luaretry_policy *p;
  luaretry_curl_job *jobs;
  size_t n, next_job;
  const luaretry_curl_many_options *o;
  luaretry_call_options copt;
  double deadline;              /* the policy's, to clip late retries */
  slot *slots;
  size_t nslots, busy;
  live_call *calls;             /* max_calls entries; c == NULL: free */
  size_t ncalls, nlive;
} batch;

static void finish_job(batch *b, size_t i, luaretry_code code, const luaretry_decision *d,
                       luaretry_call *c) {
  luaretry_curl_job *job = &b->jobs[i];
  luaretry_curl_result *r = &job->result;
  r->code = code;
  if (d) r->final = *d;
  r->elapsed = c ? luaretry_call_elapsed(c) : 0;
  if (code != LUARETRY_OK) {
    const char *pm = luaretry_policy_errmsg(b->p);
    r->errmsg = pm && pm[0] ? pm : c ? luaretry_call_errmsg(c) : luaretry_strerror(code);
  }
  if (b->o->done) b->o->done(b->o->done_ud, i, job);
  r->final.message = NULL;
  r->final.hook_error = NULL;
  r->errmsg = NULL;
}

static void end_call(batch *b, live_call *lc, luaretry_code code, const luaretry_decision *d) {
  finish_job(b, lc->job, code, d, lc->c);
  luaretry_call_free(lc->c);
  curl_easy_cleanup(lc->h);
  memset(lc, 0, sizeof *lc);
  b->nlive--;
}

/* Begins the next job's call; NULL when it ended at once (refused) or the
 * call table is full. */
static live_call *begin_next(batch *b) {
  live_call *lc = NULL;
  for (size_t k = 0; k < b->ncalls && !lc; k++)
    if (!b->calls[k].c) lc = &b->calls[k];
  if (!lc) return NULL;
  size_t i = b->next_job++;
  luaretry_curl_job *job = &b->jobs[i];
  luaretry_call_options opt = b->copt;
  if (opt.flags & LUARETRY_CALL_SEED) opt.seed += i;
  luaretry_call *c = NULL;
  luaretry_code rc = luaretry_call_begin(b->p, &opt, &c);
  if (rc != LUARETRY_OK) {
    finish_job(b, i, rc, NULL, NULL);
    return NULL;
  }
  luaretry_call_observe(c, job->observer, job->observer_ud);
  CURL *h = b->o->easy ? curl_easy_duphandle(b->o->easy) : curl_easy_init();
  if (!h) {
    finish_job(b, i, LUARETRY_E_NOMEM, NULL, c);
    luaretry_call_free(c);
    return NULL;
  }
  curl_easy_setopt(h, CURLOPT_PRIVATE, (void *)lc);
  lc->c = c;
  lc->h = h;
  lc->job = i;
  lc->next = 1;
  lc->s = NULL;
  b->nlive++;
  return lc;
}

/* Starts lc's next attempt on a free slot; ends the call instead when it
 * may not go on. */
static void start_attempt(batch *b, live_call *lc) {
  luaretry_decision d;
  luaretry_code rc = luaretry_call_next(lc->c, &d);
  if (rc != LUARETRY_OK || !d.retry) {
    end_call(b, lc, rc, &d);
    return;
  }
  slot *s = NULL;
  for (size_t k = 0; k < b->nslots && !s; k++)
    if (!b->slots[k].call) s = &b->slots[k];
  /* the attempt's timeout, clipped again when a full table made it late */
  double timeout = luaretry_call_timeout(lc->c);
  if (b->deadline > 0) {
    double left = b->deadline - luaretry_call_elapsed(lc->c);
    if (left < 0.001) left = 0.001;
    if (timeout == 0 || left < timeout) timeout = left;
  }
  const luaretry_request *req = b->jobs[lc->job].request;
  rc = lr_curl_attempt_setup(lc->c, req, lc->next, lc->h, timeout, &s->a);
  if (rc == LUARETRY_OK) lr_curl_connect_timeout(lc->h, b->o->connect_timeout, timeout);
  if (rc == LUARETRY_OK && curl_multi_add_handle(b->m->multi, lc->h) != CURLM_OK) {
    curl_easy_setopt(lc->h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(s->a.headers);
    s->a.headers = NULL;
    rc = LUARETRY_E_NOMEM;
  }
  if (rc != LUARETRY_OK) {
    memset(&d, 0, sizeof d);
    d.attempt = lc->next - 1;
    d.elapsed = luaretry_call_elapsed(lc->c);
    end_call(b, lc, rc, &d);
    return;
  }
  s->call = lc;
  lc->s = s;
  b->busy++;
}

/* A transfer ended with `res`: report it and follow the decision. */
static void end_attempt(batch *b, live_call *lc, CURLcode res) {
  slot *s = lc->s;
  curl_multi_remove_handle(b->m->multi, lc->h);
  s->call = NULL;
  lc->s = NULL;
  b->busy--;
  lc->next++;
  luaretry_outcome out;
  luaretry_decision d;
  memset(&d, 0, sizeof d);
  luaretry_code rc = lr_curl_attempt_finish(lc->h, &s->a, res, &out);
  if (rc == LUARETRY_OK) rc = luaretry_call_report(lc->c, &out, &d);
  luaretry_curl_job *job = &b->jobs[lc->job];
  if (rc == LUARETRY_OK) {
    job->result.status = out.status;
    job->result.error = out.error;
  }
  if (rc != LUARETRY_OK || !d.retry) {
    if (rc == LUARETRY_OK && d.reason != LUARETRY_REASON_CANCELLED && job->sink &&
        s->a.t.body.len)
      job->sink(job->sink_ud, s->a.t.body.data, s->a.t.body.len);
    end_call(b, lc, rc, &d);
    return;
  }
  if (b->copt.flags & LUARETRY_CALL_VIRTUAL_TIME) {
    luaretry_call_wait(lc->c, d.wait);  /* advances the call's clock only */
    lc->due = 0;
  } else {
    lc->due = lr_curl_now() + d.wait;
  }
}

/* Cancelled: every call in progress stops, the jobs not begun end too. */
static void cancel_all(batch *b) {
  for (size_t k = 0; k < b->ncalls; k++) {
    live_call *lc = &b->calls[k];
    if (!lc->c) continue;
    luaretry_call_cancel(lc->c);
    if (lc->s) {
      /* as luaretry_curl_perform does: the attempt is reported, and the
       * report stops the call as cancelled */
      end_attempt(b, lc, CURLE_ABORTED_BY_CALLBACK);
      if (!lc->c) continue;
    }
    luaretry_decision d;
    memset(&d, 0, sizeof d);
    d.attempt = lc->next - 1;
    luaretry_call_stop_cancelled(lc->c, &d);
    end_call(b, lc, LUARETRY_OK, &d);
  }
  while (b->next_job < b->n) {
    luaretry_decision d;
    memset(&d, 0, sizeof d);
    d.reason = LUARETRY_REASON_CANCELLED;
    d.rule = "cancel";
    finish_job(b, b->next_job++, LUARETRY_OK, &d, NULL);
  }
}

static void run_batch(batch *b) {
  CURLM *multi = b->m->multi;
  for (;;) {
    if (atomic_load(&b->m->cancelled)) {
      cancel_all(b);
      return;
    }
    /* start what may start: due retries first, then new calls */
    double now = lr_curl_now(), next_due = -1;
    for (size_t k = 0; k < b->ncalls; k++) {
      live_call *lc = &b->calls[k];
      if (!lc->c || lc->s) continue;
      if (lc->due <= now && b->busy < b->nslots) start_attempt(b, lc);
      else if (next_due < 0 || lc->due < next_due) next_due = lc->due;
    }
    while (b->busy < b->nslots && b->next_job < b->n && b->nlive < b->ncalls) {
      live_call *lc = begin_next(b);
      if (lc) start_attempt(b, lc);
    }
    if (b->nlive == 0 && b->next_job >= b->n) return;

    int running = 0;
    if (b->busy) curl_multi_perform(multi, &running);
    int left, ended = 0;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(multi, &left))) {
      if (msg->msg != CURLMSG_DONE) continue;
      live_call *lc = NULL;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&lc);
      CURLcode res = msg->data.result;
      if (lc && lc->s) end_attempt(b, lc, res);
      ended++;
    }
    if (ended) continue;  /* slots came free: fill them first */

    /* sleep until a transfer moves, the next retry is due, or a cancel */
    int timeout_ms = 1000;
    if (next_due >= 0 && b->busy < b->nslots) {
      double ms = ceil((next_due - lr_curl_now()) * 1000);
      if (ms < timeout_ms) timeout_ms = ms < 0 ? 0 : (int)ms;
    }
    struct curl_waitfd wake = { b->m->wake_fd, CURL_WAIT_POLLIN, 0 };
    curl_multi_poll(multi, &wake, 1, timeout_ms, NULL);
  }
}

luaretry_code luaretry_curl_perform_many(luaretry_curl_many *m, luaretry_policy *p,
                                         luaretry_curl_job *jobs, size_t n,
                                         const luaretry_curl_many_options *o) {
  if (!m || !p || (n && !jobs)) return LUARETRY_E_ARG;
  for (size_t i = 0; i < n; i++)
    if (!jobs[i].request || !jobs[i].request->url) return LUARETRY_E_ARG;
  luaretry_curl_many_options defaults;
  luaretry_curl_many_options_init(&defaults);
  if (!o) o = &defaults;
  luaretry_tuning t;
  luaretry_code rc = luaretry_policy_tuning(p, &t);
  if (rc != LUARETRY_OK) return rc;
  batch b;
  memset(&b, 0, sizeof b);
  b.m = m;
  b.p = p;
  b.jobs = jobs;
  b.n = n;
  b.o = o;
  b.deadline = t.deadline;
  luaretry_call_options_init(&b.copt);
  if (o->call) b.copt = *o->call;
  b.nslots = o->max_transfers ? o->max_transfers : 1;
  if (n && b.nslots > n) b.nslots = n;
  b.ncalls = o->max_calls ? o->max_calls : b.nslots * 2 > 1024 ? b.nslots * 2 : 1024;
  if (b.ncalls < b.nslots) b.ncalls = b.nslots;
  if (n && b.ncalls > n) b.ncalls = n;
  for (size_t i = 0; i < n; i++) {
    memset(&jobs[i].result, 0, sizeof jobs[i].result);
    jobs[i].result.code = LUARETRY_E_STATE;
  }
  if (n == 0) return LUARETRY_OK;
  b.slots = calloc(b.nslots, sizeof *b.slots);
  b.calls = calloc(b.ncalls, sizeof *b.calls);
  if (!b.slots || !b.calls) {
    free(b.slots);
    free(b.calls);
    return LUARETRY_E_NOMEM;
  }
  run_batch(&b);
  for (size_t k = 0; k < b.nslots; k++) lr_curl_attempt_free(&b.slots[k].a);
  free(b.slots);
  free(b.calls);
  return LUARETRY_OK;
}
