/* run.h: what the files of `luaretry run` share. */
#ifndef LUARETRY_CLI_RUN_H
#define LUARETRY_CLI_RUN_H

#include <stdint.h>
#include <stdio.h>

#include "luaretry.h"
#include "luaretry_curl.h"
#include "outfile.h"

#define MAX_HEADERS 128
#define MAX_SETS    64

/* -d/--data (@FILE loses its CR and LF, as curl's does), --data-binary
 * (sent as it is), --data-raw (no @FILE). */
typedef enum { DATA_ASCII, DATA_BINARY, DATA_RAW } data_kind;

typedef struct {
  data_kind kind;
  const char *arg;
  /* for messages: the option as typed ("-d", "--data-binary", "-T") and
   * its value as typed (-T's file, where arg is "@file") */
  char opt[24];
  const char *typed;
} data_part;

/* ---- upload.c: -d DATA, -d @FILE (read as sent), -d @- and FIFOs
 * (spooled once); standard input spooled for commands */

typedef enum { SPOOL_OK, SPOOL_ERROR, SPOOL_DEADLINE, SPOOL_INTERRUPTED } spool_status;

typedef struct {
  const char *arg;         /* -d's value; NULL: no body (a zeroed upload) */
  const char *opt, *typed; /* as the user typed them (data_part's); NULL: "-d" and arg */
  const char *data;        /* -d DATA, or the body's first bytes (prefix) */
  size_t len;              /* the whole body */
  int fd;                  /* the file or spool read as sent; -1: in memory */
  int src;                 /* what must still be spooled, or -1 */
  int must_spool;
  int spooled; /* fd is our spool, which cannot change */
  char *owned;
  char why[192]; /* why upload_read() gave nothing */
} upload;

/* Opens -d's source (part's arg); 0, or the exit status after a message. */
int upload_open(upload *u, const data_part *part);
/* The body's option and value as typed ("-T /x", "--data-binary @y"), for
 * a message. */
const char *upload_name(const upload *u, char *buf, size_t size);
/* Spools what must be (within `seconds`, 0: no limit, and until a stop
 * signal) and reads the first `prefix` bytes into u->data. */
spool_status upload_ready(upload *u, double seconds, size_t prefix);
/* A luaretry_upload_fn over u->fd; u->why says why it gave nothing. */
size_t upload_read(void *u, uint64_t offset, char *buf, size_t len);
void upload_close(upload *u); /* also on a zeroed upload */
/* Reads src to its end into an unlinked temporary file (*out_fd, *size
 * bytes), within `seconds` (0: no limit) and until a stop signal; `what`
 * names it in messages. */
spool_status spool_input(int src, const char *what, double seconds, int *out_fd, uint64_t *size);

/* ---- args.c: the command line */

#define MAX_DATA      64
#define MAX_FORMS     64
#define MAX_RESOLVE   32
#define MAX_TIMES     16
#define TIME_SET_SIZE 64

