/* escape.c: text that may come from the network (a server's bytes in a
 * libcurl message, a body a script quotes in its error, a command's error
 * output), written so that it cannot forge a log line nor drive the
 * terminal: JSON strings that always parse, and terminal text where every
 * control character and every byte that is not UTF-8 shows as \xHH. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* Length of the valid UTF-8 sequence at s (not overlong, no surrogate, at
 * most U+10FFFF), or 0. */
size_t cli_utf8_len(const unsigned char *s, size_t left) {
  unsigned long cp;
  size_t n;
  if (s[0] >= 0xc2 && s[0] <= 0xdf)
    n = 2, cp = s[0] & 0x1fu;
  else if (s[0] >= 0xe0 && s[0] <= 0xef)
    n = 3, cp = s[0] & 0x0fu;
  else if (s[0] >= 0xf0 && s[0] <= 0xf4)
    n = 4, cp = s[0] & 0x07u;
  else
    return 0;
  if (n > left) return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3fu);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
      (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

/* U+0080..U+009F: C1 controls, which some terminals obey (CSI is U+009B). */
static int is_c1(const unsigned char *s, size_t n) { return n == 2 && s[0] == 0xc2 && s[1] < 0xa0; }

void cli_json_string(FILE *f, const char *s) {
  if (!s) {
    fputs("null", f);
    return;
  }
  const unsigned char *p = (const unsigned char *)s;
  size_t left = strlen(s);
  fputc('"', f);
  while (left) {
    size_t n = *p >= 0x80 ? cli_utf8_len(p, left) : 1;
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p >= 0x20 && *p < 0x7f)
      fputc(*p, f);
    else if (n > 1 && !is_c1(p, n))
      fwrite(p, 1, n, f);
    else if (n == 2)
      fprintf(f, "\\u%04x", (unsigned)((p[0] & 0x1f) << 6 | (p[1] & 0x3f)));
    else
      fprintf(f, "\\u%04x", *p); /* a control, or a byte that is not UTF-8 (as Latin-1) */
    p += n ? n : 1;
    left -= n ? n : 1;
  }
  fputc('"', f);
}

/* len bytes of s for a terminal; newlines and tabs kept when `lines`. */
static void text(FILE *f, const char *s, size_t len, int lines) {
  const unsigned char *p = (const unsigned char *)s;
  while (len) {
    size_t n = *p >= 0x80 ? cli_utf8_len(p, len) : 1;
    int keep =
      (*p >= 0x20 && *p < 0x7f) || (n > 1 && !is_c1(p, n)) || (lines && (*p == '\n' || *p == '\t'));
    if (keep) {
      fwrite(p, 1, n, f);
    } else {
      size_t bad = n > 1 ? n : 1; /* a C1 control: both its bytes */
      for (size_t i = 0; i < bad; i++) fprintf(f, "\\x%02x", p[i]);
      n = bad;
    }
    p += n;
    len -= n;
  }
}

void cli_text(FILE *f, const char *s) {
  if (s) text(f, s, strlen(s), 0);
}

void cli_text_len(FILE *f, const char *s, size_t len) {
  if (s) text(f, s, len, 0);
}

void cli_text_copy(char *dst, size_t size, const char *s) {
  if (size == 0) return;
  dst[0] = '\0';
  FILE *f = fmemopen(dst, size, "w");
  if (!f) return;
  cli_text(f, s);
  fclose(f);
  dst[size - 1] = '\0'; /* fmemopen adds none to a full buffer */
}

void cli_text_block(FILE *f, const char *s, size_t len) {
  if (s) text(f, s, len, 1);
}
