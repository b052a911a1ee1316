/*
 * http_parse.c: incremental HTTP/1.1 request parsing for the faults
 * server.  Everything is done in place in the connection's buffer: the head
 * is cut into NUL-terminated strings and a chunked body is decoded over its
 * own framing, so a request never needs a second copy.
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "faults.h"

#define MAX_LINE 4096 /* a chunk-size or trailer line */

enum { CH_SIZE, CH_DATA, CH_DATA_END, CH_TRAILER, CH_DONE };

static int is_tchar(int c) { return c > 0 && (isalnum(c) || strchr("!#$%&'*+-.^_`|~", c) != NULL); }

/* Offset just past the blank line ending the head, or 0. */
static size_t head_end(const char *b, size_t from, size_t len) {
  const char *p = b + from, *e = b + len;
  while ((p = memchr(p, '\n', (size_t)(e - p))) != NULL) {
    if (p + 1 < e && p[1] == '\n') return (size_t)(p + 2 - b);
    if (p + 2 < e && p[1] == '\r' && p[2] == '\n') return (size_t)(p + 3 - b);
    p++;
  }
  return 0;
}

/* Cut the line at *p (ending before `end`) and move *p past it. */
static char *cut_line(char **p, char *end) {
  char *s = *p, *nl = memchr(s, '\n', (size_t)(end - s));
  if (nl == NULL) nl = end - 1; /* cannot happen: the head ends in \n */
  *nl = '\0';
  if (nl > s && nl[-1] == '\r') nl[-1] = '\0';
  *p = nl + 1;
  return s;
}

static char *trim(char *s) {
  char *e;
  while (*s == ' ' || *s == '\t') s++;
  e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t')) *--e = '\0';
  return s;
}

/* Does the comma-separated list `v` hold `token` (case-insensitively)? */
static int has_token(const char *v, const char *token) {
  size_t n = strlen(token);
  while (*v) {
    size_t len;
    while (*v == ' ' || *v == '\t' || *v == ',') v++;
    len = strcspn(v, ",");
    while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t')) len--;
    if (len == n && strncasecmp(v, token, n) == 0) return 1;
    v += strcspn(v, ",");
  }
  return 0;
}

const char *lr_http_header_get(const lr_http_req *r, const char *name) {
  for (size_t i = 0; i < r->nheaders; i++)
    if (strcmp(r->headers[i].name, name) == 0) return r->headers[i].value;
  return NULL;
}

static int parse_request_line(lr_http_req *r, char *line) {
  char *sp1 = strchr(line, ' '), *sp2, *q, *target;
  if (sp1 == NULL || sp1 == line) return 400;
  *sp1 = '\0';
  for (char *m = line; *m; m++)
    if (!is_tchar((unsigned char)*m)) return 400;
  r->method = line;
  target = sp1 + 1;
  if ((sp2 = strchr(target, ' ')) == NULL || sp2 == target) return 400;
  *sp2 = '\0';
  for (char *t = target; *t; t++)
    if ((unsigned char)*t <= ' ' || *t == 0x7f) return 400;
  if (strncmp(sp2 + 1, "HTTP/", 5) != 0) return 400;
  if (strcmp(sp2 + 1, "HTTP/1.1") == 0)
    r->minor = 1;
  else if (strcmp(sp2 + 1, "HTTP/1.0") == 0)
    r->minor = 0;
  else
    return 505;
  r->path = target;
  /* absolute-form (as sent to proxies): keep only the path */
  if (strncasecmp(r->path, "http://", 7) == 0 || strncasecmp(r->path, "https://", 8) == 0) {
    char *slash = strchr(strstr(r->path, "//") + 2, '/');
    r->path = slash ? slash : "/";
  }
  r->query = "";
  if ((q = strchr(r->path, '?')) != NULL) {
    *q = '\0';
    r->query = q + 1;
  }
  return 0;
}

static int parse_header(lr_http_req *r, char *line) {
  char *colon = strchr(line, ':');
  if (line[0] == ' ' || line[0] == '\t') return 400; /* obsolete folding */
  if (colon == NULL || colon == line) return 400;
  *colon = '\0';
  for (char *n = line; *n; n++) {
    if (!is_tchar((unsigned char)*n)) return 400;
    *n = (char)tolower((unsigned char)*n);
  }
  if (r->nheaders == LR_HTTP_MAX_HEADERS) return 431;
  r->headers[r->nheaders].name = line;
  r->headers[r->nheaders].value = trim(colon + 1);
  r->nheaders++;
  return 0;
}