typedef struct {
  const char *policy;
  int policy_defaulted; /* no POLICY given: "command" or "http" */
  int stdout_live;      /* --stdout=live: every attempt's standard output */
  const char *url;      /* the one URL of a single call, once chosen */
  char *url_fixed;      /* it, with http:// when it had no scheme; owned */
  char **words;         /* after POLICY: the URLs, or run()'s arguments */
  int nwords;
  int capwords;           /* room in words */
  const char *urls_file;  /* --urls FILE */
  const char *output_dir; /* --output-dir DIR */
  long parallel;          /* --parallel-max N (or -Z: 50); 0: not given */
  char **command;         /* after --; NULL: none */
  int command_unsure;     /* ...and POLICY named: a command, or its run()'s
                             arguments if it has run() (run_args_workflow) */
  const char *method;
  /* the options as typed, for a message that names one (a workflow
   * refuses them): the option being read, and the first of each kind */
  char typed[24], method_opt[24], data_opt[24], form_opt[24], parallel_opt[24], remote_opt[24];
  char url_only_opt[24];          /* the first option typed that only a URL's transfer reads */
  const char *data;               /* the first -d (any kind), or NULL: no body */
  data_part data_parts[MAX_DATA]; /* joined with '&', as curl joins them */
  int ndata;
  const char *output;
  int output_by_url;      /* -O named output after the URL (one URL's) */
  int output_dir_implied; /* -O of several URLs: output_dir is "." */
  const char *log_json;
  const char *redis; /* --redis URL (fleet_cmd.c: else LUARETRY_REDIS) */
  const char *fleet; /* --fleet local (fleet_cmd.c: else LUARETRY_FLEET) */
  uint64_t seed;
  int has_seed;
  int verbosity;  /* 0 -q or -s, 1 normal, 2 -v */
  int show_error; /* -q, -S: with verbosity 0, the final line of a failure */
  int stats;      /* --stats: 1 text, 2 json */
  const char *metrics_file;
  char *headers[MAX_HEADERS];
  int nheaders;
  char *sets[MAX_SETS];           /* --set, and --max-time/--retry-max-time's */
  const char *set_from[MAX_SETS]; /* the option that made each, NULL: --set */
  int nsets;
  char times[MAX_TIMES][TIME_SET_SIZE];
  int ntimes;
  /* curl's options (curlopts.c) */
  const char *user, *user_agent, *cacert, *cert, *key;
  int insecure, location, location_trusted, compressed, include, fail;
  long max_redirs;
  double connect_timeout;  /* 0: the attempt's */
  const char *dump_header; /* -D FILE, "-": standard output */
  const char *write_out;   /* -w FORMAT, or @FILE */
  const char *trace_ascii; /* --trace-ascii FILE */
  int create_dirs;         /* --create-dirs: for -o FILE and --output-dir */
  int fail_with_body;      /* --fail-with-body: -o FILE gets a failure's answer too */
  /* copies of the secrets blanked in argv (-u, --redis, -H Authorization,
   * Cookie, Proxy-Authorization), owned: run_args_free() */
  char *secrets[MAX_HEADERS + 4];
  int nsecrets;
  /* downloads that stall, resume, and the rest of curl's retried options */
  long speed_limit;             /* --speed-limit BYTES; 0: not given */
  double speed_time;            /* --speed-time SECONDS; 0: not given */
  int continue_at;              /* -C -: a partial -o file is continued */
  const char *checksum;         /* --checksum ALG=HEX, or NULL */
  int remote_name;              /* -O, --remote-name-all: the URL's own name */
  int get;                      /* -G: -d's data goes in the URL's query */
  const char *upload_file;      /* -T FILE (PUT, sent whole every attempt) */
  const char *forms[MAX_FORMS]; /* -F, --form-string */
  int form_string[MAX_FORMS];   /* --form-string: no @ or < */
  int nforms;
  char form_header[96];             /* Content-Type: multipart/form-data; boundary= */
  char form_boundary[49];           /* the boundary alone (the header may be split in
                                       place into name and value) */
  const char *cookie;               /* -b FILE or 'NAME=VALUE; ...' */
  const char *cookie_jar;           /* -c FILE */
  const char *proxy;                /* -x URL */
  const char *resolve[MAX_RESOLVE]; /* --resolve HOST:PORT:ADDR */
  int nresolve;
  int parallel_z; /* -Z, --parallel: a batch in parallel, curl's 50 at once */
  /* curl's other options (curlopts.c) */
  int progress;           /* PROGRESS_AUTO (a terminal), _OFF, _BAR (-#) */
  int remote_header_name; /* -J: -O's file named by Content-Disposition */
  int globoff;            /* -g: taken (URLs are never globbed); -o's #N as it is */
  const char *referer;    /* -e URL[;auto] */
  int ip_version;         /* -4, -6; 0: either */
  int http_version;       /* --http1.1: 11, --http2: 2; 0: libcurl's */
  int tls_min;            /* --tlsv1.2: 12, --tlsv1.3: 13; 0: libcurl's */
  long long limit_rate;   /* --limit-rate, bytes per second, each attempt; 0: none */
  long long max_filesize; /* --max-filesize: a larger body is final; 0: none */
  int fail_early;         /* --fail-early: a batch ends at its first final failure */
  /* a command's rules without Lua (retryopts.c) */
  int command_rules;        /* --retry-on-exit and the like: for -- COMMAND only */
  const char *before_retry; /* --before-retry CMD: sh -c CMD before each retry */
  int exit_command;         /* --exit-status command: the final attempt's own status */
  int config_depth;         /* -K inside -K */
  int config_stdin;         /* -K - read standard input */
  char **owned;             /* strings made for the options (-K's words) */
  int nowned, capowned;
} run_args;

