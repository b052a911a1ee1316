/* trace.c: what curl's -v and --trace-ascii show, from libcurl's debug
 * callback, on every attempt: -v the request's headers ("> "), the
 * response's ("< ") and libcurl's notes ("* ") on standard error, between
 * luaretry's own lines; --trace-ascii FILE every header and body byte as
 * curl's trace dumps them (offset, then the bytes as text, '.' for what is
 * not printable, a line at each CRLF or every 64 bytes).
 *
 * Unlike curl, neither shows a credential: the values of Authorization and
 * Proxy-Authorization (their scheme kept), Cookie and Set-Cookie become
 * [redacted], and a user name or password in a URL is left out, as in
 * every other luaretry message.  One transfer runs at a time per thread (a
 * batch's share one), so one state serves the process. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "run.h"

#define TRACE_WIDTH 64 /* bytes a trace line shows at most, as curl's */

static struct {
  int verbose;     /* -v */
  FILE *ascii;     /* --trace-ascii, or NULL */
  int ascii_owned; /* a file of ours to close */
  const char *path;
  int write_errno; /* the first write that failed (said at the end), or 0 */
} T;

static const char *const SECRET_HEADERS[] = { "authorization", "proxy-authorization", "cookie",
                                              "set-cookie" };

/* Where the value of a credential header begins (past "Name:"), or 0;
 * *scheme: an Authorization's, whose first word (Basic, Bearer) may show. */
static size_t secret_header(const char *line, size_t n, int *scheme) {
  const char *colon = memchr(line, ':', n);
  if (!colon) return 0;
  size_t name = (size_t)(colon - line);
  for (size_t i = 0; i < sizeof SECRET_HEADERS / sizeof SECRET_HEADERS[0]; i++) {
    if (strlen(SECRET_HEADERS[i]) != name || strncasecmp(line, SECRET_HEADERS[i], name) != 0)
      continue;
    *scheme = i < 2;
    return name + 1;
  }
  return 0;
}

/* Copies s[0..n) to f with any user name and password of a URL in it
 * dropped ("scheme://user:pw@host" shows as "scheme://host"). */
static void put_without_userinfo(FILE *f, const char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    const char *sep = memmem(s + i, n - i, "://", 3);
    if (!sep) {
      fwrite(s + i, 1, n - i, f);
      return;
    }
    size_t host = (size_t)(sep - s) + 3;
    fwrite(s + i, 1, host - i, f);
    size_t end = host, from = host;
    while (end < n && !strchr("/?# \t\"'<>", s[end])) {
      if (s[end] == '@') from = end + 1;
      end++;
    }
    fwrite(s + from, 1, end - from, f);
    i = end;
  }
}

/* One line (no line end) as it may be shown, malloc'ed: credentials
 * hidden.  `header`: a header line, whose credential values go too. */
static char *redacted(const char *line, size_t n, int header) {
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  if (!f) return NULL;
  int scheme = 0;
  size_t value = header ? secret_header(line, n, &scheme) : 0;
  if (value) {
    fwrite(line, 1, value, f);
    const char *v = line + value;
    size_t vn = n - value;
    while (vn && (*v == ' ' || *v == '\t')) v++, vn--;
    const char *space = memchr(v, ' ', vn);
    if (scheme && space) fprintf(f, " %.*s", (int)(space - v), v);
    fputs(" [redacted]", f);
  } else {
    put_without_userinfo(f, line, n);
  }
  if (fclose(f) != 0) {
    free(out);
    return NULL;
  }
  return out;
}

/* -v: each line of the block with its prefix, escaped, whole lines. */
static void verbose_lines(const char *prefix, const char *data, size_t size, int header) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return;
  size_t i = 0;
  while (i < size) {
    const char *nl = memchr(data + i, '\n', size - i);
    size_t end = nl ? (size_t)(nl - data) : size;
    size_t n = end - i;
    if (n && data[i + n - 1] == '\r') n--;
    char *line = redacted(data + i, n, header);
    fputs(prefix, f);
    cli_text(f, line ? line : "(out of memory)");
    fputc('\n', f);
    free(line);
    i = nl ? end + 1 : size;
  }
  if (fclose(f) == 0) fwrite(text, 1, len, stderr);
  free(text);
}

/* --trace-ascii: a block as curl dumps it.  Header lines are redacted
 * before they are shown; offsets count the bytes that went. */
