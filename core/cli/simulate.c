/* cli_simulate.c: `luaretry simulate`.
 *
 * Without --clients: the wait schedule a policy gives when every attempt
 * fails transiently (luaretry_simulate).
 *
 * With --clients N: N clients fail at the same instant t=0 against an
 * outage of --outage seconds.  Each client is its own call (seed + client
 * index) on the virtual clock, driven through the step API: an attempt that
 * starts before the outage ends is reported as a 503, one after it as a 200,
 * so the policy's own classifier and rules decide.  Attempts take no time.
 * Prints how the retries bunch up, and with --svg a histogram.
 *
 * Only the public API (luaretry.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "outfile.h"

#define MAX_CLIENTS 1000000L
#define MAX_OUTAGE 1e6
#define CLIENT_ATTEMPT_CAP 100000L   /* as luaretry_simulate without max_attempts */
#define MAX_RETRIES 20000000L        /* all clients together: 160 MB of times */
#define WINDOW 0.1                   /* the peak's window, seconds */
#define MAX_BUCKETS 200

/* Parses a whole non-negative integer; -1 when it is not one. */
static long long parse_count(const char *s) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end || errno || v < 0) return -1;
  return v;
}

/* Parses seconds, finite, 0 to MAX_OUTAGE; -1 when it is not that. */
static double parse_seconds(const char *s) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !isfinite(v) || v < 0 || v > MAX_OUTAGE) return -1;
  return v;
}

/* ---- the schedule (no --clients) */

typedef struct { int json; } schedule_out;

static int print_decision(void *ud, const luaretry_decision *d) {
  const schedule_out *out = ud;
  const char *verdict = luaretry_reason_name(d->reason);
  if (out->json) {
    cli_json_decision(stdout, d, -1, NULL, NULL);
  } else if (d->retry) {
    printf("attempt %d: retry in %.3f s (%s), elapsed %.3f s\n", d->attempt, d->wait,
           luaretry_wait_source_name(d->wait_source), d->elapsed);
  } else {
    printf("attempt %d: %s at %.3f s (%s)\n", d->attempt, verdict, d->elapsed, d->rule);
  }
  return 0;
}

/* ---- the herd (--clients) */

#define N_REASONS (LUARETRY_REASON_CIRCUIT_OPEN + 1)

typedef struct {
  const char *path;
  const char *name;        /* the policy's name */
  long clients;
  double outage;
  uint64_t seed;
  double *retry;           /* start times of attempts after the first */
  size_t nretry, cap;
  long by_reason[N_REASONS];
  long capped;             /* clients stopped by CLIENT_ATTEMPT_CAP */
  double last;             /* the last attempt's start */
  /* the peak: most retries in any WINDOW, and where */
  long peak;
  double peak_at;
  double even;             /* retries per WINDOW if spread evenly */
  long windows;
  /* the histogram */
  double width;
  long nbuckets;
  long *buckets;
} herd;

static int push_retry(herd *h, double t) {
  if (h->nretry == h->cap) {
    if (h->cap >= (size_t)MAX_RETRIES) return -1;
    size_t cap = h->cap ? h->cap * 2 : 4096;
    if (cap > (size_t)MAX_RETRIES) cap = (size_t)MAX_RETRIES;
    double *r = realloc(h->retry, cap * sizeof *r);
    if (!r) return -1;
    h->retry = r;
    h->cap = cap;
  }
  h->retry[h->nretry++] = t;
  return 0;
}

static void json_attempt(long client, const luaretry_decision *d, double t, int status) {
  printf("{\"client\":%ld,\"attempt\":%d,\"time\":%.6f,\"status\":%d,\"verdict\":", client,
         d->attempt, t, status);
  cli_json_string(stdout, d->retry ? "retry" : luaretry_reason_name(d->reason));
  printf(",\"wait\":%.6f}\n", d->retry ? d->wait : 0.0);
}

