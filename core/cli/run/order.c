/* order.c: a batch's bodies reach standard output in the order of its
 * list, as curl's (one transfer after another) do, whatever order the
 * calls end in: a URL retried after a 503 ends after the ones behind it,
 * with or without -Z.  A body that ends before its turn waits in one
 * spool file (unlinked, in $TMPDIR, never taking the last 1/20 of its file
 * system, as outfile.c's spools), its place noted in a heap by URL number:
 * a waiting body costs a record of memory, not its bytes nor a descriptor,
 * so a slow first URL holds back a million others in the memory of a few
 * thousand.  The spool's space is given back each time it empties. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "run.h"

#define ORDER_LOOK (16ULL * 1024 * 1024) /* spool bytes between looks at its room */

void order_init(out_order *o) {
  memset(o, 0, sizeof *o);
  o->next = 1;
  o->fd = -1;
}

static void heap_swap(order_body *h, size_t i, size_t j) {
  order_body t = h[i];
  h[i] = h[j];
  h[j] = t;
}

/* A record by its URL number; -1 when out of memory. */
static int heap_push(out_order *o, order_body b) {
  if (o->n == o->cap) {
    size_t cap = o->cap ? o->cap * 2 : 64;
    order_body *grown = realloc(o->heap, cap * sizeof *grown);
    if (!grown) return -1;
    o->heap = grown;
    o->cap = cap;
  }
  size_t i = o->n++;
  o->heap[i] = b;
  while (i > 0 && o->heap[(i - 1) / 2].number > o->heap[i].number) {
    heap_swap(o->heap, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
  return 0;
}

static order_body heap_pop(out_order *o) {
  order_body top = o->heap[0];
  o->heap[0] = o->heap[--o->n];
  for (size_t i = 0;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < o->n && o->heap[l].number < o->heap[m].number) m = l;
    if (r < o->n && o->heap[r].number < o->heap[m].number) m = r;
    if (m == i) break;
    heap_swap(o->heap, i, m);
    i = m;
  }
  return top;
}

/* A waiting body, [offset, offset + len) of the spool, to standard output;
 * 0, or -1 after a message. */
static int copy_out(out_order *o, uint64_t offset, uint64_t len) {
  char buf[65536];
  while (len > 0) {
    size_t want = len < sizeof buf ? (size_t)len : sizeof buf;
    ssize_t n = pread(o->fd, buf, want, (off_t)offset);
    if (n < 0 && errno == EINTR && !cli_interrupted()) continue;
    if (n <= 0) {
      if (!cli_interrupted())
        fprintf(stderr, "luaretry: standard output: reading the spool: %s\n",
                strerror(n < 0 ? errno : EIO));
      return -1;
    }
    for (ssize_t done = 0; done < n;) {
      ssize_t w = cli_interrupted() ? -1 : write(STDOUT_FILENO, buf + done, (size_t)(n - done));
      if (w < 0 && errno == EINTR && !cli_interrupted()) continue;
      if (w <= 0) {
        /* a stop signal cut the write to a reader that stalled: said as
         * an interruption, not here */
        if (!cli_interrupted())
          fprintf(stderr, "luaretry: standard output: writing: %s\n",
                  strerror(w < 0 ? errno : EIO));
        return -1;
      }
      done += w;
    }
    offset += (uint64_t)n;
    len -= (uint64_t)n;
  }
  return 0;
}

/* Every waiting body whose turn has come, in order; when none waits any
 * more, the spool is emptied. */
static void drain(out_order *o) {
  while (o->n && o->heap[0].number <= o->next) {
    order_body b = heap_pop(o);
    if (b.len && copy_out(o, b.offset, b.len) != 0) o->lost++;
    if (b.number == o->next) o->next++;
  }
  if (!o->n && o->fd >= 0 && o->end > 0) {
    if (ftruncate(o->fd, 0) != 0) { /* kept: written over from its start */
    }
    lseek(o->fd, 0, SEEK_SET);
    o->end = 0;
    o->look = 0;
  }
}

/* The body of URL `number` (kept or dropped) into the spool, to wait for
 * its turn; 0, or -1 when a body to keep was lost (said). */
static int wait_turn(out_order *o, long number, outfile *f, int keep) {
  order_body b = { number, o->end, 0 };
  int lost = 0, no_room = 0;
  if (keep && o->fd < 0 && (o->fd = outfile_spool_fd()) < 0) {
    int err = errno;
    fprintf(stderr, "luaretry: [%ld] standard output: cannot create a temporary file in %s: %s\n",
            number, outfile_spool_named(), strerror(err));
    lost = 1;
  }
  /* a body held in a spool file of its own is copied in, both files
   * whole until the copy ends: its room is looked at first (looked at
   * after, a 26 MiB body in a 40 MiB TMPDIR filled it: "No space left") */
  if (keep && !lost && f->in_place && f->fd >= 0 && !outfile_spool_room(o->fd, f->spooled))
    lost = no_room = 1;
  if (o->fd >= 0) f->out_fd = o->fd;
  if (outfile_finish(f, keep && !lost) != 0) lost = 1;
  off_t end = o->fd >= 0 ? lseek(o->fd, 0, SEEK_END) : (off_t)o->end;
  if (end >= 0 && !lost) b.len = (uint64_t)end - o->end; /* never half a body */
  if (b.len && b.offset + b.len >= o->look) {
    o->look = b.offset + b.len + ORDER_LOOK;
    if (!outfile_spool_room(o->fd, ORDER_LOOK)) b.len = 0, lost = no_room = 1;
  }
  /* what a refused body left is taken back (a failed truncate: written
   * over by the next) */
  if (!b.len && o->fd >= 0 && ftruncate(o->fd, (off_t)b.offset) != 0) {
  }
  /* said once its space is back: whoever reads it finds it so */
  if (no_room)
    fprintf(stderr,
            "luaretry: [%ld] standard output: the body is not kept: waiting for its turn in %s, "
            "it would leave that file system less than 5%% free (TMPDIR may name another "
            "folder)\n",
            number, outfile_spool_dir());
  if (o->fd >= 0) lseek(o->fd, (off_t)(b.offset + b.len), SEEK_SET);
  o->end = b.offset + b.len;
  if (heap_push(o, b) == 0) return lost ? -1 : 0;
  /* its turn never comes: the numbers after it wait for order_end() */
  fprintf(stderr, "luaretry: [%ld] standard output: out of memory\n", number);
  return -1;
}

int order_done(out_order *o, long number, outfile *f, int keep) {
  if (number != o->next) return wait_turn(o, number, f, keep);
  int rc = outfile_finish(f, keep); /* its turn: straight to standard output */
  o->next++;
  drain(o);
  return rc;
}

void order_skip(out_order *o, long number) {
  if (number == o->next) {
    o->next++;
    drain(o);
    return;
  }
  order_body b = { number, o->end, 0 };
  if (heap_push(o, b) != 0) { /* its turn never comes: those after it wait for order_end() */
  }
}

int order_end(out_order *o) {
  /* every URL ended: what waits goes, in order, past any number never told */
  while (o->n) {
    o->next = o->heap[0].number;
    drain(o);
  }
  int lost = o->lost;
  o->lost = 0;
  return lost;
}

void order_free(out_order *o) {
  if (o->fd >= 0) close(o->fd);
  free(o->heap);
  memset(o, 0, sizeof *o);
  o->fd = -1;
}
