/* curlopts.c: curl's own options of `run` set on the easy handle, which
 * the curl helper keeps (it sets only URL, method, headers, body, timeouts
 * and its callbacks on each attempt).  Each keeps curl's meaning; libcurl
 * itself does what curl does with them, e.g. after a redirect to another
 * host (or port, or scheme) it sends neither -u's credentials nor an
 * Authorization or Cookie header of -H, unless --location-trusted. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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
/* -b NAME=VALUE as cookies of the URL's host in the store (1), not as
 * CURLOPT_COOKIE, which libcurl sends to every host a redirect reaches */
static int cookies_scoped;
/* a handle got the options: a request may have gone, and -c's jar is
 * written; a run refused before (a usage error) leaves -c's file as it
 * was, as curl's does */
static int handles_set;
/* The lines put in the store, "HOST\tNAME\tVALUE", to be left out of -c's
 * jar while unchanged (curl writes none of -b's own) */
static struct curl_slist *own_cookies;

static int is_inline(const char *cookie) { return cookie && strchr(cookie, '='); }

/* One Netscape cookie line into the store (COOKIELIST takes that format). */
static int store_line(const char *line) {
  CURL *h = curl_easy_init();
  if (!h) return -1;
  curl_easy_setopt(h, CURLOPT_SHARE, cookie_share);
  CURLcode rc = curl_easy_setopt(h, CURLOPT_COOKIELIST, line);
  curl_easy_cleanup(h);
  return rc == CURLE_OK ? 0 : -1;
}

/* The host of url, malloc'ed (curl_free'd by the caller), or NULL. */
static char *host_of(const char *url) {
  CURLU *u = curl_url();
  char *host = NULL;
  if (u && curl_url_set(u, CURLUPART_URL, url, CURLU_GUESS_SCHEME) == CURLUE_OK)
    curl_url_get(u, CURLUPART_HOST, &host, 0);
  curl_url_cleanup(u);
  return host;
}

/* Each NAME=VALUE of "a=1; b=2" as a host-only session cookie of host (the
 * first host: a redirect elsewhere gets none), noted in own_cookies. */
static int put_cookies(const char *cookies, const char *host) {
  const char *p = cookies;
  while (*p) {
    while (*p == ' ' || *p == ';') p++;
    size_t n = strcspn(p, ";");
    const char *eq = memchr(p, '=', n);
    size_t end = n;
    while (end > 0 && p[end - 1] == ' ') end--;
    if (eq && eq > p && !memchr(p, '\t', end) && !memchr(p, '\n', end)) {
      int name = (int)(eq - p), value = (int)(end - (size_t)(eq - p) - 1);
      char line[4096];
      int len = snprintf(line, sizeof line, "%s\tFALSE\t/\tFALSE\t0\t%.*s\t%.*s", host, name, p,
                         value, eq + 1);
      if (len < 0 || (size_t)len >= sizeof line || store_line(line) != 0) return -1;
      snprintf(line, sizeof line, "%s\t%.*s\t%.*s", host, name, p, value, eq + 1);
      struct curl_slist *next = curl_slist_append(own_cookies, line);
      if (!next) return -1;
      own_cookies = next;
    }
    p += n;
  }
  return 0;
}

int curlopts_cookies_for(const run_args *a, const char *url) {
  if (!cookies_scoped || !cookie_share || !url) return 0;
  char *host = host_of(url);
  if (!host) return 0; /* no host: no cookie for it */
  int rc = put_cookies(a->cookie, host);
  curl_free(host);
  return rc;
}

/* Whether the store's line (HOST, FALSE, /, SECURE, EXPIRES, NAME, VALUE
 * tab-separated) is -b's own "HOST\tNAME\tVALUE", unchanged. */
static int is_own(const char *line, const char *own) {
  const char *host_end = strchr(own, '\t');
  size_t host = (size_t)(host_end - own);
  if (strncmp(line, own, host) != 0 || strncmp(line + host, "\tFALSE\t/\t", 9) != 0) return 0;
  const char *name = line;
  for (int field = 0; field < 5 && name; field++) {
    name = strchr(name, '\t');
    if (name) name++;
  }
  return name && strcmp(name, host_end + 1) == 0;
}

/* Before -c writes the jar: -b's own cookies out of the store (curl writes
 * none of them), unless the server set a new value under the same name. */