/* Runs every client; EXIT_OK when all ran (whatever their verdicts). */
static int run_clients(luaretry_policy *p, herd *h, int json) {
  for (long i = 0; i < h->clients; i++) {
    luaretry_call_options opts;
    luaretry_call_options_init(&opts);
    opts.flags = LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_SEED;
    opts.seed = h->seed + (uint64_t)i;
    luaretry_call *c;
    luaretry_code rc = luaretry_call_begin(p, &opts, &c);
    if (rc != LUARETRY_OK) {
      fprintf(stderr, "luaretry: simulate: client %ld: %s\n", i, luaretry_strerror(rc));
      return EXIT_POLICY;
    }
    double t = 0;
    for (long n = 1;; n++) {
      luaretry_outcome o;
      luaretry_outcome_init(&o);
      o.kind = LUARETRY_OUTCOME_HTTP;
      o.status = t < h->outage ? 503 : 200;
      o.body = "";
      o.method = "GET";
      luaretry_decision d;
      rc = luaretry_call_report(c, &o, &d);
      if (rc != LUARETRY_OK) {
        fprintf(stderr, "luaretry: simulate: client %ld: %s\n", i, luaretry_call_errmsg(c));
        luaretry_call_free(c);
        return EXIT_POLICY;
      }
      if (json) json_attempt(i, &d, t, o.status);
      if (n > 1) {
        if (push_retry(h, t) != 0) {
          fprintf(stderr, "luaretry: simulate: more than %ld attempts in all; use fewer "
                  "--clients or --attempts\n", MAX_RETRIES);
          luaretry_call_free(c);
          return EXIT_POLICY;
        }
        if (t > h->last) h->last = t;
      }
      if (!d.retry) {
        if (d.reason == LUARETRY_REASON_POLICY_ERROR && !h->by_reason[d.reason])
          fprintf(stderr, "luaretry: simulate: client %ld: %s\n", i,
                  d.message ? d.message : "policy error");
        if ((int)d.reason >= 0 && (int)d.reason < N_REASONS) h->by_reason[d.reason]++;
        break;
      }
      if (n >= CLIENT_ATTEMPT_CAP) {
        h->capped++;
        break;
      }
      rc = luaretry_call_wait(c, d.wait);
      if (rc != LUARETRY_OK) {
        fprintf(stderr, "luaretry: simulate: client %ld: %s\n", i, luaretry_strerror(rc));
        luaretry_call_free(c);
        return EXIT_POLICY;
      }
      t = luaretry_call_elapsed(c);
    }
    luaretry_call_free(c);
  }
  return EXIT_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The peak in any window [t, t + WINDOW) that starts at a retry, and the
 * even spread: retries / windows from the first retry to the last attempt. */
static void measure(herd *h) {
  if (!h->nretry) return;
  qsort(h->retry, h->nretry, sizeof *h->retry, cmp_double);
  size_t lo = 0;
  for (size_t hi = 0; hi < h->nretry; hi++) {
    while (h->retry[hi] - h->retry[lo] >= WINDOW) lo++;
    long n = (long)(hi - lo + 1);
    if (n > h->peak) {
      h->peak = n;
      h->peak_at = h->retry[lo];
    }
  }
  double span = h->retry[h->nretry - 1] - h->retry[0];
  h->windows = (long)ceil(span / WINDOW - 1e-9);
  if (h->windows < 1) h->windows = 1;
  h->even = (double)h->nretry / (double)h->windows;
}

/* A bucket width from 1, 2, 2.5, 5 x 10^k giving at most MAX_BUCKETS
 * buckets over [0, last] (so ~100 to 200 of them). */
static void choose_buckets(herd *h) {
  static const double m[] = { 1, 2, 2.5, 5 };
  h->width = 0.1;
  if (h->last > 0) {
    int e = (int)floor(log10(h->last / MAX_BUCKETS)) - 1;
    for (int k = e; k <= e + 3; k++) {
      int found = 0;
      for (int j = 0; j < 4; j++) {
        double w = m[j] * pow(10, k);
        if (floor(h->last / w) + 1 <= MAX_BUCKETS) {
          h->width = w;
          found = 1;
          break;
        }
      }
      if (found) break;
    }
  }
  h->nbuckets = (long)floor(h->last / h->width) + 1;
}

static int fill_buckets(herd *h) {
  h->buckets = calloc((size_t)h->nbuckets, sizeof *h->buckets);
  if (!h->buckets) return -1;
  h->buckets[0] += h->clients;   /* every first attempt, at t=0 */
  for (size_t i = 0; i < h->nretry; i++) {
    long b = (long)floor(h->retry[i] / h->width);
    if (b >= h->nbuckets) b = h->nbuckets - 1;
    if (b < 0) b = 0;
    h->buckets[b]++;
  }
  return 0;
}

/* A "nice" step (1, 2, 5 x 10^k) near span / n. */
static double nice_step(double span, int n) {
  if (!(span > 0)) return 1;
  double raw = span / n;
  double p = pow(10, floor(log10(raw)));
  double f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static void xml_text(FILE *f, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '&': fputs("&amp;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&apos;", f); break;
    default:
      if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
    }
  }
}

