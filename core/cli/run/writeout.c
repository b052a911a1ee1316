/* writeout.c: -w/--write-out FORMAT, as curl's: text with \n, \r and \t
 * escapes, %% for a percent sign, %{variable} and %header{name} (the
 * final response's header).  The format is read (-w @FILE, @- for standard
 * input) and checked before the run, so a misspelt variable stops nothing
 * half way: curl warns and goes on; here it is a usage error (exit 2). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "cli/output.h"
#include "run.h"

#define FORMAT_MAX 65536

typedef enum {
  W_HTTP_CODE,
  W_NUM_ATTEMPTS,
  W_TIME_TOTAL,
  W_NUM_REDIRECTS,
  W_URL_EFFECTIVE,
  W_CONTENT_TYPE,
  W_SIZE_DOWNLOAD,
  W_REDIRECT_URL,
  W_EXITCODE,
  W_VERDICT
} variable;

static const struct {
  const char *name;
  variable v;
} VARIABLES[] = {
  { "http_code", W_HTTP_CODE },
  { "response_code", W_HTTP_CODE },
  { "num_attempts", W_NUM_ATTEMPTS },
  { "time_total", W_TIME_TOTAL },
  { "num_redirects", W_NUM_REDIRECTS },
  { "url_effective", W_URL_EFFECTIVE },
  { "content_type", W_CONTENT_TYPE },
  { "size_download", W_SIZE_DOWNLOAD },
  { "redirect_url", W_REDIRECT_URL },
  { "exitcode", W_EXITCODE },
  { "verdict", W_VERDICT },
};
#define N_VARIABLES (sizeof VARIABLES / sizeof VARIABLES[0])

/* The variable named by the n bytes at s; -1 for none. */
static int lookup(const char *s, size_t n) {
  for (size_t k = 0; k < N_VARIABLES; k++)
    if (strlen(VARIABLES[k].name) == n && memcmp(VARIABLES[k].name, s, n) == 0)
      return (int)VARIABLES[k].v;
  return -1;
}

/* The whole format of FILE, never a part of it: one byte more than the
 * limit is read to tell a format that fits from one that does not, and a
 * NUL byte (which would end it early) is refused too. */
static char *read_format(const char *path) {
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
  char *s = f ? malloc(FORMAT_MAX + 2) : NULL;
  size_t n = s ? fread(s, 1, FORMAT_MAX + 1, f) : 0;
  const char *why = !f                   ? strerror(errno)
                    : !s                 ? "out of memory"
                    : ferror(f)          ? strerror(errno)
                    : n > FORMAT_MAX     ? "longer than 65536 bytes"
                    : memchr(s, '\0', n) ? "holds a NUL byte"
                                         : NULL;
  if (f && f != stdin) fclose(f);
  if (why) {
    fprintf(stderr, "luaretry: -w @%s: %s\n", path, why);
    free(s);
    return NULL;
  }
  s[n] = '\0';
  return s;
}

/* Checks every %{...} of the format; 0 or a usage status. */
static int check(const char *format) {
  for (const char *p = format; (p = strchr(p, '%')); p++) {
    if (p[1] == '%') {
      p++;
      continue;
    }
    int header = strncmp(p + 1, "header{", 7) == 0;
    if (p[1] != '{' && !header) continue; /* a lone %: printed as it is */
    const char *open = p + (header ? 8 : 2), *close = strchr(open, '}');
    if (!close) return cli_usage("run: -w: %s: no closing }", p);
    /* print_header's buffer: no header name is that long, say so */
    if (header && close - open >= 256)
      return cli_usage("run: -w: %s: a header name above 255 bytes", p);
    if (!header && lookup(open, (size_t)(close - open)) < 0) {
      char name[64];
      snprintf(name, sizeof name, "%.*s", (int)(close - open < 60 ? close - open : 60), open);
      return cli_usage(
        "run: -w: unknown variable %%{%s} (http_code, num_attempts, time_total, "
        "num_redirects, url_effective, content_type, size_download, "
        "redirect_url, exitcode, verdict, or %%header{NAME})",
        name);
    }
    p = close;
  }
  return 0;
}