static void drop_own_cookies(void) {
  if (!own_cookies) return;
  CURL *h = curl_easy_init();
  struct curl_slist *now = NULL;
  if (!h) return;
  curl_easy_setopt(h, CURLOPT_SHARE, cookie_share);
  curl_easy_getinfo(h, CURLINFO_COOKIELIST, &now);
  curl_easy_cleanup(h);
  for (struct curl_slist *o = own_cookies; o; o = o->next)
    for (struct curl_slist *c = now; c; c = c->next) {
      if (!is_own(c->data, o->data)) continue;
      char line[4200];
      const char *name = strchr(o->data, '\t') + 1;
      /* the same cookie, expired: the store forgets it */
      snprintf(line, sizeof line, "%.*s\tFALSE\t/\tFALSE\t1\t%s", (int)(name - 1 - o->data),
               o->data, name);
      store_line(line);
    }
  curl_slist_free_all(now);
}

int curlopts_begin(const run_args *a, int scope_cookies) {
  for (int i = 0; i < a->nresolve; i++) {
    struct curl_slist *next = curl_slist_append(resolve_list, a->resolve[i]);
    if (!next) return -1;
    resolve_list = next;
  }
  if (!a->cookie && !a->cookie_jar) return 0;
  cookie_share = curl_share_init();
  if (!cookie_share) return -1;
  curl_share_setopt(cookie_share, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE);
  cookies_scoped = scope_cookies && is_inline(a->cookie);
  if (cookies_scoped) return curlopts_cookies_for(a, a->url);
  if (!a->cookie || is_inline(a->cookie)) return 0; /* no file, or cookies given inline */
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

/* -c's file: through a symbolic link, the file it names (libcurl would
 * replace the link with a file of its own, emptying the target); NULL
 * after a message for a link to nowhere.  malloc'ed. */
static char *jar_path(const char *jar) {
  struct stat st;
  if (lstat(jar, &st) != 0 || !S_ISLNK(st.st_mode)) return strdup(jar);
  char *target = realpath(jar, NULL);
  if (!target)
    fprintf(stderr, "luaretry: -c %s: a link to a file that cannot be reached (%s)\n", jar,
            strerror(errno));
  return target;
}

/* Whether the store's line (its fifth field the expiry, 0 for a session
 * cookie) has expired: libcurl's jar leaves those out. */
static int expired(const char *line, time_t now) {
  const char *p = line;
  for (int field = 0; field < 4 && p; field++)
    if ((p = strchr(p, '\t'))) p++;
  if (!p) return 0;
  long long when = strtoll(p, NULL, 10);
  return when > 0 && when < (long long)now;
}

/* The store's cookies into path as libcurl's jar holds them (its header,
 * then one Netscape line each), through outfile: replaced whole, and a
 * jar that cannot be written (no such folder, a folder, a full disk) is
 * said.  libcurl's own FLUSH reports no failure to save (curl warns of it
 * with -v only), so the jar was lost without a word.  0, or -1 after a
 * message. */
static int write_jar(const char *path) {
  static const char HEADER[] =
    "# Netscape HTTP Cookie File\n"
    "# https://curl.se/docs/http-cookies.html\n"
    "# This file was generated by libcurl! Edit at your own risk.\n\n";
  struct curl_slist *all = NULL;
  CURL *h = curl_easy_init();
  int ok = h != NULL;
  if (h) {
    curl_easy_setopt(h, CURLOPT_SHARE, cookie_share);
    ok = curl_easy_getinfo(h, CURLINFO_COOKIELIST, &all) == CURLE_OK;
    curl_easy_cleanup(h);
  }
  if (!ok) fprintf(stderr, "luaretry: -c %s: out of memory\n", path);
  outfile out;
  outfile_init(&out, path, "-c");
  ok = ok && outfile_create(&out) == 0;
  if (ok) outfile_write(&out, HEADER, sizeof HEADER - 1);
  time_t now = time(NULL);
  for (struct curl_slist *c = all; ok && c; c = c->next) {
    if (expired(c->data, now)) continue;
    outfile_write(&out, c->data, strlen(c->data));
    outfile_write(&out, "\n", 1);
  }
  curl_slist_free_all(all);
  return outfile_finish(&out, ok) == 0 && ok ? 0 : -1;
}

int curlopts_end(const run_args *a) {
  int rc = 0;
  int write = cookie_share && a->cookie_jar && handles_set;
  char *jar = write ? jar_path(a->cookie_jar) : NULL;
  if (write && !jar) rc = -1;
  if (jar) {
    drop_own_cookies();
    if (write_jar(jar) != 0) rc = -1;
  }
  free(jar);
  curl_share_cleanup(cookie_share);
  cookie_share = NULL;
  curl_slist_free_all(own_cookies);
  own_cookies = NULL;
  cookies_scoped = 0;
  handles_set = 0;
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
  /* a workflow's requests go where its script says: -b's cookies with each */
  if (is_inline(a->cookie) && !cookies_scoped) curl_easy_setopt(h, CURLOPT_COOKIE, a->cookie);
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
  handles_set = 1;
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