/* Parses the words after `run`; `words` has room for argc entries.  0, or
 * the exit status after a usage message. */
int parse_run(int argc, char **argv, run_args *a, char **words);
/* Frees what parse_run() made. */
void run_args_free(run_args *a);

/* The files the options write at the end, and --urls (read as a batch
 * goes), each with the option that names it (standard output left out). */
#define RUN_OUTPUTS 7
typedef struct {
  const char *opt, *path;
} run_output;
/* Fills outs (RUN_OUTPUTS of room); how many. */
int run_outputs(const run_args *a, run_output *outs);
/* Two of them naming one file (the later would write over the earlier):
 * 0, or a usage status after naming both.  parse_run() checks them; -O's
 * -o (output_by_url), named after, is checked again. */
int run_check_outputs(const run_args *a);
/* path as its folder's real path and its last name: two names of one
 * file compare equal (a link as the last name aside). */
void run_canonical(const char *path, char *out, size_t size);
/* The options a command does not take (a URL's), when a->command is
 * set, or those only a command takes, when not; 0 or a usage status.
 * parse_run() checks them, unless a->command_unsure. */
int run_check_kind(const run_args *a);
/* The words after -- as more of a workflow's arguments (a policy with
 * run() never runs a command), then run_check_kind(); 0 or a usage status. */
int run_args_workflow(run_args *a);
/* A string the options keep until run_args_free(); NULL when out of memory. */
char *run_args_keep(run_args *a, char *s);
/* One option (argv[*i], its value next) or a word, as on the command line;
 * -K's lines come through here.  0, or a usage status. */
int parse_word(run_args *a, int argc, char **argv, int *i);

#define PROGRESS_AUTO 0
#define PROGRESS_OFF  1
#define PROGRESS_BAR  2

/* ---- retryopts.c: curl's retry options and a command's rules, as --set
 * overrides of the policy's fields and options */

/* The overrides an option stands for, for args.c to place among the
 * --set ones (field=value, in order). */
typedef struct {
  const char *field[8];
  const char *value[8];
  int n;
  char number[24]; /* --retry's N+1 */
} retry_sets;

/* --retry N (max_attempts N+1), --retry-delay S (every wait S, as curl's:
 * a constant backoff of S, capped at S, and the same after throttling);
 * 0 or a usage status. */
int retryopts_curl(retry_sets *s, const char *opt, const char *v);
/* --retry-all-errors: retry_all_errors=true (any policy: judge.c applies it). */
int retryopts_all_errors(retry_sets *s);
/* --limit-rate and --max-filesize: bytes, curl's k/m/g suffixes (1024), above 0. */
int retryopts_size(const char *opt, const char *v, long long *out);
/* --retry-on-exit, --final-on-exit LIST; --retry-if-output,
 * --final-if-output PATTERN; --before-retry CMD; --exit-status command|luaretry. */
int retryopts_command(run_args *a, retry_sets *s, const char *opt, char *v);
/* The exit status of `run -- CMD` under --exit-status command: the final
 * attempt's own when the command ran to its end and luaretry did not stop
 * it (status: luaretry's own). */
int retryopts_exit_status(const run_args *a, int status, const luaretry_decision *final,
                          int command_status);

/* ---- lines.c: a line of -K's file or --urls's list */

