/* config.c: -K FILE, curl's config file, cut into the words of a command
 * line (args.c takes them as it takes argv).  One option a line: "--name
 * value", "name value", "name = value" or "name: value" (a name without
 * dashes is a long option), "-X value" for a short one; a value quoted
 * with "..." (\\ \" \t \n \r \v escapes) or bare up to the first blank;
 * '#' starts a comment line; "url = URL" names a URL. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "run.h"

/* A quoted value from s (after its '"') into out, escapes undone; -1 when
 * the quote is not closed. */
static int unquote(const char *s, char *out) {
  size_t n = 0;
  for (; *s && *s != '"'; s++) {
    if (*s == '\\' && s[1]) {
      s++;
      const char *from = "tnrv", *to = "\t\n\r\v";
      const char *k = strchr(from, *s);
      out[n++] = k ? to[k - from] : *s;
    } else {
      out[n++] = *s;
    }
  }
  out[n] = '\0';
  return *s == '"' ? 0 : -1;
}

/* One line into its option word(s): "--name" [value], or "-Xvalue" for a
 * short option (its value attached, as argv may have it).  The number of
 * words (0: a comment or a blank line), or -1. */
static int split_line(const char *line, char **words) {
  const char *s = line + strspn(line, " \t");
  if (!*s || *s == '#' || *s == '\n' || *s == '\r') return 0;
  int is_short = *s == '-' && s[1] != '-';
  size_t n = is_short ? strcspn(s, " \t\r\n") : strcspn(s, " \t=:\r\n");
  const char *v = s + n;
  v += strspn(v, " \t");
  if (!is_short && (*v == '=' || *v == ':')) v++;
  v += strspn(v, " \t");
  size_t vlen = strcspn(v, "\r\n");
  char *value = NULL;
  if (vlen) {
    if (!(value = malloc(vlen + 1))) return -1;
    if (*v == '"') {
      if (unquote(v + 1, value) != 0) {
        free(value);
        return -1;
      }
    } else {
      size_t bare = strcspn(v, " \t\r\n");
      memcpy(value, v, bare);
      value[bare] = '\0';
    }
  }
  size_t size = n + 3 + (is_short && value ? strlen(value) : 0);
  if (!(words[0] = malloc(size))) {
    free(value);
    return -1;
  }
  snprintf(words[0], size, "%s%.*s%s",
           is_short    ? ""
           : *s == '-' ? ""
                       : "--",
           (int)n, s, is_short && value ? value : "");
  if (is_short || !value) {
    free(value);
    return 1;
  }
  words[1] = value;
  return 2;
}

/* One line of f (run_read_line's answers); a line a failed read cut short
 * is not applied: 0, as the read's failure. */
static long read_line(FILE *f, char **line, size_t *size) {
  long n = run_read_line(f, line, size);
  return n > 0 && ferror(f) ? 0 : n;
}

/* Why line `no` of a -K file is not taken: a usage error naming both. */
static int bad_line(const char *path, long no, const char *why) {
  char what[512];
  snprintf(what, sizeof what, "run: -K %s, line %ld: %s", path, no, why);
  return cli_usage("%s", what);
}

static int too_long(const char *path, long no) {
  char why[96];
  snprintf(why, sizeof why, "longer than %d bytes, more than any URL or value: refused",
           RUN_LINE_MAX);
  return bad_line(path, no, why);
}

/* The file read to its end: EXIT_INTERRUPTED when a stop signal cut the
 * read (nothing is run: the options are not all known); a usage error
 * naming the file when the read failed (it is not taken as its end); 0. */
static int config_end(FILE *f, const char *path) {
  if (cli_interrupted()) return EXIT_INTERRUPTED;
  if (!ferror(f)) return 0;
  char what[512];
  snprintf(what, sizeof what, "run: -K %s: %s", path, strerror(errno));
  return cli_usage("%s", what);
}

int config_words(const char *path, config_word_fn take, void *ud) {
  int stdin_file = strcmp(path, "-") == 0;
  /* a stop signal that came before the open: a FIFO's would wait on */
  errno = EINTR;
  FILE *f = cli_interrupted() ? NULL : stdin_file ? stdin : fopen(path, "r");
  if (!f && errno == EINTR && cli_interrupted()) return EXIT_INTERRUPTED;
  struct stat st;
  if (f && !stdin_file && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    fclose(f); /* a folder opens, and reads as nothing at all */
    f = NULL;
    errno = EISDIR;
  }
  if (!f) {
    char what[512];
    snprintf(what, sizeof what, "run: -K %s: %s", path, strerror(errno));
    return cli_usage("%s", what);
  }
  char *line = NULL;
  size_t size = 0;
  long no = 0, len = 0;
  int status = 0;
  while (status == 0 && (len = read_line(f, &line, &size)) != 0) {
    no++;
    char *words[2] = { NULL, NULL };
    int n = 0;
    if (len == -1)
      status = cli_usage("run: -K: out of memory", NULL);
    else if (len == -2)
      status = too_long(path, no);
    else if (memchr(line, '\0', (size_t)len))
      status = bad_line(path, no, "holds a NUL byte: refused");
    else if ((n = split_line(line, words)) < 0)
      status = bad_line(path, no, "an unclosed quote");
    else if (n > 0)
      status = take(ud, n, words, path, no);
  }
  if (status == 0) status = config_end(f, path);
  free(line);
  if (!stdin_file) fclose(f);
  return status;
}