/* The histogram as one self-contained SVG: no scripts, no links. */
static void svg_write(FILE *f, const herd *h) {
  const double W = 960, H = 540, L = 80, R = 30, T = 70, B = 70;
  const double pw = W - L - R, ph = H - T - B;
  const double span = (double)h->nbuckets * h->width;
  long ymax = 1;
  for (long i = 0; i < h->nbuckets; i++)
    if (h->buckets[i] > ymax) ymax = h->buckets[i];
  double ystep = nice_step((double)ymax, 5);
  if (ystep < 1) ystep = 1;
  double ytop = ceil((double)ymax / ystep) * ystep;
  double xstep = nice_step(span, 10);
#define X(t) (L + (t) / span * pw)
#define Y(n) (T + ph - (n) / ytop * ph)

  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
             "viewBox=\"0 0 %g %g\" font-family=\"sans-serif\" font-size=\"12\">\n",
          W, H, W, H);
  fputs("<title>", f);
  xml_text(f, h->name);
  fputs(" (", f);
  xml_text(f, h->path);
  fprintf(f, "): %ld clients, %g s outage, seed %llu</title>\n", h->clients, h->outage,
          (unsigned long long)h->seed);
  fputs("<style>.bar{fill:#3b6fb6}.outage{fill:#f6dede}.axis{stroke:#222;stroke-width:1}"
        ".grid{stroke:#e4e4e4;stroke-width:1}.even{stroke:#d2691e;stroke-width:1.5;"
        "stroke-dasharray:6 4}.tick{fill:#222}</style>\n", f);
  fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%g\" height=\"%g\" fill=\"#ffffff\"/>\n", W, H);

  /* title and a line of numbers */
  fprintf(f, "<text x=\"%g\" y=\"26\" text-anchor=\"middle\" font-size=\"16\" "
             "font-weight=\"bold\">", W / 2);
  xml_text(f, h->name);
  fputs(" (", f);
  xml_text(f, h->path);
  fprintf(f, "): %ld clients, %g s outage, seed %llu</text>\n", h->clients, h->outage,
          (unsigned long long)h->seed);
  fprintf(f, "<text x=\"%g\" y=\"46\" text-anchor=\"middle\" fill=\"#444\">%zu attempts "
             "(%ld at t=0, %zu retries); peak %ld retries in 100 ms; an even spread: %.1f"
             "</text>\n",
          W / 2, (size_t)h->clients + h->nretry, h->clients, h->nretry, h->peak, h->even);

  /* the outage */
  double oend = h->outage < span ? h->outage : span;
  if (oend > 0) {
    fprintf(f, "<rect class=\"outage\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\">"
               "<title>outage: 0 to %g s</title></rect>\n",
            X(0.0), T, X(oend) - X(0.0), ph, h->outage);
    fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" fill=\"#a33\">outage "
               "(503)</text>\n", X(oend) - 4, T + 14);
  }

  /* grid and y ticks */
  for (double v = 0; v <= ytop + ystep / 2; v += ystep) {
    fprintf(f, "<line class=\"grid\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n",
            L, Y(v), L + pw, Y(v));
    fprintf(f, "<text class=\"tick\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\">%g</text>\n",
            L - 6, Y(v) + 4, v);
  }

  /* the bars, one per bucket */
  double bw = pw / (double)h->nbuckets;
  for (long i = 0; i < h->nbuckets; i++) {
    double t0 = (double)i * h->width, n = (double)h->buckets[i];
    fprintf(f, "<rect class=\"bar\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\">"
               "<title>%g to %g s: %ld</title></rect>\n",
            X(t0), Y(n), bw > 1.5 ? bw - 0.5 : bw, T + ph - Y(n), t0, t0 + h->width,
            h->buckets[i]);
  }

  /* the even spread, per bucket, from the first retry to the last attempt */
  if (h->nretry) {
    double per_bucket = h->even * h->width / WINDOW;
    if (per_bucket <= ytop) {
      fprintf(f, "<line class=\"even\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n",
              X(h->retry[0]), Y(per_bucket), X(h->last), Y(per_bucket));
      fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" fill=\"#d2691e\">even "
                 "spread</text>\n", X(h->last), Y(per_bucket) - 5);
    }
  }

  /* axes, x ticks, labels */
  fprintf(f, "<line class=\"axis\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", L,
          T + ph, L + pw, T + ph);
  fprintf(f, "<line class=\"axis\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", L, T,
          L, T + ph);
  for (double t = 0; t <= span + xstep / 1000; t += xstep) {
    fprintf(f, "<line class=\"axis\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n",
            X(t), T + ph, X(t), T + ph + 5);
    fprintf(f, "<text class=\"tick\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">%g</text>\n",
            X(t), T + ph + 19, t);
  }
  fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">seconds since every client "
             "failed at t=0 (buckets of %g s)</text>\n", L + pw / 2, H - 22, h->width);
  fprintf(f, "<text transform=\"translate(22 %g) rotate(-90)\" text-anchor=\"middle\">"
             "attempts per %g s</text>\n", T + ph / 2, h->width);
  fputs("</svg>\n", f);