/* The longest line taken: libcurl's for a URL (CURL_MAX_INPUT_LENGTH),
 * since a --urls line or a "url = " line of -K holds one. */
#define RUN_LINE_MAX 8000000

/* One line of f, its '\n' kept, into *line (grown as needed,
 * NUL-terminated): its length; one a read error cut short too (ferror(f)
 * tells).  0 at the end, or when the read failed with nothing read
 * (ferror(f) tells; errno EINTR and cli_interrupted(): a stop signal cut
 * it); -1 out of memory (errno ENOMEM); -2 longer than RUN_LINE_MAX,
 * refused as soon as it is that long.  A stop signal that came before a
 * read ends it as one that cut the read would (0, EINTR).  A read another
 * signal cut reads on.  (-K's file; --urls's list is a run_list, below.) */
long run_read_line(FILE *f, char **line, size_t *size);

/* --urls's list, read from its descriptor as lines come, and never by a
 * read that would wait: a pipe whose writer pauses is "none yet", so the
 * batch's transfers go on meanwhile (luaretry_curl_many_next_fd), and a
 * stop signal never finds the command blocked in a read. */
typedef struct {
  int fd;
  char *buf; /* bytes read; [start, end) not taken yet */
  size_t start, end, cap;
  int eof; /* the file ended, or the writer closed */
} run_list;

#define RUN_LIST_LATER (-4)

void run_list_init(run_list *l, int fd);
void run_list_free(run_list *l); /* the descriptor is the caller's */
/* The next line without its newline, NUL-terminated in the list's buffer
 * (*line, *len: it may hold a NUL byte), valid until the next call: 1; 0
 * at the end; -1 a read failed (errno); -2 a line longer than RUN_LINE_MAX,
 * refused as soon as it is that long; RUN_LIST_LATER: no whole line can be
 * read now (what came of it is kept). */
int run_list_line(run_list *l, char **line, size_t *len);
/* Back to the start of a regular file: 0, or -1 (errno). */
int run_list_rewind(run_list *l);

/* ---- config.c: -K FILE, curl's config syntax */

/* Takes the n (1 or 2) words of one line of a config file (malloc'ed,
 * the taker's); 0 or a usage status. */
typedef int (*config_word_fn)(void *ud, int n, char **words, const char *path, long line);
/* Reads FILE ("-": standard input), each option line to `take`; 0 or a
 * usage status after a message. */
int config_words(const char *path, config_word_fn take, void *ud);

/* ---- form.c: -F, the multipart body */

/* Builds the multipart body of the -F parts into *u (an unlinked temporary
 * file, sent whole on every attempt); 0, or the exit status after a message. */
int form_open(const run_args *a, upload *u);
/* The boundary (a->form_boundary) and the Content-Type header that
 * names it (a->form_header). */
void form_header_make(run_args *a);

/* ---- the URL of a call: -G's query, -T's file name */

/* url with -G's query (the -d data joined with '&') and, for -T, the file's
 * name when the URL ends with '/'; malloc'ed, or NULL after a message. */
char *url_for_call(const run_args *a, const char *url);

/* The -H values as headers; splits the arguments in place, so call it once. */
void split_headers(const run_args *a, luaretry_header *headers);
/* The request the options describe for `url`, with `headers` from
 * split_headers() and -d's body, if any, from upload_open(). */
luaretry_request run_request(const run_args *a, const char *url, const luaretry_header *headers,
                             const upload *body);

/* ---- data.c: the body of -d, --data-binary, --data-raw */

/* The parts joined with '&' into *u (one @FILE alone stays mapped, not
 * copied); 0, or -1 after a message. */
int data_open(const run_args *a, upload *u);

/* ---- curlopts.c: curl's options on a handle */

/* Sets on h what the options say (TLS, -u, -A or luaretry/VERSION, -L,
 * --compressed); 0, or -1 after a message. */
int curlopts_apply(const run_args *a, CURL *h);
/* Before the first attempt: -b's cookie file read into a store all the
 * call's handles share (one read, at the start); with scope_cookies,
 * -b NAME=VALUE's cookies are the first host's only (of a->url, or of
 * each URL of a batch through curlopts_cookies_for); 0 or -1. */
