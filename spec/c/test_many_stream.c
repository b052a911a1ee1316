/* test_many_stream.c: luaretry_curl_perform_many with a job source
 * (options.next), as `luaretry run --urls` feeds it a list read as it goes.
 *
 *   - 10,000 jobs against the fault server, one in five answered 503 once:
 *     each job's `done` comes exactly once, with the right verdict and
 *     attempts; jobs pulled and not yet done never exceed max_calls; the
 *     source is asked once more than it has jobs (the 0 that ends it).
 *   - memory stays flat: the resident size after 10,000 jobs is within
 *     1 MiB of what it was after 1,000 (the in-process server's request
 *     log is emptied as it goes; not checked under ASan, which holds freed
 *     memory back on purpose);
 *   - a job without a request ends at once with LUARETRY_E_ARG and the
 *     rest go on;
 *   - a cancel from `done` stops the run: every job pulled gets its
 *     `done`, none is pulled after it;
 *   - the array form and the source form refuse to be mixed;
 *   - a source with no job yet (-1, a pipe whose writer pauses): the job
 *     in flight goes on and ends meanwhile, and the source is asked again
 *     once its descriptor (luaretry_curl_many_next_fd) is readable, not in
 *     a spin; the run ends when the source says 0.  Without a descriptor
 *     it is asked again all the same (the run looks once a second).  Before, -1 was taken
 *     for a job (a zeroed one: LUARETRY_E_ARG). */
#include <curl/curl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "faults_client.h"
#include "faults/faults.h"
#include "luaretry.h"
#include "luaretry_curl.h"

#define JOBS       10000
#define FIRST_LOOK 1000
#define MAX_CALLS  64

static const char SERVER[] =
  "respond = function (req)\n"
  "  if req.path:match('^/flaky/') and req.count == 1 then return 503 end\n"
  "  if req.path:match('^/slow/') then return { status = 200, delay = 0.3 } end\n"
  "  return 200\n"
  "end\n";

static const char POLICY[] =
  "max_attempts = 3\ndeadline = 60\nattempt_timeout = 10\n"
  "backoff = { initial = 0.001, jitter = 'none' }\n";

typedef struct {
  const char *address;
  size_t jobs; /* how many the source has */
  size_t pulled, done, asked, most_open, bad_index;
  unsigned char *seen;                 /* done per index */
  int wrong;                           /* verdicts or attempts not as expected */
  luaretry_request req[MAX_CALLS * 2]; /* a ring: a job's request lives
                                          until its done */
  char url[MAX_CALLS * 2][96];
  long rss_first;
  luaretry_curl_many *many;
  size_t cancel_after; /* 0: never */
} source;

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld", &kib) == 1) break;
  if (f) fclose(f);
  return kib;
}

static int flaky(size_t i) { return i % 5 == 0; }

static int next_job(void *ud, size_t index, luaretry_curl_job *job) {
  source *s = ud;
  s->asked++;
  if (index != s->pulled) s->bad_index++;
  if (s->pulled == s->jobs) return 0;
  size_t k = s->pulled % (MAX_CALLS * 2);
  snprintf(s->url[k], sizeof s->url[k], "http://%s/%s/%zu", s->address,
           flaky(s->pulled) ? "flaky" : "ok", s->pulled);
  s->req[k] = (luaretry_request){ .method = "GET", .url = s->url[k] };
  job->request = s->pulled == 7 ? NULL : &s->req[k]; /* job 7 has none */
  s->pulled++;
  size_t open = s->pulled - s->done;
  if (open > s->most_open) s->most_open = open;
  return 1;
}

static void job_done(void *ud, size_t i, const luaretry_curl_job *job) {
  source *s = ud;
  const luaretry_curl_result *r = &job->result;
  if (i >= s->jobs || s->seen[i]++) s->wrong++;
  s->done++;
  if (i == 7) {
    if (r->code != LUARETRY_E_ARG) s->wrong++;
  } else if (s->cancel_after == 0) {
    /* a flaky path answers 503 once; twice when a log reset (below) fell
     * between its attempts, as the reset forgets its count too */
    int attempts = r->final.attempt;
    if (r->code != LUARETRY_OK || r->final.reason != LUARETRY_REASON_SUCCESS ||
        (flaky(i) ? attempts < 2 || attempts > 3 : attempts != 1))
      s->wrong++;
  }
  /* the server runs in this process: its request log must not count */
  if (s->done % 500 == 0) faults_reset(s->address);
  if (s->done == FIRST_LOOK) s->rss_first = rss_kib();
  if (s->cancel_after && s->done == s->cancel_after) luaretry_curl_many_cancel(s->many);
}

static void run(luaretry_policy *p, source *s, size_t jobs, size_t cancel_after) {
  s->jobs = jobs;
  s->cancel_after = cancel_after;
  s->seen = calloc(jobs, 1);
  luaretry_curl_many_new(&s->many);
  luaretry_curl_many_options o;
  luaretry_curl_many_options_init(&o);
  o.max_transfers = 16;
  o.max_calls = MAX_CALLS;
  o.next = next_job;
  o.next_ud = s;
  o.done = job_done;
  o.done_ud = s;
  CHECK_CODE(luaretry_curl_perform_many(s->many, p, NULL, 0, &o), LUARETRY_OK);
  luaretry_curl_many_free(s->many);
}

/* ---- a source that has no job yet: its jobs come down a pipe, a byte
 * each ('j' a job, 'e' the end), written by the first job's done */