/* Decide how the body is framed. */
static int parse_framing(lr_http_req *r) {
  int have_te = 0, have_cl = 0;
  const char *v;
  for (size_t i = 0; i < r->nheaders; i++) {
    const char *name = r->headers[i].name;
    v = r->headers[i].value;
    if (strcmp(name, "transfer-encoding") == 0) {
      /* we decode only plain "chunked", given once */
      if (have_te || strcasecmp(v, "chunked") != 0) return 501;
      have_te = 1;
    } else if (strcmp(name, "content-length") == 0) {
      size_t n = 0, digits = strspn(v, "0123456789");
      if (digits == 0 || v[digits] != '\0') return 400;
      const char *d = v + strspn(v, "0"); /* leading zeros do not make it longer */
      if (strlen(d) > 10) return 413;
      for (; *d; d++) n = n * 10 + (size_t)(*d - '0');
      if (have_cl && n != r->content_length) return 400;
      r->content_length = n;
      have_cl = 1;
    }
  }
  if (have_te) {
    r->chunked = 1;
    r->content_length = 0;
  } else if (r->content_length > LR_HTTP_MAX_LENGTH)
    return 413;
  v = lr_http_header_get(r, "connection");
  r->keep_alive = r->minor == 1 ? !(v && has_token(v, "close")) : (v && has_token(v, "keep-alive"));
  v = lr_http_header_get(r, "expect");
  r->expect_continue = v != NULL && strcasecmp(v, "100-continue") == 0;
  return 0;
}

static int parse_head(lr_http_req *r, char *buf, size_t *len) {
  size_t end;
  int st;
  char *p = buf, *e;
  if (r->scan == 0) { /* ignore empty lines before a request */
    size_t skip = 0;
    while (skip < *len && (buf[skip] == '\r' || buf[skip] == '\n')) skip++;
    memmove(buf, buf + skip, *len - skip);
    *len -= skip;
  }
  end = head_end(buf, r->scan, *len);
  if (end == 0) {
    r->scan = *len > 2 ? *len - 2 : 0;
    return *len > LR_HTTP_MAX_HEAD ? 431 : LR_HTTP_MORE;
  }
  if (end > LR_HTTP_MAX_HEAD) return 431;
  /* a NUL would end a name or value early: what the script saw would not
     be what was sent */
  if (memchr(buf, '\0', end)) return 400;
  e = buf + end;
  if ((st = parse_request_line(r, cut_line(&p, e))) != 0) return st;
  while (p < e) {
    char *line = cut_line(&p, e);
    if (*line == '\0') break;
    if ((st = parse_header(r, line)) != 0) return st;
  }
  if ((st = parse_framing(r)) != 0) return st;
  r->head_len = r->raw = end;
  return LR_HTTP_MORE;
}

/* A line at r->raw: its length (without the line end) in *n and the bytes
   to skip in *skip; 0 if incomplete, -1 if too long. */
static int chunk_line(lr_http_req *r, const char *buf, size_t len, size_t *n, size_t *skip) {
  const char *s = buf + r->raw;
  const char *nl = memchr(s, '\n', len - r->raw);
  /* incomplete: MAX_LINE bytes and the CR before the LF may be here */
  if (nl == NULL) return len - r->raw > MAX_LINE + 1 ? -1 : 0;
  *skip = (size_t)(nl - s) + 1;
  *n = (size_t)(nl - s) - (nl > s && nl[-1] == '\r');
  return *n > MAX_LINE ? -1 : 1;
}

static int parse_chunked(lr_http_req *r, char *buf, size_t len) {
  size_t n, skip;
  int got;
  for (;;) {
    switch (r->chunk_state) {
    case CH_SIZE: {
      size_t size = 0, i;
      if ((got = chunk_line(r, buf, len, &n, &skip)) <= 0) return got < 0 ? 400 : LR_HTTP_MORE;
      for (i = 0; i < n && isxdigit((unsigned char)buf[r->raw + i]); i++) {
        int c = tolower((unsigned char)buf[r->raw + i]);
        size = size * 16 + (size_t)(isdigit(c) ? c - '0' : c - 'a' + 10);
        if (size > LR_HTTP_MAX_BODY) return 413;
      }
      if (i == 0 ||
          (i < n && buf[r->raw + i] != ';' && buf[r->raw + i] != ' ' && buf[r->raw + i] != '\t'))
        return 400;
      if (r->body_len + size > LR_HTTP_MAX_BODY) return 413;
      r->raw += skip;
      r->chunk_left = size;
      r->chunk_state = size ? CH_DATA : CH_TRAILER;
      break;
    }
    case CH_DATA: { /* slide the data down over the framing before it */
      size_t avail = len - r->raw;
      n = avail < r->chunk_left ? avail : r->chunk_left;
      memmove(buf + r->head_len + r->body_len, buf + r->raw, n);
      r->body_len += n;
      r->raw += n;
      r->chunk_left -= n;
      if (r->chunk_left > 0) return LR_HTTP_MORE;
      r->chunk_state = CH_DATA_END;
      break;
    }
    case CH_DATA_END:
      if (len - r->raw >= 1 && buf[r->raw] == '\n')
        r->raw += 1;
      else if (len - r->raw < 2)
        return LR_HTTP_MORE;
      else if (buf[r->raw] == '\r' && buf[r->raw + 1] == '\n')
        r->raw += 2;
      else
        return 400;
      r->chunk_state = CH_SIZE;
      break;
    case CH_TRAILER: /* trailers are read and dropped; chunk_left counts them */
      if ((got = chunk_line(r, buf, len, &n, &skip)) <= 0) return got < 0 ? 431 : LR_HTTP_MORE;
      r->raw += skip;
      r->chunk_left += skip;
      if (r->chunk_left > LR_HTTP_MAX_HEAD) return 431;
      if (n == 0) r->chunk_state = CH_DONE;
      break;
    default: return LR_HTTP_DONE;
    }
  }
}