int curlopts_begin(const run_args *a, int scope_cookies);
/* -b NAME=VALUE's cookies for url's host, in the shared store; 0 or -1. */
int curlopts_cookies_for(const run_args *a, const char *url);
/* The store of -b and -c, or NULL: set on every handle of a batch. */
CURLSH *curlopts_share(void);
/* After the last: -c's jar written from that store (once, at the end;
 * not when no handle got the options: refused before any request), the
 * store and --resolve's list freed; -1 when the jar failed. */
int curlopts_end(const run_args *a);

/* ---- url.c: URLs through curl's parser */

/* Whether `url` is an http or https URL; if not, why.  A URL without a
 * scheme is taken as http://, as curl takes it: *fixed (malloc'ed) is then
 * the URL to use, else NULL. */
int url_check(const char *url, char **fixed, char *why, size_t size);
/* The URL as logs may show it: no user name or password; malloc'ed. */
char *url_redacted(const char *url);
/* The same for a string curl cannot parse: whatever stands before the
 * last '@' of what would be its authority is dropped; malloc'ed. */
char *url_redacted_rough(const char *url);
/* A URL that may be bad, for a message: redacted so, its bytes escaped as
 * log lines' are; malloc'ed, NULL when out of memory. */
char *url_shown(const char *url);
/* --output-dir's name for it; malloc'ed. */
char *url_file_name(const char *url);

/* ---- log.c: a line per attempt on standard error, and --log-json */

typedef struct {
  int verbosity; /* 0 quiet, 1 normal, 2 verbose */
  FILE *json;    /* --log-json, or NULL */
  long max_attempts;
  const char *target; /* URL without credentials, or the command */
  int index;          /* in a batch: the URL's number, from 1; else 0 */
  int show_error;     /* quiet: still the final line of a failure (-q, -S) */
  int request;        /* a workflow's hedged request: its number in the run */
  /* rate.headers: max_retry_after (-v says which RateLimit fields it
   * ignores); 0: off */
  double quota_max_wait;
} attempt_log;

/* For attempt_log.quota_max_wait: the policy's max_retry_after when it
 * paces by the RateLimit fields (rate.headers), else 0. */
double log_quota_max_wait(const luaretry_policy *p);
/* A luaretry_observer_fn; ud is an attempt_log. */
void log_attempt(void *ud, const luaretry_outcome *o, const luaretry_decision *d);
/* A failure's final answer: "; body: " and the first line of its body,
 * escaped, cut at 160 bytes (nothing when no answer or an empty one), so
 * why a server refused reaches the user even when the body went nowhere
 * (-o FILE is kept only on success). */
void log_body_line(FILE *f, const luaretry_outcome *o);
/* -v: the script's print(); not -q: the breaker's changes. */
void log_policy_events(luaretry_policy *p, int verbosity);
/* --log-json PATH ("-": standard error; NULL: none) into *json; 0, or
 * after a message the exit status: EXIT_USAGE, or EXIT_INTERRUPTED when a
 * stop signal cut the open (a FIFO with no reader; said when verbose). */
int log_json_open(const char *path, FILE **json, int verbose);
/* Flushes a --log-json line; a failure is remembered, and said (naming
 * path) by log_json_close. */
void log_json_flush(FILE *json);
void log_json_close(FILE *json, const char *path);
/* --stats: the policy's counters, one line on standard error. */
void log_stats(const luaretry_policy *p);
/* A luaretry_curl_resume note, ud an attempt_log: "restarting the
 * download from zero: why" on standard error, unless -s or -q. */
void run_resume_note(void *ud, const char *line);

/* ---- writeout.c: -w FORMAT */

typedef struct {
  CURL *h; /* the handle of the last attempt */
  const luaretry_decision *final;
  int status; /* its HTTP status; 0: none */
  int exit_status;
} writeout_info;