int writeout_load(const char *arg, char **format) {
  *format = arg[0] == '@' ? read_format(arg + 1) : strdup(arg);
  if (!*format) return EXIT_USAGE;
  int status = check(*format);
  if (status) {
    free(*format);
    *format = NULL;
  }
  return status;
}

/* A URL as every other output shows it: without its user name and
 * password (curl's -w prints them). */
static void put_url(FILE *f, const char *url) {
  if (!url) return;
  char *clean = url_redacted(url);
  if (!clean) clean = url_redacted_rough(url);
  if (clean) fputs(clean, f);
  free(clean);
}

static void print_variable(FILE *f, variable v, const writeout_info *w) {
  long n = 0;
  char *s = NULL;
  curl_off_t size = 0;
  switch (v) {
  case W_HTTP_CODE: fprintf(f, "%03d", w->status); break;
  case W_NUM_ATTEMPTS: fprintf(f, "%d", w->final->attempt); break;
  case W_TIME_TOTAL: fprintf(f, "%.6f", w->final->elapsed); break;
  case W_NUM_REDIRECTS:
    curl_easy_getinfo(w->h, CURLINFO_REDIRECT_COUNT, &n);
    fprintf(f, "%ld", n);
    break;
  case W_URL_EFFECTIVE: curl_easy_getinfo(w->h, CURLINFO_EFFECTIVE_URL, &s); break;
  case W_CONTENT_TYPE: curl_easy_getinfo(w->h, CURLINFO_CONTENT_TYPE, &s); break;
  case W_REDIRECT_URL: curl_easy_getinfo(w->h, CURLINFO_REDIRECT_URL, &s); break;
  case W_SIZE_DOWNLOAD:
    curl_easy_getinfo(w->h, CURLINFO_SIZE_DOWNLOAD_T, &size);
    fprintf(f, "%lld", (long long)size);
    break;
  case W_EXITCODE: fprintf(f, "%d", w->exit_status); break;
  case W_VERDICT: fputs(luaretry_reason_name(w->final->reason), f); break;
  }
  if (v == W_URL_EFFECTIVE || v == W_REDIRECT_URL)
    put_url(f, s);
  else if (s)
    fputs(s, f);
}

static void print_header(FILE *f, const char *name, size_t n, CURL *h) {
  char buf[256];
  if (n >= sizeof buf) return;
  memcpy(buf, name, n);
  buf[n] = '\0';
  struct curl_header *hd;
  if (curl_easy_header(h, buf, 0, CURLH_HEADER, -1, &hd) != CURLHE_OK) return;
  /* a URL the server sends back is shown as the URL variables are */
  if (strcasecmp(buf, "location") == 0 || strcasecmp(buf, "content-location") == 0)
    put_url(f, hd->value);
  else
    fputs(hd->value, f);
}

/* curl's: \n, \r and \t; any other pair (\\ too) printed as it is,
 * both bytes; a lone \ at the end as it is. */
static const char *escape(FILE *f, const char *p) {
  switch (p[1]) {
  case 'n': fputc('\n', f); return p + 1;
  case 'r': fputc('\r', f); return p + 1;
  case 't': fputc('\t', f); return p + 1;
  case '\0': fputc('\\', f); return p;
  default:
    fputc('\\', f);
    fputc(p[1], f);
    return p + 1;
  }
}

void writeout_print(FILE *f, const char *format, const writeout_info *w) {
  for (const char *p = format; *p; p++) {
    if (*p == '\\') {
      p = escape(f, p);
      continue;
    }
    if (*p != '%') {
      fputc(*p, f);
      continue;
    }
    if (p[1] == '%') {
      fputc('%', f);
      p++;
      continue;
    }
    int header = strncmp(p + 1, "header{", 7) == 0;
    /* a lone % (the format's last byte too): printed as it is, and
     * nothing past it read */
    const char *open = p + (header ? 8 : 2),
               *close = p[1] == '{' || header ? strchr(open, '}') : NULL;
    if (!close) {
      fputc('%', f);
      continue;
    }
    if (header)
      print_header(f, open, (size_t)(close - open), w->h);
    else
      print_variable(f, (variable)lookup(open, (size_t)(close - open)), w);
    p = close;
  }
  if (f == stdout)
    cli_out_flush(); /* a failure is said at the end, with its reason */
  else
    fflush(f);
}
