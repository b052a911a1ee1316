/* gen.c: a load of a policy's script and the Lua states that run it.
 *
 * A call in flight holds a reference to the load it began under, never a
 * Lua state: each call into the script borrows a free state of the load
 * for its duration (one atomic exchange to take a slot, one store to give
 * it back; a thread tends to find the slot it used last), and states are
 * made lazily, one per thread running scripts at the same moment.  A
 * reload makes a new load; the old one goes when its last call ends. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

/* Where a thread starts looking for a free slot: the one it had last. */
_Thread_local unsigned lr_slot_hint;

lr_gen *lr_gen_new(luaretry_policy *p, char *text, size_t len, const char *chunkname,
                   const char *script_path) {
  lr_gen *g = lr_aligned_calloc(sizeof *g); /* its slots are a line each */
  if (!g) {
    free(text);
    return NULL;
  }
  lr_sref_init(&g->refs);
  g->p = p;
  g->text = text;
  g->text_len = len;
  lr_strlcpy(g->chunkname, chunkname, sizeof g->chunkname);
  lr_strlcpy(g->script_path, script_path, sizeof g->script_path);
  pthread_mutex_init(&g->grow, NULL);
  for (int i = 0; i < SLOTS_PER_BLOCK; i++) atomic_init(&g->slots.slot[i].busy, 0);
  atomic_init(&g->slots.next, NULL);
  return g;
}

void lr_gen_ref(lr_gen *g) { lr_sref_take(&g->refs); }

static void gen_free(lr_gen *g) {
  lr_slot_block *b = &g->slots;
  while (b) {
    for (int i = 0; i < SLOTS_PER_BLOCK; i++) lr_script_free(b->slot[i].script);
    lr_slot_block *next = atomic_load(&b->next);
    if (b != &g->slots) free(b);
    b = next;
  }
  pthread_mutex_destroy(&g->grow);
  lr_fleet_link_unref(g->fleet);
  for (size_t k = 0; k < g->option_count; k++) free(g->options[k].value);
  free(g->text);
  free(g);
}

void lr_gen_unref(lr_gen *g) {
  if (g && lr_sref_give(&g->refs)) gen_free(g);
}

void lr_gen_publish(lr_gen *g) { lr_sref_publish(&g->refs); }

void lr_gen_retire(lr_gen *g) {
  if (!g) return;
  lr_sref_retire(&g->refs);
  lr_gen_unref(g);
}

/* A free slot of block b, taken; NULL when all are busy. */
static lr_slot *take(lr_slot_block *b, unsigned start) {
  for (unsigned k = 0; k < SLOTS_PER_BLOCK; k++) {
    lr_slot *s = &b->slot[(start + k) % SLOTS_PER_BLOCK];
    if (!atomic_load_explicit(&s->busy, memory_order_relaxed) &&
        !atomic_exchange_explicit(&s->busy, 1, memory_order_acquire)) {
      lr_slot_hint = (start + k) % SLOTS_PER_BLOCK;
      return s;
    }
  }
  return NULL;
}

/* Every slot busy: more threads run this load's scripts than ever before. */
static lr_slot_block *grow(lr_gen *g, lr_slot_block *last) {
  pthread_mutex_lock(&g->grow);
  lr_slot_block *next = atomic_load(&last->next);
  if (!next) {
    next = lr_aligned_calloc(sizeof *next);
    if (next) atomic_store(&last->next, next);
  }
  pthread_mutex_unlock(&g->grow);
  return next;
}

lr_script *lr_gen_borrow_slow(lr_gen *g, lr_slot *slot, char *err, size_t errlen) {
  lr_slot_block *b = &g->slots;
  while (!slot) {
    slot = take(b, lr_slot_hint);
    if (slot) break;
    lr_slot_block *next = atomic_load_explicit(&b->next, memory_order_acquire);
    b = next ? next : grow(g, b);
    if (!b) {
      lr_fmt(err, errlen, "out of memory for one more Lua state");
      return NULL;
    }
  }
  if (!slot->script) {
    lr_load ld;
    memset(&ld, 0, sizeof ld);
    luaretry_code rc;
    slot->script = lr_script_new(g, &ld, &rc, err, errlen);
    lr_free_warnings(ld.warnings, &ld.warning_count);
    if (!slot->script) {
      atomic_store_explicit(&slot->busy, 0, memory_order_release);
      return NULL;
    }
    slot->script->slot = slot;
  }
  return slot->script;
}

void lr_gen_adopt(lr_gen *g, lr_script *s) {
  lr_slot *slot = &g->slots.slot[0];
  slot->script = s;
  s->slot = slot;
}