/* -w's argument (FORMAT, @FILE, @-), checked, into *format (malloc'ed);
 * 0 or a usage status after a message. */
int writeout_load(const char *arg, char **format);
void writeout_print(FILE *f, const char *format, const writeout_info *w);

/* ---- progress.c: the meter of one transfer, the status line of a batch */

typedef struct {
  int on;    /* standard error is a terminal, and neither -s nor --no-progress-meter */
  int bar;   /* -#: a bar */
  int batch; /* the batch's status line, not a transfer's meter */
  int drawn; /* the line is on the terminal now */
  double start, last_draw;
  long long bytes;         /* every attempt's */
  long long attempt_bytes; /* this attempt's */
  long long total;         /* this attempt's Content-Length; 0: unknown */
  int attempt;
  double waiting_until; /* the next attempt's time; 0: not waiting */
  long done, failed, in_flight, waiting, throttled, total_urls;
} progress;

void progress_init(progress *p, const run_args *a, int batch);
/* Redraws the line (at most ten times a second unless force). */
void progress_update(progress *p, int force);
/* Takes the line off the terminal, before another line is written there. */
void progress_clear(progress *p);
void progress_bytes(progress *p, size_t n);
/* A new attempt, its body's length (0: unknown). */
void progress_attempt(progress *p, long long total);
/* Between attempts: "retry N in S s". */
void progress_wait(progress *p, double seconds);
void progress_end(progress *p);
/* The meter on the terminal, if any, takes its line off (for a log line). */
void progress_yield(void);
/* Seconds since progress_init(). */
double progress_elapsed(const progress *p);

/* ---- response.c: -i, -D, -w and -f around one URL's body */

typedef struct {
  const run_args *a;
  attempt_log *log; /* where attempt lines go (log_attempt) */
  outfile *out;     /* the body's place */
  CURL *h;
  char *headers; /* the bytes of the attempt's response headers */
  size_t len, cap;
  int failed;        /* out of memory: the rest is dropped */
  int headers_done;  /* -i's written before the body */
  int dumped;        /* -D -'s written, at the final decision */
  int drop;          /* -f and the call failed: no body */
  int damaged;       /* the final body did not match its digest: written nowhere */
  int suspect;       /* the last attempt's did not: no partial is kept of it */
  char *format;      /* -w, from writeout_load(); owned */
  progress meter;    /* on a terminal */
  int counted;       /* this attempt's length told to the meter */
  long long got;     /* the body's bytes the sink took since its restart */
  int too_large;     /* it refused more than --max-filesize: the attempt is "too_large" */
  int stopped;       /* the call stopped: a restart now is for the error page that ended it */
  int page_refused;  /* that page was above --max-filesize: written nowhere */
  int final_broken;  /* the final attempt's answer broke off (a transport error) */
  int final_large;   /* its error was too_large (a stated length past --max-filesize) */
  int final_status;  /* its status (0: none), a winning hedge's too */
  char *disposition; /* -J: its Content-Disposition, or NULL; owned */
  /* the validator of the last answer whose bytes the sink holds and can be
   * resumed (a broken 200 or 206); "": none since the sink's restart */
  char validator[256];
} response;

void response_init(response *r, const run_args *a, attempt_log *log, outfile *out, CURL *h);
/* A luaretry_observer_fn: log_attempt, then what -i and -f need. */
void response_observe(void *ud, const luaretry_outcome *o, const luaretry_decision *d);
/* A luaretry_sink_fn in front of outfile_write.  A body past --max-filesize
 * is refused (too_large set), which stops the helper's call: libcurl 7.88
 * enforces CURLOPT_MAXFILESIZE only on a length stated up front. */
size_t response_sink(void *ud, const char *data, size_t len);
/* luaretry_curl_perform, and an attempt the sink refused as too large
 * reported as the "too_large" libcurl reports for a stated length, the
 * policy's decision followed (a retry performs again). */
luaretry_code response_perform(response *r, luaretry_policy *p, luaretry_call *c,
                               const luaretry_request *req, const luaretry_curl_options *co,
                               luaretry_decision *final);
