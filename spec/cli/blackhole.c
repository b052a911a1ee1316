/* blackhole.c: a TCP port on 127.0.0.1 where a connection is never made,
 * for --connect-timeout: it listens with the smallest backlog, never
 * accepts, and fills its own queue, so a later SYN is dropped and the
 * client's connect waits.  Prints the port, then sleeps until killed.
 * Built by spec/curl_options_spec.lua with cc. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  socklen_t len = sizeof a;
  if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 0) != 0 ||
      getsockname(s, (struct sockaddr *)&a, &len) != 0)
    return 1;
  for (int i = 0; i < 4; i++) {  /* more than the queue holds */
    int c = socket(AF_INET, SOCK_STREAM, 0);
    fcntl(c, F_SETFL, O_NONBLOCK);
    connect(c, (struct sockaddr *)&a, sizeof a);
  }
  printf("%d\n", ntohs(a.sin_port));
  fflush(stdout);
  for (int i = 0; i < 600; i++) sleep(1);  /* bounded: ten minutes at most */
  return 0;
}
