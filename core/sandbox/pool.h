/* pool.h: a Lua state's small blocks, kept for its own reuse.
 *
 * Lua frees its short-lived objects in batches (the collector's sweep, or
 * the batches of sandbox.c's deferred frees) and allocates them one at a
 * time: a new body for every decision is a string made and later swept.
 * glibc serves that pattern from its slow bins (the thread cache holds 7 of
 * a size), ~200 instructions for a block's malloc and free.  A state's
 * blocks of up to LR_POOL_MAX bytes are kept here instead, in lists by
 * 16-byte class, for the next block of the class: a pop and a push.  Only
 * the thread running the state touches its pool (as its allocator).
 *
 * Every block of a Lua size up to LR_POOL_MAX is a malloc'd block of at
 * least its class's size, so any block can still be freed or realloc'd
 * with libc.  At most LR_POOL_KEEP bytes are kept: about what a collection
 * cycle of a policy's state sweeps. */
#ifndef LUARETRY_POOL_H
#define LUARETRY_POOL_H

#include <stddef.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define LR_POOL_POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define LR_POOL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define LR_POOL_POISON(p, n)   ((void)(p), (void)(n))
#define LR_POOL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define LR_POOL_MAX     256
#define LR_POOL_CLASSES (LR_POOL_MAX / 16)
#define LR_POOL_KEEP    (64u << 10)

typedef struct {
  void *free[LR_POOL_CLASSES]; /* a list per class, linked through the blocks */
  size_t kept;                 /* bytes in the lists */
} lr_pool;

/* A block of n bytes (0 < n <= LR_POOL_MAX) is of class (n - 1) / 16, and
 * is (class + 1) * 16 bytes. */
static inline size_t lr_pool_class(size_t n) { return (n - 1) >> 4; }
static inline size_t lr_pool_size(size_t cls) { return (cls + 1) << 4; }

/* A kept block for n bytes (0 < n <= LR_POOL_MAX), or NULL if none is. */
static inline void *lr_pool_take(lr_pool *p, size_t n) {
  size_t cls = lr_pool_class(n);
  void *b = p->free[cls];
  if (!b) return NULL;
  LR_POOL_UNPOISON(b, lr_pool_size(cls));
  p->free[cls] = *(void **)b;
  p->kept -= lr_pool_size(cls);
  return b;
}

static inline void *lr_pool_get(lr_pool *p, size_t n) {
  void *b = lr_pool_take(p, n);
  return b ? b : malloc(lr_pool_size(lr_pool_class(n)));
}

/* b was a block of Lua size n (0 < n <= LR_POOL_MAX). */
static inline void lr_pool_put(lr_pool *p, void *b, size_t n) {
  size_t cls = lr_pool_class(n);
  if (p->kept + lr_pool_size(cls) > LR_POOL_KEEP) {
    free(b);
    return;
  }
  *(void **)b = p->free[cls];
  p->free[cls] = b;
  p->kept += lr_pool_size(cls);
  LR_POOL_POISON(b, lr_pool_size(cls));
}

/* Any block Lua asks for or frees, whatever its size: the small ones go
 * through the lists, the others to libc (a NULL block frees nothing). */
static inline void *lr_pool_alloc(lr_pool *p, size_t n) {
  return n <= LR_POOL_MAX ? lr_pool_get(p, n) : malloc(n);
}
static inline void lr_pool_free(lr_pool *p, void *b, size_t n) {
  if (b && n <= LR_POOL_MAX)
    lr_pool_put(p, b, n);
  else
    free(b);
}

/* lua_Alloc's realloc of a live block (old > 0 bytes) to n > 0 bytes:
 * NULL with b untouched when out of memory. */
void *lr_pool_resize(lr_pool *p, void *b, size_t old, size_t n);
/* Hands every kept block back to libc. */
void lr_pool_drain(lr_pool *p);

#endif
