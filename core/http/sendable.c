/* sendable.c: what the host hands the helper, refused before any attempt
 * when no attempt could send it as it means: a URL that is not http or
 * https (libcurl would fail every attempt as "protocol", and the policy
 * would retry it).  The rule is the one a script's prepare() and a
 * workflow's requests are held to (policy/request.c, policy/workflow.c). */
#include <stdio.h>
#include <string.h>

#include "http.h"

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

/* The scheme libcurl would use for url (it guesses one, http:// mostly,
 * for a URL without), parsed as the transfer parses it. */
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
  luaretry_code rc = url_ok(r->url, why, cap);
  return rc;
}
