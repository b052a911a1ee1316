/* probe.c: the outcomes `check --probe` and `simulate --probe` take:
 *   [METHOD] STATUS [ERROR] [Name: value]... [body=TEXT]
 * e.g. '429 [RateLimit: "default";r=0;t=30]', 'POST 503 [Idempotency-Key:
 * k-1]', '0 reset', '503 body={"retry_in_ms": 1500}'.  A header stands in
 * brackets, so its value may hold blanks, ';' and quotes; the body is the
 * rest of the text.  A command's outcome is
 *   exit STATUS|timeout [body=TEXT]
 * e.g. 'exit 75', 'exit 1 body=E: Could not get lock', 'exit timeout':
 * an exit status (128+N for signal N) and its error output, or an attempt
 * its timeout ended, as `run -- COMMAND` reports them. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static char *skip_blanks(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  return s;
}

/* A word of [A-Za-z_] letters at s, cut with a NUL; NULL when there is none
 * or it is followed by something other than a blank or the end. */
static char *word(char **s, int upper) {
  char *w = *s, *e = w;
  while (upper ? isupper((unsigned char)*e) : (islower((unsigned char)*e) || *e == '_')) e++;
  if (e == w || (*e && *e != ' ' && *e != '\t')) return NULL;
  if (*e) *e++ = '\0';
  *s = skip_blanks(e);
  return w;
}

static int fail(char *err, size_t n, const char *spec, const char *why) {
  snprintf(err, n,
           "--probe '%s': %s (expected '[METHOD] STATUS [ERROR] [Name: value]... "
           "[body=TEXT]', e.g. '429 [Retry-After: 5]', or a command's 'exit STATUS|timeout "
           "[body=TEXT]', e.g. 'exit 75')",
           spec, why);
  return -1;
}

/* A command's outcome is marked by this method, the one `run` gives it
 * (info.method "EXEC"): by the pointer, so that a METHOD typed "EXEC" is
 * still an HTTP request's. */
static const char EXEC[] = "EXEC";

static int is_command(const cli_probe *p) { return p->method == EXEC; }

/* "exit STATUS|timeout [body=TEXT]" at s, after the word "exit". */
static int parse_exit(char *s, cli_probe *p, const char *spec, char *err, size_t n) {
  p->method = EXEC;
  char *end;
  long status = strtol(s, &end, 10);
  if (strncmp(s, "timeout", 7) == 0 && (!s[7] || s[7] == ' ' || s[7] == '\t')) {
    p->error = "timeout"; /* status 0, as run reports it */
    end = s + 7;
  } else if (!isdigit((unsigned char)*s) || end - s > 3 || status > 255 ||
             (*end && *end != ' ' && *end != '\t')) {
    return fail(err, n, spec, "exit needs a status from 0 to 255, or timeout");
  } else {
    p->status = (int)status;
  }
  s = skip_blanks(end);
  if (*s == '[') return fail(err, n, spec, "a command's outcome has no headers");
  if (strncmp(s, "body=", 5) == 0)
    p->body = s + 5;
  else if (*s)
    return fail(err, n, spec, "unexpected text after the exit status (only body=TEXT)");
  return 0;
}

/* "[Name: value]" at *s: one header, cut in place. */
static const char *header(char **s, cli_probe *p) {
  char *name = *s + 1, *colon = name;
  while (*colon && *colon != ':' && *colon != ']' && !isspace((unsigned char)*colon)) colon++;
  if (colon == name || *colon != ':') return "a header is [Name: value]";
  char *end = strchr(colon, ']');
  if (!end) return "a header's ']' is missing";
  if (p->nheaders >= CLI_PROBE_HEADERS) return "too many headers (at most 32)";
  *colon = '\0';
  *end = '\0';
  char *value = skip_blanks(colon + 1), *tail = end;
  while (tail > value && (tail[-1] == ' ' || tail[-1] == '\t')) *--tail = '\0';
  for (char *c = name; *c; c++) *c = (char)tolower((unsigned char)*c);
  p->headers[p->nheaders].name = name;
  p->headers[p->nheaders++].value = value;
  *s = skip_blanks(end + 1);
  return NULL;
}

