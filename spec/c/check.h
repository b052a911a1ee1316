/* check.h: a tiny assertion kit for the C host tests.
 *
 *   CHECK(cond)                 CHECK_EQ_INT(a, b)      CHECK_NEAR(a, b, eps)
 *   CHECK_EQ_DBL(a, b) (exact)  CHECK_EQ_STR(a, b)      CHECK_CONTAINS(s, sub)
 *   CHECK_CODE(rc, want)        (names both codes with luaretry_strerror)
 *   return check_done();        prints "N passed, N failed", nonzero on failure
 *
 * Each failure prints file:line and what was compared.  Every macro is an
 * expression that yields 1 (pass) or 0 (fail), so a test may guard what
 * follows: `if (!CHECK(p != NULL)) return;`.  One test program, one set of
 * counters: include this header from a single translation unit.
 */
#ifndef LUARETRY_CHECK_H
#define LUARETRY_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int check_passed_, check_failed_;

static int check_result_(int ok, const char *file, int line, const char *fmt, ...)
  __attribute__((format(printf, 4, 5), unused));
static int check_result_(int ok, const char *file, int line, const char *fmt, ...) {
  if (ok) {
    check_passed_++;
    return 1;
  }
  check_failed_++;
  fprintf(stderr, "%s:%d: FAIL: ", file, line);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return 0;
}

#define CHECK(cond) check_result_(!!(cond), __FILE__, __LINE__, "%s", #cond)

#define CHECK_EQ_INT(a, b)                                                                    \
  __extension__({                                                                             \
    long long check_a_ = (long long)(a), check_b_ = (long long)(b);                           \
    check_result_(check_a_ == check_b_, __FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, \
                  check_a_, check_b_);                                                        \
  })

#define CHECK_EQ_DBL(a, b)                                                                      \
  __extension__({                                                                               \
    double check_a_ = (a), check_b_ = (b);                                                      \
    check_result_(check_a_ == check_b_, __FILE__, __LINE__, "%s == %s: %.17g != %.17g", #a, #b, \
                  check_a_, check_b_);                                                          \
  })

#define CHECK_NEAR(a, b, eps)                                                                 \
  __extension__({                                                                             \
    double check_a_ = (a), check_b_ = (b), check_e_ = (eps);                                  \
    check_result_(fabs(check_a_ - check_b_) <= check_e_, __FILE__, __LINE__,                  \
                  "%s ~= %s: %.17g vs %.17g (eps %g)", #a, #b, check_a_, check_b_, check_e_); \
  })

#define CHECK_EQ_STR(a, b)                                                                   \
  __extension__({                                                                            \
    const char *check_a_ = (a), *check_b_ = (b);                                             \
    check_result_(check_a_ &&check_b_ &&strcmp(check_a_, check_b_) == 0, __FILE__, __LINE__, \
                  "%s == %s: \"%s\" != \"%s\"", #a, #b, check_a_ ? check_a_ : "(null)",      \
                  check_b_ ? check_b_ : "(null)");                                           \
  })

#define CHECK_CONTAINS(s, sub)                                                                     \
  __extension__({                                                                                  \
    const char *check_a_ = (s), *check_b_ = (sub);                                                 \
    check_result_(check_a_ &&check_b_ &&strstr(check_a_, check_b_) != NULL, __FILE__, __LINE__,    \
                  "%s contains %s: \"%s\" lacks \"%s\"", #s, #sub, check_a_ ? check_a_ : "(null)", \
                  check_b_ ? check_b_ : "(null)");                                                 \
  })

/* Needs luaretry.h. */
#define CHECK_CODE(rc, want)                                                                      \
  __extension__({                                                                                 \
    int check_a_ = (int)(rc), check_b_ = (int)(want);                                             \
    check_result_(check_a_ == check_b_, __FILE__, __LINE__, "%s: got %d (%s), want %d (%s)", #rc, \
                  check_a_, luaretry_strerror((luaretry_code)check_a_), check_b_,                 \
                  luaretry_strerror((luaretry_code)check_b_));                                    \
  })

static int check_done(void) __attribute__((unused));
static int check_done(void) {
  fflush(stderr);
  printf("%d passed, %d failed\n", check_passed_, check_failed_);
  fflush(stdout);
  return check_failed_ != 0;
}

#endif
