/* pool.c: what pool.h keeps inline for the hot path does not cover: a
 * resize (Lua's tables and buffers grow and shrink) and the final drain. */
#include <string.h>

#include "pool.h"

void *lr_pool_resize(lr_pool *p, void *b, size_t old, size_t n) {
  if (n > LR_POOL_MAX) return realloc(b, n); /* b is malloc's, whatever its size */
  /* Lua assumes a shrink never fails: b stays when realloc fails, or
   * between two small sizes, its room to spare (a block may be bigger
   * than its class; never smaller) */
  if (n <= old) {
    if (old <= LR_POOL_MAX) return b;
    void *nb = realloc(b, lr_pool_size(lr_pool_class(n))); /* a big block gives its room back */
    return nb ? nb : b;
  }
  if (lr_pool_class(old) == lr_pool_class(n)) return b; /* it fits */
  /* into a pooled block (of its class's size, which realloc would not give) */
  void *nb = lr_pool_get(p, n);
  if (!nb) return NULL;
  memcpy(nb, b, old);
  lr_pool_put(p, b, old);
  return nb;
}

void lr_pool_drain(lr_pool *p) {
  for (size_t cls = 0; cls < LR_POOL_CLASSES; cls++) {
    while (p->free[cls]) {
      void *b = p->free[cls];
      LR_POOL_UNPOISON(b, lr_pool_size(cls));
      p->free[cls] = *(void **)b;
      free(b);
    }
  }
  p->kept = 0;
}
