/* deliver.c: a final body handed to the host once the call has stopped
 * (kept whole, a winning hedge's, an error answer set aside while
 * resuming), where the host's "no" (a full disk) must stop the call as it
 * does a streamed body's bytes.  A file of its own: perform, the batch,
 * hedging and resuming all hand bodies over, and nothing here reaches
 * them back. */
#include <stdio.h>

#include "http.h"

int lr_curl_give_body(luaretry_sink_fn sink, luaretry_restart_fn restart, void *ud,
                      const char *data, size_t len, char *why, size_t cap) {
  int rc = restart ? restart(ud) : 0;
  if (rc != 0) {
    if (cap) snprintf(why, cap, "the restart function refused (%d) to take the final body", rc);
    return -1;
  }
  size_t took = sink && len ? sink(ud, data, len) : len;
  if (took != len) {
    if (cap) snprintf(why, cap, "the sink took %zu of the final body's %zu bytes", took, len);
    return -1;
  }
  return 0;
}
