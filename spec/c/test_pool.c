/* test_pool.c: a Lua state's small blocks kept for reuse
 * (core/sandbox/pool.h; luaretry-policy(5): "a state that runs calls also
 * keeps up to 64 KiB of freed small blocks for its next ones").  What a
 * list hands out, what a resize keeps, what is given back to libc, seen
 * through malloc's own count of the bytes in use (mallinfo2).  Under ASan
 * a block is written to its class's full size and a kept block is
 * poisoned, so a pool that handed out less, or a read of a kept block,
 * fails there. */
#include <malloc.h>
#include <string.h>

#include "check.h"
#include "sandbox/pool.h"

/* malloc's bytes in use, mmap'd blocks too; under ASan (its own
 * allocator, which mallinfo2 does not see) 0, and the checks of what
 * went back to libc are the plain build's. */
#if defined(__SANITIZE_ADDRESS__)
#define COUNTED 0
#else
#define COUNTED 1
#endif
static size_t in_use(void) {
  struct mallinfo2 m = mallinfo2();
  return COUNTED ? m.uordblks + m.hblkhd : 0;
}

/* A block of every size class is at least its class's size, and a freed
 * block comes back for the next of its class (last in, first out). */
static void test_classes(void) {
  lr_pool p = { 0 };
  for (size_t n = 1; n <= LR_POOL_MAX; n++) {
    unsigned char *b = lr_pool_get(&p, n);
    if (!CHECK(b != NULL)) return;
    memset(b, 0xab, lr_pool_size(lr_pool_class(n))); /* ASan: all of it is the block's */
    lr_pool_put(&p, b, n);
    CHECK(lr_pool_get(&p, n) == b);
    CHECK(p.kept == 0);
    lr_pool_put(&p, b, n);
    CHECK(p.kept == lr_pool_size(lr_pool_class(n)));
    lr_pool_drain(&p);
  }
  CHECK(lr_pool_class(16) == 0 && lr_pool_class(17) == 1 && lr_pool_class(256) == 15);
}

/* At most LR_POOL_KEEP bytes are kept; the rest go back to libc at once,
 * and a drain gives back the kept ones. */
static void test_keeps_at_most(void) {
  enum { N = 2000 };
  static void *blocks[N];
  lr_pool p = { 0 };
  size_t before = in_use();
  for (int i = 0; i < N; i++) blocks[i] = lr_pool_get(&p, 100);
  size_t held = in_use() - before;
  CHECK(!COUNTED || held >= (size_t)N * 112);
  for (int i = 0; i < N; i++) lr_pool_put(&p, blocks[i], 100);
  CHECK(LR_POOL_KEEP == 64 * 1024); /* the figure luaretry-policy(5) gives */
  CHECK(p.kept <= LR_POOL_KEEP && p.kept + 112 > LR_POOL_KEEP);
  /* what is not kept was freed: in use is the kept bytes, with malloc's headers */
  CHECK(!COUNTED || in_use() - before <= p.kept * 2);
  lr_pool_drain(&p);
  CHECK(p.kept == 0);
  for (size_t c = 0; c < LR_POOL_CLASSES; c++) CHECK(p.free[c] == NULL);
  CHECK(!COUNTED || in_use() <= before + 4096);
}

/* lua_Alloc's realloc: within a class the block stays; across classes the
 * contents move; a shrink never fails and a big block shrunk gives its
 * room back. */
static void test_resize(void) {
  lr_pool p = { 0 };
  char *b = lr_pool_get(&p, 20);
  memcpy(b, "0123456789abcdefghi", 20);
  CHECK(lr_pool_resize(&p, b, 20, 32) == b); /* class 1 (17 to 32 bytes) */
  char *moved = lr_pool_resize(&p, b, 32, 200);
  CHECK(moved != NULL && memcmp(moved, "0123456789abcdefghi", 20) == 0);
  CHECK(p.kept == 32);                               /* the old block, kept */
  CHECK(lr_pool_resize(&p, moved, 200, 8) == moved); /* a shrink between small sizes */
  lr_pool_put(&p, moved, 8);                         /* freed as Lua would: with its new size */
  CHECK(lr_pool_get(&p, 8) == moved);
  lr_pool_put(&p, moved, 8);

  size_t before = in_use();
  char *big = lr_pool_resize(&p, lr_pool_get(&p, 40), 40, 1 << 20);
  CHECK(big != NULL && (!COUNTED || in_use() >= before + (1 << 20)));
  memcpy(big, "kept", 5);
  char *small = lr_pool_resize(&p, big, 1 << 20, 64);
  CHECK(small != NULL && strcmp(small, "kept") == 0);
  CHECK(!COUNTED || in_use() <= before + 8192); /* the megabyte went back (a page may stay) */
  memset(small, 0, 64);
  lr_pool_put(&p, small, 64);
  lr_pool_drain(&p);
}

int main(void) {
  test_classes();
  test_keeps_at_most();
  test_resize();
  return check_done();
}
