/* faults_client.h: what C tests and benches ask the fault server's
 * /_faults/ endpoints over plain libcurl (never through luaretry, and on
 * connections of their own, so they are never among those counted). */
#ifndef FAULTS_CLIENT_H
#define FAULTS_CLIENT_H

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *data;
  size_t len;
} faults_text;

static inline size_t faults_keep(char *data, size_t size, size_t n, void *ud) {
  faults_text *t = ud;
  char *d = realloc(t->data, t->len + size * n + 1);
  if (!d) return 0;
  memcpy(d + t->len, data, size * n);
  t->data = d;
  t->len += size * n;
  t->data[t->len] = '\0';
  return size * n;
}

/* GET (or POST, with post set) http://address/path; the body, to free. */
static inline char *faults_fetch(const char *address, const char *path, int post) {
  char url[160];
  snprintf(url, sizeof url, "http://%s%s", address, path);
  faults_text t = { NULL, 0 };
  CURL *h = curl_easy_init();
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, faults_keep);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
  if (post) curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
  curl_easy_perform(h);
  curl_easy_cleanup(h);
  return t.data;
}

/* Forgets the request log. */
static inline void faults_reset(const char *address) {
  free(faults_fetch(address, "/_faults/reset", 1));
}

/* The distinct connections in the request log (its "conn" numbers, up to
 * 64 told apart), and in *requests how many requests it holds. */
static inline int faults_connections(const char *address, int *requests) {
  char *log = faults_fetch(address, "/_faults/requests", 0);
  long seen[64];
  int distinct = 0;
  *requests = 0;
  for (const char *at = log; at && (at = strstr(at, "\"conn\":")); at++) {
    long conn = strtol(at + 7, NULL, 10);
    (*requests)++;
    int known = 0;
    for (int i = 0; i < distinct; i++) known |= seen[i] == conn;
    if (!known && distinct < 64) seen[distinct++] = conn;
  }
  free(log);
  return distinct;
}

#endif