static void ascii_dump(const char *what, const char *data, size_t size, int header) {
  FILE *f = T.ascii;
  fprintf(f, "%s, %zu bytes (0x%zx)\n", what, size, size);
  size_t i = 0;
  while (i < size) {
    size_t n = 0;
    while (n < TRACE_WIDTH && i + n < size &&
           !(data[i + n] == '\r' && i + n + 1 < size && data[i + n + 1] == '\n'))
      n++;
    size_t skip = i + n + 1 < size && data[i + n] == '\r' && data[i + n + 1] == '\n' ? 2 : 0;
    char *line = header ? redacted(data + i, n, 1) : NULL;
    const char *show = line ? line : data + i;
    size_t shown = line ? strlen(line) : n;
    fprintf(f, "%04zx: ", i);
    for (size_t k = 0; k < shown; k++) {
      unsigned char c = (unsigned char)show[k];
      fputc(c >= 0x20 && c < 0x7f ? c : '.', f);
    }
    fputc('\n', f);
    free(line);
    i += n + skip;
  }
}

static int on_debug(CURL *h, curl_infotype type, char *data, size_t size, void *ud) {
  (void)h, (void)ud;
  trace_feed(type, data, size);
  return 0;
}

void trace_feed(int type, const char *data, size_t size) {
  if (T.verbose) {
    if (type == CURLINFO_HEADER_OUT)
      verbose_lines("> ", data, size, 1);
    else if (type == CURLINFO_HEADER_IN)
      verbose_lines("< ", data, size, 1);
    else if (type == CURLINFO_TEXT)
      verbose_lines("* ", data, size, 0);
  }
  if (!T.ascii) return;
  switch (type) {
  case CURLINFO_TEXT: {
    char *line = redacted(data, size && data[size - 1] == '\n' ? size - 1 : size, 0);
    fputs("== Info: ", T.ascii);
    for (const char *c = line ? line : ""; *c; c++) /* a server's bytes drive no terminal */
      fputc((unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f ? *c : '.', T.ascii);
    fputc('\n', T.ascii);
    free(line);
    break;
  }
  case CURLINFO_HEADER_OUT: ascii_dump("=> Send header", data, size, 1); break;
  case CURLINFO_HEADER_IN: ascii_dump("<= Recv header", data, size, 1); break;
  case CURLINFO_DATA_OUT: ascii_dump("=> Send data", data, size, 0); break;
  case CURLINFO_DATA_IN: ascii_dump("<= Recv data", data, size, 0); break;
  case CURLINFO_SSL_DATA_OUT: ascii_dump("=> Send SSL data", data, size, 0); break;
  case CURLINFO_SSL_DATA_IN: ascii_dump("<= Recv SSL data", data, size, 0); break;
  default: break;
  }
  if ((fflush(T.ascii) != 0 || ferror(T.ascii)) && !T.write_errno)
    T.write_errno = errno ? errno : EIO;
}

int trace_open(const run_args *a) {
  T.verbose = a->verbosity > 1;
  if (!a->trace_ascii) return 0;
  const char *path = T.path = a->trace_ascii;
  /* curl's spellings: "-" standard output, "%" standard error */
  if (strcmp(path, "-") == 0)
    T.ascii = stdout;
  else if (strcmp(path, "%") == 0)
    T.ascii = stderr;
  else if ((T.ascii = fopen(path, "we")))
    T.ascii_owned = 1;
  if (T.ascii) return 0;
  fprintf(stderr, "luaretry: --trace-ascii %s: %s\n", path, strerror(errno));
  return -1;
}

int trace_active(void) { return T.verbose || T.ascii; }

void trace_apply(CURL *h) {
  if (!trace_active()) return;
  curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, on_debug);
  curl_easy_setopt(h, CURLOPT_DEBUGDATA, NULL);
  curl_easy_setopt(h, CURLOPT_VERBOSE, 1L); /* the debug callback's switch */
}

/* A trace that could not be written (a full disk) is said, as --log-json's
 * lines are; the exit status stays the call's. */
void trace_close(void) {
  if (T.ascii_owned && fclose(T.ascii) != 0 && !T.write_errno) T.write_errno = errno;
  if (T.ascii && !T.ascii_owned) fflush(T.ascii);
  if (T.write_errno && T.ascii != stdout) /* standard output's errors: output.c's */
    fprintf(stderr, "luaretry: --trace-ascii %s: writing: %s\n", T.path, strerror(T.write_errno));
  memset(&T, 0, sizeof T);
}
