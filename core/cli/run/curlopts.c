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
  if (!a->cert) return 0;
  char *file, *password;
  int rc = split_cert(a->cert, &file, &password);
  if (rc == 0) {
    curl_easy_setopt(h, CURLOPT_SSLCERT, file);  /* libcurl copies strings */
    if (password) curl_easy_setopt(h, CURLOPT_KEYPASSWD, password);
    if (a->key) curl_easy_setopt(h, CURLOPT_SSLKEY, a->key);
  } else {
    fprintf(stderr, "luaretry: --cert: out of memory\n");
  }
  free(file);
  free(password);
  return rc;
}

int curlopts_apply(const run_args *a, CURL *h) {
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
  trace_apply(h);  /* -v, --trace-ascii */
  return tls_options(a, h);
}