typedef struct {
  const char *address;
  int pipe[2];
  luaretry_request req[2];
  char url[2][96];
  size_t pulled, done, later;
  int wrong;
} paused;

static int paused_next(void *ud, size_t index, luaretry_curl_job *job) {
  paused *s = ud;
  struct pollfd p = { .fd = s->pipe[0], .events = POLLIN };
  char c;
  if (s->pulled > 0 && poll(&p, 1, 0) != 1) return s->later++, -1;
  if (s->pulled > 0 && (read(s->pipe[0], &c, 1) != 1 || c != 'j')) return 0;
  if (index != s->pulled || s->pulled >= 2) s->wrong++;
  size_t k = s->pulled++ % 2;
  snprintf(s->url[k], sizeof s->url[k], "http://%s/slow/%zu", s->address, index);
  s->req[k] = (luaretry_request){ .method = "GET", .url = s->url[k] };
  job->request = &s->req[k];
  return 1;
}

static void paused_done(void *ud, size_t i, const luaretry_curl_job *job) {
  paused *s = ud;
  if (job->result.code != LUARETRY_OK || job->result.final.reason != LUARETRY_REASON_SUCCESS)
    s->wrong++;
  /* the first job ended while the source had none: now it has one more */
  if (s->done++ == 0 && (i != 0 || s->later == 0 || write(s->pipe[1], "je", 2) != 2)) s->wrong++;
}

/* with_fd 0: no descriptor is given, so once the first job has ended
 * nothing but the run's own once-a-second look asks the source again (the
 * run would wait for ever without it). */
static void run_paused(luaretry_policy *p, const char *address, int with_fd) {
  paused s = { .address = address };
  if (!CHECK(pipe(s.pipe) == 0)) return;
  luaretry_curl_many *m;
  luaretry_curl_many_new(&m);
  CHECK_CODE(luaretry_curl_many_next_fd(m, -2), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_curl_many_next_fd(NULL, s.pipe[0]), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_curl_many_next_fd(m, with_fd ? s.pipe[0] : -1), LUARETRY_OK);
  luaretry_curl_many_options o;
  luaretry_curl_many_options_init(&o);
  o.max_transfers = 4;
  o.next = paused_next;
  o.next_ud = &s;
  o.done = paused_done;
  o.done_ud = &s;
  CHECK_CODE(luaretry_curl_perform_many(m, p, NULL, 0, &o), LUARETRY_OK);
  luaretry_curl_many_free(m);
  CHECK_EQ_INT((long)s.pulled, 2);
  CHECK_EQ_INT((long)s.done, 2);
  CHECK_EQ_INT(s.wrong, 0);
  CHECK(s.later >= 1);
  /* asked while the first job's 0.3 s answer was awaited: when the loop
   * woke for it, not in a spin (that would be thousands) */
  CHECK(s.later < 100);
  printf("test_many_stream: a source with no job yet%s: asked %zu times meanwhile\n",
         with_fd ? "" : ", no descriptor", s.later);
  close(s.pipe[0]);
  close(s.pipe[1]);
}

int main(void) {
  char err[256];
  curl_global_init(CURL_GLOBAL_DEFAULT);
  lr_faults *server = lr_faults_start_string("stream.lua", SERVER, NULL, err, sizeof err);
  if (!CHECK(server != NULL)) return check_done();
  luaretry_policy *p;
  luaretry_policy_new(&p);
  /* what is tested here is not time: a busy machine (two cores shared,
   * ASan) may preempt one of its many hooks past the 0.25 s time limit */
  CHECK_CODE(luaretry_policy_set(p, "time_limit", "60"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, "=stream", POLICY), LUARETRY_OK);

  source s = { .address = lr_faults_address(server) };
  run(p, &s, JOBS, 0);
  CHECK_EQ_INT((long)s.done, JOBS);
  CHECK_EQ_INT((long)s.asked, JOBS + 1);
  CHECK_EQ_INT((long)s.bad_index, 0);
  CHECK_EQ_INT(s.wrong, 0);
  CHECK((long)s.most_open <= MAX_CALLS);
  long grown = rss_kib() - s.rss_first;
  printf("test_many_stream: %d jobs, at most %zu open, RSS %+ld KiB from job %d to the end\n", JOBS,
         s.most_open, grown, FIRST_LOOK);
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(grown < 1024);
#endif
  free(s.seen);

  /* a cancel from done: no job is pulled after it, every pulled one ends */
  source c = { .address = lr_faults_address(server) };
  run(p, &c, JOBS, 100);
  CHECK(c.done >= 100 && c.done < JOBS);
  CHECK_EQ_INT((long)c.done, (long)c.pulled);
  CHECK_EQ_INT(c.wrong, 0);
  printf("test_many_stream: cancelled after 100: %zu pulled, %zu done\n", c.pulled, c.done);
  free(c.seen);

  /* the two forms do not mix */
  luaretry_curl_many *m;
  luaretry_curl_many_new(&m);
  luaretry_request r = { .method = "GET", .url = "http://127.0.0.1:1/" };
  luaretry_curl_job one = { .request = &r };
  luaretry_curl_many_options o;
  luaretry_curl_many_options_init(&o);
  o.next = next_job;
  o.next_ud = &c;
  CHECK_CODE(luaretry_curl_perform_many(m, p, &one, 1, &o), LUARETRY_E_ARG);
  luaretry_curl_many_free(m);

  run_paused(p, lr_faults_address(server), 1);
  run_paused(p, lr_faults_address(server), 0);

  luaretry_policy_free(p);
  lr_faults_free(server);
  curl_global_cleanup();
  return check_done();
}
