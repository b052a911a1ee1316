/* sendable.c: what the host hands the helper, refused before any attempt
 * when no attempt could send it as it means: a URL that is not http or
 * https (libcurl would fail every attempt as "protocol", and the policy
 * would retry it), a method or header that would split the request, a
 * body_len with no body (an empty body was sent).  The rules are those
 * a script's prepare() and a workflow's requests are held to
 * (policy/request.c, policy/workflow.c); this layer reaches the public
 * API only, so the token rule of lr_header_name_ok (policy/schema.c) is
 * repeated here. */
#include <stdio.h>
#include <string.h>

#include "http.h"

/* RFC 9110's token: a method, a header's name. */
static int token(const char *s) {
  static const char tchar[] = "!#$%&'*+-.^_`|~";
  if (!*s) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          strchr(tchar, *s)))
      return 0;
  return 1;
}

/* s for a message: at most 40 bytes of it, a control byte as \xHH (a
 * line break the message names must not break the line that names it). */
static const char *shown(const char *s, char *out, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; s[i] && i < 40 && n + 5 < cap; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c == 0x7f)
      n += (size_t)snprintf(out + n, cap - n, "\\x%02X", c);
    else
      out[n++] = (char)c;
  }
  out[n] = '\0';
  return out;
}

/* Whether url is http or https as the transfer parses it (libcurl's own
 * flags: a URL without a scheme gets one guessed, http:// mostly). */
static luaretry_code url_ok(const char *url, char *why, size_t cap) {
  CURLU *u = curl_url();
  if (!u) return LUARETRY_E_NOMEM;
  char *scheme = NULL;
  CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME);
  if (uc == CURLUE_OK) uc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
  luaretry_code rc = LUARETRY_OK;
  if (uc == CURLUE_OUT_OF_MEMORY) {
    rc = LUARETRY_E_NOMEM;
  } else if (uc != CURLUE_OK) {
    snprintf(why, cap, "the request's URL is not one: %s", curl_url_strerror(uc));
    rc = LUARETRY_E_ARG;
  } else if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
    char s[200];
    snprintf(why, cap, "the request's URL has the scheme \"%s\": only http and https are reachable",
             shown(scheme, s, sizeof s));
    rc = LUARETRY_E_ARG;
  }
  curl_free(scheme);
  curl_url_cleanup(u);
  return rc;
}

luaretry_code lr_curl_sendable(const luaretry_request *r, char *why, size_t cap) {
  char s[200];
  luaretry_code rc = url_ok(r->url, why, cap);
  if (rc != LUARETRY_OK) return rc;
  if (r->method && !token(r->method)) {
    snprintf(why, cap, "the request's method \"%s\" is not a method (%s)",
             shown(r->method, s, sizeof s), LR_CURL_TOKEN_RULE);
    return LUARETRY_E_ARG;
  }
  /* headers NULL with a count, a NULL name: prepare refuses them, naming
   * them in the call's errmsg */
  for (size_t i = 0; r->headers && i < r->header_count; i++) {
    const luaretry_header *h = &r->headers[i];
    if (!h->name) continue;
    if (!token(h->name)) {
      snprintf(why, cap, "header name \"%s\" is not a name (%s)", shown(h->name, s, sizeof s),
               LR_CURL_TOKEN_RULE);
      return LUARETRY_E_ARG;
    }
    if (h->value && strpbrk(h->value, "\r\n")) {
      snprintf(why, cap, "header \"%s\": its value holds a line break: a request cannot be split",
               h->name);
      return LUARETRY_E_ARG;
    }
  }
  /* "body need only hold its first body_limit bytes" with an upload
   * function: what is_idempotent and prepare see, so it is not optional */
  if (!r->body && r->body_len) {
    snprintf(why, cap,
             "the request has a body_len of %zu and no body (body NULL): body holds the body, "
             "or with an upload function its first bytes",
             r->body_len);
    return LUARETRY_E_ARG;
  }
  return LUARETRY_OK;
}