#undef X
#undef Y
}

/* Draws the SVG in memory, then replaces `path` with it whole. */
static int svg_save(const char *path, const herd *h) {
  char *svg = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&svg, &len);
  if (mem) svg_write(mem, h);
  if (!mem || fclose(mem) != 0) {
    fprintf(stderr, "luaretry: --svg %s: out of memory\n", path);
    free(svg);
    return -1;
  }
  outfile f;
  outfile_init(&f, path, "--svg", OUTFILE_UMASK);
  outfile_write(&f, svg, len);
  free(svg);
  return outfile_finish(&f, 1);
}

static void print_summary(const herd *h, const char *svg) {
  printf("simulate: %s (%s): %ld clients fail together at t=0; outage %g s (503 before, 200 "
         "after); seed %llu (client i: seed + i)\n",
         h->name, h->path, h->clients, h->outage, (unsigned long long)h->seed);
  printf("attempts: %zu in all: %ld at t=0, %zu retries; last attempt at %.3f s\n",
         (size_t)h->clients + h->nretry, h->clients, h->nretry, h->last);
  long gave_up = h->clients - h->by_reason[LUARETRY_REASON_SUCCESS];
  printf("clients: %ld succeeded, %ld gave up", h->by_reason[LUARETRY_REASON_SUCCESS],
         gave_up);
  if (gave_up > 0) {
    const char *sep = " (";
    for (int r = 0; r < N_REASONS; r++) {
      if (r == LUARETRY_REASON_SUCCESS || h->by_reason[r] == 0) continue;
      printf("%s%s %ld", sep, luaretry_reason_name((luaretry_reason)r), h->by_reason[r]);
      sep = ", ";
    }
    if (h->capped) printf("%sstopped after %ld attempts %ld", sep, CLIENT_ATTEMPT_CAP,
                          h->capped);
    putchar(')');
  }
  putchar('\n');
  if (h->nretry) {
    printf("peak: %ld retries in one 100 ms window (from %.3f s); even spread: %.2f per "
           "100 ms\n", h->peak, h->peak_at, h->even);
    printf("  (even spread = %zu retries, the attempts after t=0, / %ld windows of 100 ms "
           "from the first retry at %.3f s to the last attempt at %.3f s)\n",
           h->nretry, h->windows, h->retry[0], h->last);
  } else {
    printf("peak: no retries\n");
  }
  if (svg)
    printf("svg: %s, %ld buckets of %g s\n", svg, h->nbuckets, h->width);
}

static int simulate_clients(luaretry_policy *p, herd *h, int json, const char *svg) {
  luaretry_tuning t;
  if (luaretry_policy_tuning(p, &t) == LUARETRY_OK && t.name) h->name = t.name;
  int status = run_clients(p, h, json);
  if (status != EXIT_OK) return status;
  /* a policy error in the classifier is the policy's fault: exit 3, but
   * the simulation still reports what happened */
  if (h->by_reason[LUARETRY_REASON_POLICY_ERROR]) status = EXIT_POLICY;
  measure(h);
  choose_buckets(h);
  if (svg) {
    if (fill_buckets(h) != 0) {
      fprintf(stderr, "luaretry: simulate: out of memory\n");
      return EXIT_POLICY;
    }
    if (svg_save(svg, h) != 0) {
      if (!json) print_summary(h, NULL);
      return EXIT_POLICY;
    }
  }
  if (!json) print_summary(h, svg);
  return status;
}

