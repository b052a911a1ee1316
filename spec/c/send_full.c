/*
 * send_full.so: an LD_PRELOAD shim for the fault server (spec/faults_spec.lua)
 * that makes every send() of an interim "HTTP/1.1 100 ..." fail with
 * EAGAIN, as the kernel does when the socket's send buffer is full and the
 * client does not read.  (Linux appends a small send to the last unsent
 * segment without looking at the buffer's limit, so a real full buffer
 * refuses the 100 Continue only when that segment is exactly full: found
 * once in 60,000 tries of response sizes, never again on a rerun.)
 * The first refusal creates the file SEND_FULL_MARK names, so a spec
 * knows the server has met it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

ssize_t send(int fd, const void *buf, size_t len, int flags) {
  static ssize_t (*real)(int, const void *, size_t, int);
  static int marked;
  if (!real) real = (ssize_t(*)(int, const void *, size_t, int))dlsym(RTLD_NEXT, "send");
  if (len >= 13 && memcmp(buf, "HTTP/1.1 100 ", 13) == 0) {
    const char *mark = getenv("SEND_FULL_MARK");
    if (!marked && mark) {
      int m = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (m >= 0) close(m);
      marked = 1;
    }
    errno = EAGAIN;
    return -1;
  }
  return real(fd, buf, len, flags);
}