/* A luaretry_restart_fn: a new attempt begins. */
int response_restart(void *ud);
/* An attempt that broke after an answer the next attempt can resume (a
 * luaretry_curl_resumable() outcome): its validator (a strong ETag, else
 * Last-Modified) into out, 1; else 0, out untouched. */
int resumable_validator(const luaretry_outcome *o, char *out, size_t cap);
/* Whether the request is a GET whose file (-o, -O, --output-dir) keeps
 * what a stop signal or the deadline cut, for the same command to continue
 * (outfile.h): no body, no upload, no -C -. */
int run_keeps_partials(const run_args *a);
/* -J: the file at path, kept, renamed to the name a Content-Disposition
 * header's value gives (its last path segment only), beside it, never over
 * an existing file (curl refuses that too); a value with no name, or a
 * hidden one, leaves it.  who starts the message ("[3] " or "").  0, or -1
 * after a message. */
int disposition_rename(const char *path, const char *value, const char *who);
/* -D FILE and -w once the call ended; the exit status (1 when -D failed). */
int response_finish(response *r, const luaretry_decision *final, int status);
/* Whether a file written at the end (-D's, -o's) can be: checked before
 * the first attempt; 0, or a usage status after saying why, naming opt.
 * replaced: written to a temporary beside it and renamed, so its folder
 * must take new files even when it exists (-o); else written in place.
 * (--metrics-file is not: the call's own status stands without it.) */
int output_check(const char *opt, const char *path, int replaced);
void response_free(response *r);

/* ---- signals.c: SIGINT and SIGTERM cancel what runs */

/* From now on a stop signal cancels `call` or `many` (either may be NULL;
 * one that came before cancels it at once).  Both NULL before freeing
 * them. */
void cli_cancel_on_signal(luaretry_call *call, luaretry_curl_many *many);
/* A command's process group, killed at once (SIGKILL) by a second stop
 * signal; 0: none. */
void cli_kill_on_second_signal(pid_t pgid);
/* Stop signals received so far. */
int cli_stop_signals(void);
/* The exit status for a call that ended in error code rc. */
int cli_error_status(luaretry_code rc);

/* ---- dirs.c: --create-dirs */

/* Makes the missing folders of `path` (whole: path itself is one; else up
 * to its last '/'), mode 0750 as curl's; 0, or -1 after a message. */
int create_dirs(const char *path, int whole, const char *option);
/* The folder a file of `path` goes in: up to its last '/', "/" for a
 * name at the root, "." for a bare name. */
void path_folder(const char *path, char *out, size_t size);
/* Whether a file can be made in dir (one is made and removed); 0 with
 * errno when not. */
int folder_takes_files(const char *dir);
/* The same, and when not, what is wrong with dir, into why: its own error
 * (no such folder, not one), else "cannot create files there" (and why,
 * when the system said more than ENOENT).  0, or -1. */
int folder_refusal(const char *dir, char *why, size_t cap);

/* ---- trace.c: -v's header lines and --trace-ascii FILE, credentials
 * redacted */

/* From the options: -v, and --trace-ascii opened ("-" standard output, "%"
 * standard error); 0, or -1 after a message. */
int trace_open(const run_args *a);
int trace_active(void);
/* On h (and handles copied from it) when either is on. */
void trace_apply(CURL *h);
/* What libcurl's debug callback gives (a curl_infotype), for a callback of
 * another's that also wants it. */
void trace_feed(int type, const char *data, size_t size);
void trace_close(void);

/* ---- report.c: what the end of a run tells machines */

/* --stats (text or JSON) on standard error, --metrics-file, and the
 * summary object that ends --log-json (`json`, may be NULL): the call's
 * verdict (LUARETRY_REASON_NONE: none was decided), its attempts (< 0: the
 * policy's count, for a batch), the total wait and the exit status.  p
 * NULL: the policy did not load; the summary and the metrics file say the
 * exit status, the policy named as given. */
