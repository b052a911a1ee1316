/* url.c: what `run` reads from a URL, always through curl's own parser so
 * that it agrees with the transfer: whether it is one, how logs show it,
 * and the file name --output-dir gives its body. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "run.h"

/* Whether url starts with "scheme:" (any case). */
static int has_scheme(const char *url, const char *scheme) {
  size_t n = strlen(scheme);
  return strncasecmp(url, scheme, n) == 0 && url[n] == ':';
}

int url_check(const char *url, char **fixed, char *why, size_t size) {
  *fixed = NULL;
  CURLU *u = curl_url();
  if (!u) {
    snprintf(why, size, "out of memory");
    return 0;
  }
  /* no scheme: guessed as curl guesses (http:// unless the host name says
   * ftp. or the like, which is then refused) */
  CURLUcode rc = curl_url_set(u, CURLUPART_URL, url, CURLU_GUESS_SCHEME);
  char *scheme = NULL, *full = NULL;
  int ok = rc == CURLUE_OK && curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
           (strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0);
  if (rc != CURLUE_OK)
    snprintf(why, size, "%s", curl_url_strerror(rc));
  else if (!ok)
    snprintf(why, size, "only http and https URLs are supported");
  if (ok && !has_scheme(url, scheme)) {
    if (curl_url_get(u, CURLUPART_URL, &full, 0) == CURLUE_OK) *fixed = strdup(full);
    if (!*fixed) ok = 0, snprintf(why, size, "out of memory");
  }
  curl_free(full);
  curl_free(scheme);
  curl_url_cleanup(u);
  return ok;
}

char *url_redacted(const char *url) {
  CURLU *u = curl_url();
  char *out = NULL;
  if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK) {
    curl_url_set(u, CURLUPART_USER, NULL, 0);
    curl_url_set(u, CURLUPART_PASSWORD, NULL, 0);
    char *s = NULL;
    if (curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK) {
      out = strdup(s);
      curl_free(s);
    }
  }
  curl_url_cleanup(u);
  return out;
}

char *url_redacted_rough(const char *url) {
  const char *sep = strstr(url, "://");
  size_t start = sep ? (size_t)(sep - url) + 3 : 0;
  size_t end = start + strcspn(url + start, "/?#");
  const char *at = NULL;
  for (const char *c = url + start; c < url + end; c++)
    if (*c == '@') at = c;
  size_t len = strlen(url);
  char *out = malloc(len + 1);
  if (!out) return NULL;
  if (!at) {
    memcpy(out, url, len + 1);
    return out;
  }
  size_t cut = (size_t)(at + 1 - url);
  memcpy(out, url, start);
  memcpy(out + start, url + cut, len - cut + 1);
  return out;
}

static int hex_digit(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

/* The last path segment, %-decoded, every byte but [A-Za-z0-9._+~-] turned
 * into '_', no leading dot, at most 200 bytes; "index" when empty. */
char *url_file_name(const char *url) {
  char name[201] = "";
  CURLU *u = curl_url();
  char *path = NULL;
  if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK && path) {
    const char *seg = strrchr(path, '/');
    seg = seg ? seg + 1 : path;
    size_t n = 0;
    for (; *seg && n < sizeof name - 1; seg++) {
      unsigned char c = (unsigned char)*seg;
      int hi, lo;
      if (c == '%' && (hi = hex_digit(seg[1])) >= 0 && (lo = hex_digit(seg[2])) >= 0) {
        c = (unsigned char)(hi * 16 + lo);
        seg += 2;
      }
      int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == '-' || c == '+' || c == '~';
      name[n++] = ok ? (char)c : '_';
    }
    name[n] = '\0';
    if (name[0] == '.') name[0] = '_'; /* no hidden files, no "." or ".." */
  }
  curl_free(path);
  curl_url_cleanup(u);
  return strdup(name[0] ? name : "index");
}

char *url_shown(const char *url) {
  /* a URL curl cannot parse cannot be redacted by it: ours; its bytes
   * escaped (a file's line may hold any, a terminal's controls too) */
  char *rough = url_redacted_rough(url), *safe = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&safe, &len);
  if (m) {
    cli_text(m, rough ? rough : "(URL)");
    if (fclose(m) != 0) free(safe), safe = NULL;
  }
  free(rough);
  return safe;
}
