/* curlopts.c: curl's own options of `run` set on the easy handle, which
 * the curl helper keeps (it sets only URL, method, headers, body, timeouts
 * and its callbacks on each attempt).  Each keeps curl's meaning; libcurl
 * itself does what curl does with them, e.g. after a redirect to another
 * host (or port, or scheme) it sends neither -u's credentials nor an
 * Authorization or Cookie header of -H, unless --location-trusted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

/* curl's --cert FILE[:PASSWORD]: the first ':' not escaped as "\:" ends
 * the file name; file and password into malloc'ed strings. */
static int split_cert(const char *arg, char **file, char **password) {
  size_t n = strlen(arg);
  *file = malloc(n + 1);
  *password = NULL;
  if (!*file) return -1;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (arg[i] == '\\' && arg[i + 1] == ':') {
      (*file)[k++] = ':';
      i++;
    } else if (arg[i] == ':') {
      *password = strdup(arg + i + 1);
      if (!*password) return -1;
      break;
    } else {
      (*file)[k++] = arg[i];
    }
  }
  (*file)[k] = '\0';
  return 0;
}

static int tls_options(const run_args *a, CURL *h) {
  if (a->insecure) {
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (a->cacert) curl_easy_setopt(h, CURLOPT_CAINFO, a->cacert);
  if (a->tls_min)
    curl_easy_setopt(
      h, CURLOPT_SSLVERSION,
      a->tls_min == 12 ? (long)CURL_SSLVERSION_TLSv1_2 : (long)CURL_SSLVERSION_TLSv1_3);
  if (!a->cert) return 0;
  char *file, *password;
  int rc = split_cert(a->cert, &file, &password);
  if (rc == 0) {
    curl_easy_setopt(h, CURLOPT_SSLCERT, file); /* libcurl copies strings */
    if (password) curl_easy_setopt(h, CURLOPT_KEYPASSWD, password);
    if (a->key) curl_easy_setopt(h, CURLOPT_SSLKEY, a->key);
  } else {
    fprintf(stderr, "luaretry: --cert: out of memory\n");
  }
  free(file);
  free(password);
  return rc;
}

/* What every handle of the run shares: --resolve's list (libcurl reads it
 * from each handle, which may be a copy of the batch's template) and the
 * cookie store, so -b is read once at the start and -c written once at
 * the end, never by a handle that ends mid-call. */
static struct curl_slist *resolve_list;
static CURLSH *cookie_share;

int curlopts_begin(const run_args *a) {
  for (int i = 0; i < a->nresolve; i++) {
    struct curl_slist *next = curl_slist_append(resolve_list, a->resolve[i]);
    if (!next) return -1;
    resolve_list = next;
  }
  if (!a->cookie && !a->cookie_jar) return 0;
  cookie_share = curl_share_init();
  if (!cookie_share) return -1;
  curl_share_setopt(cookie_share, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE);
  if (!a->cookie || strchr(a->cookie, '=')) return 0; /* no file, or cookies given inline */
  CURL *h = curl_easy_init();
  if (!h) return -1;
  curl_easy_setopt(h, CURLOPT_SHARE, cookie_share);
  curl_easy_setopt(h, CURLOPT_COOKIEFILE, a->cookie);
  /* the file, read now into the store; curl ignores a missing -b file too */
  curl_easy_setopt(h, CURLOPT_COOKIELIST, "RELOAD");
  curl_easy_cleanup(h);
  return 0;
}

CURLSH *curlopts_share(void) { return cookie_share; }

int curlopts_end(const run_args *a) {
  int rc = 0;
  if (cookie_share && a->cookie_jar) {
    CURL *h = curl_easy_init();
    if (h) {
      curl_easy_setopt(h, CURLOPT_SHARE, cookie_share);
      curl_easy_setopt(h, CURLOPT_COOKIEJAR, a->cookie_jar);
      if (curl_easy_setopt(h, CURLOPT_COOKIELIST, "FLUSH") != CURLE_OK) rc = -1;
      curl_easy_setopt(h, CURLOPT_COOKIEJAR, NULL); /* written: not again at cleanup */
      curl_easy_cleanup(h);
    }
  }
  curl_share_cleanup(cookie_share);
  cookie_share = NULL;
  curl_slist_free_all(resolve_list);
  resolve_list = NULL;
  return rc;
}

/* -b, -c, -x, --resolve on a handle. */
static void connection_options(const run_args *a, CURL *h) {
  if (resolve_list) curl_easy_setopt(h, CURLOPT_RESOLVE, resolve_list);
  if (a->proxy) curl_easy_setopt(h, CURLOPT_PROXY, a->proxy);
  if (cookie_share) {
    curl_easy_setopt(h, CURLOPT_SHARE, cookie_share);
    curl_easy_setopt(h, CURLOPT_COOKIEFILE, ""); /* the engine on, no file read */
  }
  if (a->cookie && strchr(a->cookie, '=')) curl_easy_setopt(h, CURLOPT_COOKIE, a->cookie);
}

/* -e, -4/-6, --http1.1/--http2, --limit-rate (each attempt's own pace:
 * libcurl's limit is per transfer), --max-filesize (a larger body fails the
 * attempt as "too_large", which the policies judge final). */
static void transfer_options(const run_args *a, CURL *h) {
  if (a->referer) {
    size_t n = strlen(a->referer);
    int autoref = n >= 5 && strcmp(a->referer + n - 5, ";auto") == 0;
    if (autoref) curl_easy_setopt(h, CURLOPT_AUTOREFERER, 1L);
    if (n > 5 || !autoref) {
      char *ref = strndup(a->referer, autoref ? n - 5 : n);
      if (ref) curl_easy_setopt(h, CURLOPT_REFERER, ref); /* libcurl copies it */
      free(ref);
    }
  }
  if (a->ip_version)
    curl_easy_setopt(h, CURLOPT_IPRESOLVE,
                     a->ip_version == 4 ? (long)CURL_IPRESOLVE_V4 : (long)CURL_IPRESOLVE_V6);
  if (a->http_version)
    curl_easy_setopt(
      h, CURLOPT_HTTP_VERSION,
      a->http_version == 11 ? (long)CURL_HTTP_VERSION_1_1 : (long)CURL_HTTP_VERSION_2_0);
  if (a->limit_rate) {
    curl_easy_setopt(h, CURLOPT_MAX_RECV_SPEED_LARGE, (curl_off_t)a->limit_rate);
    curl_easy_setopt(h, CURLOPT_MAX_SEND_SPEED_LARGE, (curl_off_t)a->limit_rate);
  }
  if (a->max_filesize) curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)a->max_filesize);
}

int curlopts_apply(const run_args *a, CURL *h) {
  connection_options(a, h);
  transfer_options(a, h);
  /* curl's default is "curl/VERSION"; -A "" sends none, as curl's does */
  const char *agent = a->user_agent ? a->user_agent : "luaretry/" LUARETRY_VERSION;
  if (agent[0]) curl_easy_setopt(h, CURLOPT_USERAGENT, agent);
  if (a->user) {
    curl_easy_setopt(h, CURLOPT_USERPWD, a->user);
    curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
  }
  if (a->location) {
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, a->max_redirs);
    curl_easy_setopt(h, CURLOPT_UNRESTRICTED_AUTH, (long)a->location_trusted);
    /* a redirect never leaves http and https */
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  }
  if (a->compressed && curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "") != CURLE_OK) {
    fprintf(stderr, "luaretry: --compressed: this libcurl decodes no compression\n");
    return -1;
  }
  trace_apply(h); /* -v, --trace-ascii */
  return tls_options(a, h);
}