void report_end(const run_args *a, const luaretry_policy *p, FILE *json, luaretry_reason reason,
                long attempts, int exit_status);
/* report_end for a run that ended before any call (p NULL: before or
 * while its policy loaded): --log-json opened for its summary alone, if
 * `log` (not when its file is also another option's: left alone). */
void report_early(const run_args *a, const luaretry_policy *p, int exit_status, int log);

/* ---- the ways to run: each fills `final`; the final body goes to `out` */

/* command.c: run POLICY -- COMMAND, each attempt a child process group;
 * stdin_fd (or -1: luaretry's own standard input) is given whole to every
 * attempt; its error output passes through as it comes, its standard
 * output too with live_stdout, else into `out`; before_retry (NULL: none)
 * runs with sh -c before each retry; *last_status: the last attempt's own
 * exit status, -1 when it did not run to its end. */
luaretry_code command_run(luaretry_call *c, char **argv, int stdin_fd, int live_stdout,
                          const char *before_retry, outfile *out, luaretry_decision *final,
                          int *last_status);
/* command.c: one warning line when p's classifier never retries a failed
 * command (exit 1 judged final), naming the `command` policy. */
void command_policy_check(luaretry_policy *p, const char *policy);
/* workflow.c: run POLICY [ARGS...], the script's run(http, args) retried
 * whole; a hedged request's decisions go to log as "request N: ...". */
luaretry_code workflow_run(const run_args *a, luaretry_policy *p, luaretry_call *c,
                           const attempt_log *log, outfile *out, luaretry_decision *final);
/* ---- outnames.c: --output-dir's file names, each unique */

typedef struct {
  char *name;
  long next; /* the suffix the next repeat of name tries first */
} out_name;

/* A set of names (open addressing, grown at half full); zeroed: empty. */
typedef struct {
  out_name *slot;
  size_t mask, count;
} out_names;

/* `base`, or base.1, base.2 ... when taken, now in the set (which owns
 * it); NULL when out of memory.  Takes base (NULL: out of memory). */
char *out_names_unique(out_names *set, char *base);
void out_names_free(out_names *set);

/* The files of run_outputs() (but -o's, whose name is reserved) that lie
 * in --output-dir's folder: their names there. */
typedef struct {
  const char *opt[RUN_OUTPUTS], *path[RUN_OUTPUTS];
  char *name[RUN_OUTPUTS];
  int n;
} out_others;

/* Fills o for a and dir (zeroed first); -1 when out of memory. */
int out_others_find(out_others *o, const run_args *a, const char *dir);
/* Which of them a URL's file `name` in dir would be: its index, or -1. */
int out_others_clash(const out_others *o, const char *name);
void out_others_free(out_others *o);

/* ---- order.c: a batch's bodies to standard output in list order */

typedef struct {
  long number;          /* the URL's */
  uint64_t offset, len; /* its body in the spool; len 0: none */
} order_body;

typedef struct {
  long next;        /* the URL number whose body goes next, from 1 */
  int fd;           /* the spool of bodies ahead of their turn; -1: none yet */
  uint64_t end;     /* its length */
  uint64_t look;    /* its file system's room is looked at again from here */
  order_body *heap; /* the waiting bodies, by number */
  size_t n, cap;
  int lost; /* waiting bodies whose write failed (said) */
} out_order;

void order_init(out_order *o);
/* URL `number` ended: its body (standard output's outfile, finished here,
 * shown when `keep`) goes now when its turn has come, and after it every
 * waiting body whose turn follows; else it waits.  0, or -1 when a body to
 * keep was lost (said). */
int order_done(out_order *o, long number, outfile *f, int keep);
/* URL `number` ended with no call (a bad URL from a pipe): no body. */
void order_skip(out_order *o, long number);
/* The batch ended: what still waits goes, in order; how many bodies were
 * lost on the way (said). */
int order_end(out_order *o);
void order_free(out_order *o);

/* batch.c: run POLICY URL URL... | --urls FILE: each URL its own call. */
int batch_run(const run_args *a, luaretry_policy *p);

#endif