/* The transport failures an attempt can end in (luaretry-policy(5),
 * info.error): a probe of another name would be judged as nothing real
 * ever is (a misspelt tls_verify, retried). */
static const char *const ERRORS[] = { "connect",
                                      "timeout",
                                      "dns",
                                      "reset",
                                      "truncated",
                                      "tls",
                                      "tls_verify",
                                      "protocol",
                                      "too_many_redirects",
                                      "redirect_refused",
                                      "too_large",
                                      "transport",
                                      "range",
                                      "stalled",
                                      "checksum_mismatch",
                                      "digest_mismatch" };

static int known_error(const char *e, size_t len) {
  for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
    if (strlen(ERRORS[i]) == len && strncmp(ERRORS[i], e, len) == 0) return 1;
  return 0;
}

/* Status 0's transport failure: one of ERRORS, else why not (in err). */
static int transport_failure(char **s, cli_probe *p, const char *spec, char *err, size_t n) {
  size_t len = strcspn(*s, " \t");
  if (len == 0 || !known_error(*s, len)) {
    char why[512];
    size_t k = 0;
    k += (size_t)snprintf(why, sizeof why, "status 0 needs a transport failure%s%.*s%s: one of",
                          len ? " (not '" : "", (int)(len < 60 ? len : 60), *s, len ? "')" : "");
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0] && k < sizeof why; i++)
      k += (size_t)snprintf(why + k, sizeof why - k, "%s %s", i ? "," : "", ERRORS[i]);
    return fail(err, n, spec, why);
  }
  p->error = word(s, 0);
  return 0;
}

int cli_probe_parse(const char *spec, cli_probe *p, char *err, size_t n) {
  memset(p, 0, sizeof *p);
  cli_text_copy(p->label, sizeof p->label, spec); /* one line in check's table */
  if (!(p->text = strdup(spec))) return fail(err, n, spec, "out of memory");
  char *s = skip_blanks(p->text);
  if (strncmp(s, "exit", 4) == 0 && (!s[4] || s[4] == ' ' || s[4] == '\t'))
    return parse_exit(skip_blanks(s + 4), p, spec, err, n);
  if (isupper((unsigned char)*s) && !(p->method = word(&s, 1)))
    return fail(err, n, spec, "a method is a word in capitals");
  char *end;
  long status = strtol(s, &end, 10);
  if (!isdigit((unsigned char)*s) || end - s > 3 || (*end && *end != ' ' && *end != '\t'))
    return fail(err, n, spec, "no status (0 to 999)");
  /* no HTTP status is below 100: a command's is what was meant */
  if (status > 0 && status < 100) {
    char why[128];
    snprintf(why, sizeof why,
             "%ld is no HTTP status (100 to 999, or 0 with a transport failure); "
             "a command's exit status is 'exit %ld'",
             status, status);
    return fail(err, n, spec, why);
  }
  p->status = (int)status;
  s = skip_blanks(end);
  if (p->status == 0) {
    int bad = transport_failure(&s, p, spec, err, n);
    if (bad) return bad;
  }
  while (*s == '[') {
    const char *why = header(&s, p);
    if (why) return fail(err, n, spec, why);
  }
  if (strncmp(s, "body=", 5) == 0)
    p->body = s + 5;
  else if (*s)
    return fail(err, n, spec, "unexpected text after the headers");
  return 0;
}

void cli_probe_free(cli_probe *p) {
  free(p->text);
  p->text = NULL;
}

luaretry_code cli_probe_begin(luaretry_policy *p, uint64_t seed, luaretry_call **c) {
  luaretry_call_options opts;
  luaretry_call_options_init(&opts);
  opts.flags = LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_SEED | LUARETRY_CALL_ISOLATED;
  opts.seed = seed;
  return luaretry_call_begin(p, &opts, c);
}