int cli_simulate(int argc, char **argv) {
  const char *path = NULL, *svg = NULL;
  long long attempts = 0, seed = 1, clients = 0;
  double outage = 30;
  int json = 0, have_outage = 0;
  char **sets = malloc(sizeof *sets * (size_t)(argc + 2));
  char attempts_set[64];
  if (!sets) {
    fprintf(stderr, "luaretry: out of memory\n");
    return EXIT_POLICY;
  }
  int nsets = 0, status = EXIT_OK;
#define USAGE_FAIL(...) do { status = cli_usage(__VA_ARGS__); goto done; } while (0)
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--json") == 0) {
      json = 1;
    } else if (strcmp(a, "--attempts") == 0 || strcmp(a, "--seed") == 0 ||
               strcmp(a, "--set") == 0 || strcmp(a, "--clients") == 0 ||
               strcmp(a, "--outage") == 0 || strcmp(a, "--svg") == 0) {
      if (i + 1 >= argc) USAGE_FAIL("%s needs a value", a);
      const char *v = argv[++i];
      if (strcmp(a, "--set") == 0) {
        sets[nsets++] = argv[i];
      } else if (strcmp(a, "--svg") == 0) {
        if (!*v) USAGE_FAIL("--svg needs a file name%s", "");
        svg = v;
      } else if (strcmp(a, "--outage") == 0) {
        outage = parse_seconds(v);
        if (outage < 0) USAGE_FAIL("--outage %s: expected seconds from 0 to 1e6", v);
        have_outage = 1;
      } else if (strcmp(a, "--clients") == 0) {
        clients = parse_count(v);
        if (clients < 1 || clients > MAX_CLIENTS)
          USAGE_FAIL("--clients %s: expected a whole number from 1 to 1000000", v);
      } else {
        long long n = parse_count(v);
        if (n < 0 || (a[2] == 'a' && (n < 1 || n > 1000000)))
          USAGE_FAIL(a[2] == 'a' ? "--attempts %s: expected a whole number from 1 to 1000000"
                                 : "--seed %s: expected a whole number, 0 or more", v);
        if (a[2] == 'a') attempts = n;
        else seed = n;
      }
    } else if (a[0] == '-' && a[1]) {
      USAGE_FAIL("simulate: unknown option %s", a);
    } else if (!path) {
      path = a;
    } else {
      USAGE_FAIL("simulate: unexpected argument %s", a);
    }
  }
  if (!path) USAGE_FAIL("simulate: %s", "which POLICY?");
  if (!clients && (svg || have_outage))
    USAGE_FAIL("simulate: %s needs --clients N", svg ? "--svg" : "--outage");
  if (clients && attempts) {   /* each client's call: the same override as --attempts */
    snprintf(attempts_set, sizeof attempts_set, "max_attempts=%lld", attempts);
    sets[nsets++] = attempts_set;
  }

  luaretry_policy *p = cli_load_policy(path, sets, nsets, 1);
  if (!p) {
    status = EXIT_POLICY;
    goto done;
  }
  if (clients) {
    herd h;
    memset(&h, 0, sizeof h);
    h.path = path;
    h.name = path;
    h.clients = (long)clients;
    h.outage = outage;
    h.seed = (uint64_t)seed;
    status = simulate_clients(p, &h, json, svg);
    free(h.retry);
    free(h.buckets);
  } else {
    schedule_out out = { json };
    luaretry_code rc = luaretry_simulate(p, (uint64_t)seed, (long)attempts, print_decision, &out);
    if (rc != LUARETRY_OK) {
      fprintf(stderr, "luaretry: simulate: %s\n", luaretry_strerror(rc));
      status = EXIT_POLICY;
    }
  }
  if (fflush(stdout) != 0) status = EXIT_POLICY;
  luaretry_policy_free(p);
done:
  free(sets);
  return status;
#undef USAGE_FAIL
}
