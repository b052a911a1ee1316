/* progress.c: what a terminal shows while `run` works.  One transfer gets a
 * meter in the manner of curl's (percent, bytes, speed, time left; -# a
 * bar), counting every attempt's bytes and saying the wait between
 * attempts ("retry 3 in 4.2 s"); a batch gets one live status line (done,
 * in flight, waiting, throttled, failed, bytes, rate, time left).  Only
 * when standard error is a terminal, never with -s or --no-progress-meter,
 * and for one transfer not when its body goes to the terminal too.  The
 * line is redrawn from the run's own callbacks (no thread), at most ten
 * times a second, cut to the terminal's width; before any other line is
 * written on standard error the meter yields (progress_clear), so no line
 * is ever written into it. */
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

#define REDRAW 0.1 /* seconds between two drawings */

static progress *active; /* the meter on the terminal, for progress_yield() */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_init(progress *p, const run_args *a, int batch) {
  memset(p, 0, sizeof *p);
  p->start = now();
  p->bar = a->progress == PROGRESS_BAR;
  p->batch = batch;
  int body_to_terminal = !batch && !a->output && !a->remote_name && isatty(STDOUT_FILENO);
  /* -v's lines (every attempt's headers) and -q's leave it off */
  p->on = a->verbosity == 1 && a->progress != PROGRESS_OFF && isatty(STDERR_FILENO) &&
          !body_to_terminal && !a->command;
  if (p->on) active = p;
}

static int width(void) {
  struct winsize ws;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

/* 123, 12.3k, 4.5M, 1.2G: curl's units (1024s), at most 5 characters. */
static void size_text(char *buf, size_t size, double n) {
  const char *units = "kMGTP";
  if (n < 100000) {
    snprintf(buf, size, "%.0f", n);
    return;
  }
  int u = -1;
  while (n >= 1000 && u < 4) n /= 1024, u++;
  snprintf(buf, size, n < 10 ? "%.1f%c" : "%.0f%c", n, units[u]);
}

static void time_text(char *buf, size_t size, double s) {
  if (!(s >= 0) || s > 359999) {
    snprintf(buf, size, "--:--:--");
    return;
  }
  long t = (long)s;
  snprintf(buf, size, "%ld:%02d:%02d", t / 3600, (int)(t / 60 % 60), (int)(t % 60));
}

/* The line, cut to the terminal's width less one (so it never wraps). */
static void draw(progress *p, const char *line) {
  int w = width() - 1;
  if (w < 1) w = 1;
  fprintf(stderr, "\r%.*s\033[K", w, line);
  fflush(stderr);
  p->drawn = 1;
}

static void transfer_line(progress *p, char *line, size_t size) {
  double t = now() - p->start;
  char got[32], total[32], rate[32], left[32], spent[32];
  size_text(got, sizeof got, (double)p->bytes);
  size_text(total, sizeof total, (double)p->total);
  double speed = t > 0 ? (double)p->bytes / t : 0;
  size_text(rate, sizeof rate, speed);
  time_text(spent, sizeof spent, t);
  long long attempt_left = p->total > p->attempt_bytes ? p->total - p->attempt_bytes : 0;
  time_text(left, sizeof left, p->total && speed > 0 ? (double)attempt_left / speed : -1);
  int pct = p->total ? (int)(100.0 * (double)p->attempt_bytes / (double)p->total) : 0;
  if (pct > 100) pct = 100;
  char state[64] = "";
  if (p->waiting_until > 0) {
    double w = p->waiting_until - now();
    snprintf(state, sizeof state, "  retry %d in %.1f s", p->attempt + 1, w > 0 ? w : 0);
  } else if (p->attempt > 1) {
    snprintf(state, sizeof state, "  attempt %d", p->attempt);
  }
  if (p->bar) {
    int w = width() - 9 - (int)strlen(state);
    if (w < 0) w = 0;
    if (w > 200) w = 200;
    char bar[201];
    int fill = p->total ? w * pct / 100 : 0;
    memset(bar, '#', (size_t)fill);
    memset(bar + fill, ' ', (size_t)(w - fill));
    bar[w] = '\0';
    if (p->total)
      snprintf(line, size, "%s %5.1f%%%s", bar, (double)pct, state);
    else /* no length known: how much came */
      snprintf(line, size, "%s %6s%s", bar, got, state);
    return;
  }
  snprintf(line, size, "%3d %5s %5s %7s/s %s %s%s", pct, p->total ? total : "--", got, rate, spent,
           left, state);
}

static void batch_line(progress *p, char *line, size_t size) {
  double t = now() - p->start;
  char got[32], rate[32], left[32];
  size_text(got, sizeof got, (double)p->bytes);
  size_text(rate, sizeof rate, t > 0 ? (double)p->bytes / t : 0);
  long finished = p->done + p->failed;
  double per = finished ? t / (double)finished : 0;
  time_text(left, sizeof left,
            p->total_urls > 0 && finished ? per * (double)(p->total_urls - finished) : -1);
  snprintf(line, size,
           "%ld done, %ld in flight, %ld waiting, %ld throttled, %ld failed, %sB, %sB/s, left %s",
           p->done, p->in_flight, p->waiting, p->throttled, p->failed, got, rate, left);
}

void progress_update(progress *p, int force) {
  if (!p->on) return;
  double t = now();
  if (!force && p->drawn && t - p->last_draw < REDRAW) return; /* taken off: back at once */
  p->last_draw = t;
  char line[512];
  if (p->batch)
    batch_line(p, line, sizeof line);
  else
    transfer_line(p, line, sizeof line);
  draw(p, line);
}

void progress_clear(progress *p) {
  if (!p->on || !p->drawn) return;
  fputs("\r\033[K", stderr);
  fflush(stderr);
  p->drawn = 0;
}

void progress_bytes(progress *p, size_t n) {
  p->bytes += (long long)n;
  p->attempt_bytes += (long long)n;
  p->waiting_until = 0;
  progress_update(p, 0);
}

void progress_attempt(progress *p, long long total) {
  p->attempt++;
  p->attempt_bytes = 0;
  p->total = total;
  p->waiting_until = 0;
}

void progress_wait(progress *p, double seconds) {
  p->waiting_until = now() + seconds;
  progress_update(p, 1);
}

void progress_end(progress *p) {
  progress_clear(p);
  p->on = 0;
  if (active == p) active = NULL;
}

double progress_elapsed(const progress *p) { return now() - p->start; }

void progress_yield(void) {
  if (active) progress_clear(active);
}
