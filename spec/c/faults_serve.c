/*
 * faults_serve: run the faults server in the foreground for the specs.
 *   faults_serve SCRIPT [LISTEN]
 * Prints "listening on ADDRESS" once it accepts connections and stops
 * cleanly on SIGTERM or SIGINT.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "faults/faults.h"

static lr_faults *server;

static void on_signal(int sig) {
  (void)sig;
  lr_faults_stop(server);
}

int main(int argc, char **argv) {
  char err[1024];
  struct sigaction sa;
  int rc;
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s SCRIPT [LISTEN]\n", argv[0]);
    return 2;
  }
  server = lr_faults_open(argv[1], argc > 2 ? argv[2] : NULL, err, sizeof err);
  if (server == NULL) {
    fprintf(stderr, "faults_serve: %s\n", err);
    return 1;
  }
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  printf("listening on %s\n", lr_faults_address(server));
  fflush(stdout);
  rc = lr_faults_serve(server);
  if (rc != 0) perror("faults_serve: poll");
  lr_faults_free(server);
  return rc != 0;
}