void cli_probe_outcome(luaretry_policy *pol, const cli_probe *p, luaretry_outcome *o) {
  luaretry_outcome_init(o);
  o->kind = is_command(p) ? LUARETRY_OUTCOME_COMMAND : LUARETRY_OUTCOME_HTTP;
  o->workflow = !is_command(p) && luaretry_policy_has_workflow(pol);
  o->status = p->status;
  o->error = p->error;
  o->body = p->body ? p->body : "";
  o->body_len = strlen(o->body);
  o->method = p->method ? p->method : "GET";
  o->headers = p->headers;
  o->header_count = p->nheaders;
  /* Retry-After as the curl helper reads it: the first valid one */
  for (size_t i = 0; i < p->nheaders && p->status; i++) {
    if (strcmp(p->headers[i].name, "retry-after") != 0) continue;
    double w;
    if (luaretry_retry_after(p->headers[i].value, 0, &w) == LUARETRY_OK) {
      o->retry_after = w;
      break;
    }
  }
}

void cli_probe_request(const cli_probe *p, luaretry_request *r) {
  memset(r, 0, sizeof *r);
  r->method = p->method ? p->method : "GET";
  r->url = "http://probe.invalid/";
  r->headers = p->headers;
  r->header_count = p->nheaders;
  if (p->body) {
    r->body = p->body;
    r->body_len = strlen(p->body);
  }
}

int cli_probe_prepare(luaretry_call *c, const cli_probe *pr, int attempt, int *not_repeatable,
                      char *why, size_t n) {
  /* a command has no request: run asks neither prepare nor is_idempotent */
  *not_repeatable = 0;
  if (is_command(pr)) return 0;
  luaretry_request req, out;
  cli_probe_request(pr, &req);
  int idempotent = 1;
  luaretry_code rc = luaretry_call_prepare(c, &req, attempt, &out);
  if (rc == LUARETRY_OK) rc = luaretry_call_is_idempotent(c, &out, &idempotent);
  if (rc != LUARETRY_OK) {
    const char *m = luaretry_call_errmsg(c);
    snprintf(why, n, "%s", m && *m ? m : luaretry_strerror(rc));
    return -1;
  }
  /* no connection made: the request never left (the engine's rule) */
  int never_sent = pr->status == 0 && pr->error &&
                   (strcmp(pr->error, "connect") == 0 || strcmp(pr->error, "dns") == 0);
  *not_repeatable = !idempotent && !never_sent;
  return 0;
}

/* Each answer of next is a later time on the virtual clock: the count
 * only bounds a fault. */
#define GO_ASKS 100000

static luaretry_code go(luaretry_call *c, luaretry_decision *n, double *extra,
                        luaretry_wait_source *src) {
  *extra = 0;
  for (int k = 0; k < GO_ASKS; k++) {
    luaretry_code rc = luaretry_call_next(c, n);
    if (rc != LUARETRY_OK || !n->retry || !(n->wait > 0)) return rc;
    *extra += n->wait;
    *src = n->wait_source; /* the last answer, go now, has none */
    if ((rc = luaretry_call_wait(c, n->wait)) != LUARETRY_OK) return rc;
  }
  return LUARETRY_OK;
}

luaretry_code cli_probe_go(luaretry_call *c, luaretry_decision *n) {
  double extra;
  luaretry_wait_source src;
  return go(c, n, &extra, &src);
}

luaretry_code cli_probe_retry(luaretry_call *c, luaretry_decision *d, luaretry_decision *n) {
  luaretry_code rc = luaretry_call_wait(c, d->wait);
  double extra = 0;
  luaretry_wait_source src = LUARETRY_WAIT_NONE;
  if (rc == LUARETRY_OK) rc = go(c, n, &extra, &src);
  if (rc == LUARETRY_OK && extra > 0) {
    d->wait += extra;
    d->wait_source = src;
    d->next_timeout = n->next_timeout;
  }
  return rc;
}
