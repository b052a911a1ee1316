/* svg.c: simulate --svg, the herd's attempts over time as a histogram in
 * one self-contained SVG (no scripts, no links): a bar per time bucket, the
 * outage shaded, and the even spread the same retries would have as a
 * dashed line. */
#include <math.h>
#include <stdio.h>

#include "cli/simulate/simulate.h"

/* The page and the plot area's margins, in SVG units. */
static const double W = 960, H = 540, L = 80, R = 30, T = 70, B = 70;

typedef struct {
  double pw, ph;      /* the plot area's size */
  double span;        /* seconds along x */
  double ystep, ytop; /* y ticks, and the top of the y axis */
  double xstep;       /* x ticks */
} frame;

static double x_at(const frame *g, double t) { return L + t / g->span * g->pw; }
static double y_at(const frame *g, double n) { return T + g->ph - n / g->ytop * g->ph; }

/* A "nice" step (1, 2, 5 x 10^k) near span / n. */
static double nice_step(double span, int n) {
  if (!(span > 0)) return 1;
  double raw = span / n;
  double p = pow(10, floor(log10(raw)));
  double f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static frame frame_for(const herd *h) {
  frame g;
  g.pw = W - L - R;
  g.ph = H - T - B;
  g.span = (double)h->nbuckets * h->width;
  long ymax = 1;
  for (long i = 0; i < h->nbuckets; i++)
    if (h->buckets[i] > ymax) ymax = h->buckets[i];
  g.ystep = nice_step((double)ymax, 5);
  if (g.ystep < 1) g.ystep = 1;
  g.ytop = ceil((double)ymax / g.ystep) * g.ystep;
  g.xstep = nice_step(g.span, 10);
  return g;
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

/* "NAME (PATH): N clients, S s outage, seed K" and the closing tag. */
static void title_text(FILE *f, const herd *h, const char *close) {
  xml_text(f, h->name);
  fputs(" (", f);
  xml_text(f, h->path);
  fprintf(f, "): %ld clients, %g s outage, seed %llu%s\n", h->clients, h->outage,
          (unsigned long long)h->seed, close);
}

/* The document, its style and background, the title and a line of numbers. */
static void svg_head(FILE *f, const herd *h) {
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
          "viewBox=\"0 0 %g %g\" font-family=\"sans-serif\" font-size=\"12\">\n",
          W, H, W, H);
  fputs("<title>", f);
  title_text(f, h, "</title>");
  fputs(
    "<style>.bar{fill:#3b6fb6}.outage{fill:#f6dede}.axis{stroke:#222;stroke-width:1}"
    ".grid{stroke:#e4e4e4;stroke-width:1}.even{stroke:#d2691e;stroke-width:1.5;"
    "stroke-dasharray:6 4}.tick{fill:#222}</style>\n",
    f);
  fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%g\" height=\"%g\" fill=\"#ffffff\"/>\n", W, H);
  fprintf(f,
          "<text x=\"%g\" y=\"26\" text-anchor=\"middle\" font-size=\"16\" "
          "font-weight=\"bold\">",
          W / 2);
  title_text(f, h, "</text>");
  fprintf(f,
          "<text x=\"%g\" y=\"46\" text-anchor=\"middle\" fill=\"#444\">%zu attempts "
          "(%ld at t=0, %zu retries); peak %ld retries in 100 ms; an even spread: %.1f"
          "</text>\n",
          W / 2, (size_t)h->clients + h->nretry, h->clients, h->nretry, h->peak, h->even);
}

static void svg_outage(FILE *f, const frame *g, const herd *h) {
  double oend = h->outage < g->span ? h->outage : g->span;
  if (oend <= 0) return;
  fprintf(f,
          "<rect class=\"outage\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\">"
          "<title>outage: 0 to %g s</title></rect>\n",
          x_at(g, 0.0), T, x_at(g, oend) - x_at(g, 0.0), g->ph, h->outage);
  fprintf(f,
          "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" fill=\"#a33\">outage "
          "(%d)</text>\n",
          x_at(g, oend) - 4, T + 14, h->status);
}

/* Horizontal grid lines with the y ticks. */
static void svg_grid(FILE *f, const frame *g) {
  for (double v = 0; v <= g->ytop + g->ystep / 2; v += g->ystep) {
    fprintf(f, "<line class=\"grid\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", L,
            y_at(g, v), L + g->pw, y_at(g, v));
    fprintf(f, "<text class=\"tick\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\">%g</text>\n", L - 6,
            y_at(g, v) + 4, v);
  }
}

static void svg_bars(FILE *f, const frame *g, const herd *h) {
  double bw = g->pw / (double)h->nbuckets;
  for (long i = 0; i < h->nbuckets; i++) {
    double t0 = (double)i * h->width, n = (double)h->buckets[i];
    fprintf(f,
            "<rect class=\"bar\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\">"
            "<title>%g to %g s: %ld</title></rect>\n",
            x_at(g, t0), y_at(g, n), bw > 1.5 ? bw - 0.5 : bw, T + g->ph - y_at(g, n), t0,
            t0 + h->width, h->buckets[i]);
  }
}

/* The even spread, per bucket, from the first retry to the last attempt. */
static void svg_even(FILE *f, const frame *g, const herd *h) {
  if (!h->nretry) return;
  double per_bucket = h->even * h->width / WINDOW;
  if (per_bucket > g->ytop) return;
  fprintf(f, "<line class=\"even\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n",
          x_at(g, h->retry[0]), y_at(g, per_bucket), x_at(g, h->last), y_at(g, per_bucket));
  fprintf(f,
          "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" fill=\"#d2691e\">even "
          "spread</text>\n",
          x_at(g, h->last), y_at(g, per_bucket) - 5);
}

/* The axes, the x ticks, and both labels. */
static void svg_axes(FILE *f, const frame *g, const herd *h) {
  const double bottom = T + g->ph;
  fprintf(f, "<line class=\"axis\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", L, bottom,
          L + g->pw, bottom);
  fprintf(f, "<line class=\"axis\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", L, T, L,
          bottom);
  for (double t = 0; t <= g->span + g->xstep / 1000; t += g->xstep) {
    fprintf(f, "<line class=\"axis\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n",
            x_at(g, t), bottom, x_at(g, t), bottom + 5);
    fprintf(f, "<text class=\"tick\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">%g</text>\n",
            x_at(g, t), bottom + 19, t);
  }
  fprintf(f,
          "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">seconds since every client "
          "failed at t=0 (buckets of %g s)</text>\n",
          L + g->pw / 2, H - 22, h->width);
  fprintf(f,
          "<text transform=\"translate(22 %g) rotate(-90)\" text-anchor=\"middle\">"
          "attempts per %g s</text>\n",
          T + g->ph / 2, h->width);
}

void svg_write(FILE *f, const herd *h) {
  frame g = frame_for(h);
  svg_head(f, h);
  svg_outage(f, &g, h);
  svg_grid(f, &g);
  svg_bars(f, &g, h);
  svg_even(f, &g, h);
  svg_axes(f, &g, h);
  fputs("</svg>\n", f);
}