unsigned long long lr_http_fnv1a(unsigned long long h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/* A body past LR_HTTP_MAX_BODY: what arrived beyond the kept part is
   hashed and dropped (never bytes of a request that follows). */
static void drop_past_limit(lr_http_req *r, char *buf, size_t *len) {
  char *kept_end;
  size_t have = *len - r->head_len, extra;
  if (r->content_length <= LR_HTTP_MAX_BODY || have <= LR_HTTP_MAX_BODY) return;
  kept_end = buf + r->head_len + LR_HTTP_MAX_BODY;
  extra = have - LR_HTTP_MAX_BODY;
  if (extra > r->content_length - LR_HTTP_MAX_BODY - r->dropped)
    extra = r->content_length - LR_HTTP_MAX_BODY - r->dropped;
  if (r->dropped == 0)
    r->hash = lr_http_fnv1a(0xcbf29ce484222325ull, buf + r->head_len, LR_HTTP_MAX_BODY);
  r->hash = lr_http_fnv1a(r->hash, kept_end, extra);
  memmove(kept_end, kept_end + extra, (size_t)(buf + *len - kept_end) - extra);
  *len -= extra;
  r->dropped += extra;
}

int lr_http_parse(lr_http_req *r, char *buf, size_t *len) {
  int st;
  if (r->head_len == 0) {
    st = parse_head(r, buf, len);
    if (st != LR_HTTP_MORE || r->head_len == 0) return st;
  }
  if (!r->chunked) {
    size_t have, in_buf;
    drop_past_limit(r, buf, len);
    have = *len - r->head_len;
    in_buf = r->content_length - r->dropped;
    r->body_len = have < in_buf ? have : in_buf;
    if (r->body_len < in_buf) return LR_HTTP_MORE;
    r->end = r->head_len + in_buf;
    return LR_HTTP_DONE;
  }
  st = parse_chunked(r, buf, *len);
  { /* drop the framing consumed so far so the buffer does not grow */
    size_t out = r->head_len + r->body_len;
    if (r->raw > out) {
      memmove(buf + out, buf + r->raw, *len - r->raw);
      *len -= r->raw - out;
      r->raw = out;
    }
  }
  if (st == LR_HTTP_DONE) r->end = r->raw;
  return st;
}

int lr_http_body_done(const lr_http_req *r) {
  return r->chunked ? r->chunk_state == CH_DONE : r->body_len + r->dropped == r->content_length;
}

/* The phrases of IANA's HTTP Status Code Registry (RFC 9110 and the RFCs
 * it names); 418, kept "(Unused)" there, says what servers say (RFC 2324).
 * An unregistered code gets its class's word. */
const char *lr_http_reason(int status) {
  switch (status) {
  case 100: return "Continue";
  case 101: return "Switching Protocols";
  case 102: return "Processing";
  case 103: return "Early Hints";
  case 200: return "OK";
  case 201: return "Created";
  case 202: return "Accepted";
  case 203: return "Non-Authoritative Information";
  case 204: return "No Content";
  case 205: return "Reset Content";
  case 206: return "Partial Content";
  case 207: return "Multi-Status";
  case 208: return "Already Reported";
  case 226: return "IM Used";
  case 300: return "Multiple Choices";
  case 301: return "Moved Permanently";
  case 302: return "Found";
  case 303: return "See Other";
  case 304: return "Not Modified";
  case 305: return "Use Proxy";
  case 307: return "Temporary Redirect";
  case 308: return "Permanent Redirect";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 402: return "Payment Required";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 406: return "Not Acceptable";
  case 407: return "Proxy Authentication Required";
  case 408: return "Request Timeout";
  case 409: return "Conflict";
  case 410: return "Gone";
  case 411: return "Length Required";
  case 412: return "Precondition Failed";
  case 413: return "Content Too Large";
  case 414: return "URI Too Long";
  case 415: return "Unsupported Media Type";
  case 416: return "Range Not Satisfiable";
  case 417: return "Expectation Failed";
  case 418: return "I'm a teapot";
  case 421: return "Misdirected Request";
  case 422: return "Unprocessable Content";
  case 423: return "Locked";
  case 424: return "Failed Dependency";
  case 425: return "Too Early";
  case 426: return "Upgrade Required";
  case 428: return "Precondition Required";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 451: return "Unavailable For Legal Reasons";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  case 505: return "HTTP Version Not Supported";
  case 506: return "Variant Also Negotiates";
  case 507: return "Insufficient Storage";
  case 508: return "Loop Detected";
  case 510: return "Not Extended";
  case 511: return "Network Authentication Required";
  default:
    return status < 200   ? "Informational"
           : status < 300 ? "OK"
           : status < 400 ? "Redirect"
           : status < 500 ? "Client Error"
                          : "Server Error";
  }
}
