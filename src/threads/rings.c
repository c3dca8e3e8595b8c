/* The rings between thread ranks of one process, and the split copy (rings.h). */
#include "rings.h"
#include "../core/relax.h"

#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct thr_ring *rings;
static int ring_threads;

void thr_rings_init(int threads)
{
  /* (also T = 1: a rank's messages to itself) */
  size_t bytes = (size_t)threads * (size_t)threads * sizeof *rings;
  rings = aligned_alloc(_Alignof(struct thr_ring), bytes);
  if (!rings)
    abort();
  memset(rings, 0, bytes);
  ring_threads = threads;
}

void thr_rings_free(void)
{
  free(rings);
  rings = NULL;
  ring_threads = 0;
}

int thr_rings_ready(void)
{
  return rings != NULL;
}

struct thr_ring *thr_ring_of(int receiver, int sender)
{
  return &rings[receiver * ring_threads + sender];
}

static unsigned index_of(const struct thr_ring *ring, const struct thr_slot *slot)
{
  return (unsigned)(slot - ring->slots);
}

void thr_ring_copy_out(const struct thr_ring *ring, const struct thr_slot *first, void *dst,
                       size_t n)
{
  if (n > first->len)
    n = first->len;
  unsigned at = index_of(ring, first);
  for (size_t done = 0; done < n; at = (at + 1) % THR_RING_SLOTS) {
    size_t piece = n - done < THR_SLOT_DATA ? n - done : THR_SLOT_DATA;
    memcpy((char *)dst + done, ring->slots[at].data, piece);
    done += piece;
  }
}

/* In order, first slot first: the sender's look at a message's last slot then sees
 * every slot before it free. */
void thr_ring_release(struct thr_ring *ring, const struct thr_slot *first)
{
  unsigned slots = first->slots, at = index_of(ring, first);
  for (unsigned i = 0; i < slots; i++)
    atomic_store_explicit(&ring->slots[(at + i) % THR_RING_SLOTS].full, 0, memory_order_release);
  ring->head += slots;
}

unsigned thr_ring_slots_for(size_t len)
{
  return len <= THR_SLOT_DATA ? 1 : (unsigned)((len + THR_SLOT_DATA - 1) / THR_SLOT_DATA);
}

/* The ring's taken slots are one run from head to tail: when the last slot the message
 * needs is free, so are the ones before it. */
struct thr_slot *thr_ring_reserve(struct thr_ring *ring, size_t len)
{
  unsigned last = ring->tail + thr_ring_slots_for(len) - 1;
  if (atomic_load_explicit(&ring->slots[last % THR_RING_SLOTS].full, memory_order_acquire))
    return NULL;
  return &ring->slots[ring->tail % THR_RING_SLOTS];
}

static void publish(struct thr_ring *ring, struct thr_slot *first, unsigned slots,
                    enum thr_slot_kind kind, int ctx, int src, int tag)
{
  first->ctx = ctx, first->src = src, first->tag = tag;
  first->slots = (unsigned short)slots;
  first->kind = (unsigned short)kind;
  unsigned at = index_of(ring, first);
  for (unsigned i = 1; i < slots; i++)
    atomic_store_explicit(&ring->slots[(at + i) % THR_RING_SLOTS].full, 1, memory_order_relaxed);
  atomic_store_explicit(&first->full, 1, memory_order_release);
  ring->tail += slots;
}

void thr_ring_put_inline(struct thr_ring *ring, struct thr_slot *first, int ctx, int src,
                         int tag, const void *bytes, size_t len)
{
  unsigned slots = thr_ring_slots_for(len), at = index_of(ring, first);
  first->len = (unsigned)len;
  first->msg = NULL;
  for (size_t done = 0; done < len; at = (at + 1) % THR_RING_SLOTS) {
    size_t piece = len - done < THR_SLOT_DATA ? len - done : THR_SLOT_DATA;
    memcpy(ring->slots[at].data, (const char *)bytes + done, piece);
    done += piece;
  }
  publish(ring, first, slots, THR_SLOT_INLINE, ctx, src, tag);
}

void thr_ring_put_msg(struct thr_ring *ring, struct thr_slot *first, int ctx, int src, int tag,
                      struct thr_msg *m)
{
  first->len = 0;
  first->msg = m;
  publish(ring, first, 1, THR_SLOT_MSG, ctx, src, tag);
}

void thr_ring_put_peer(struct thr_ring *ring, struct thr_slot *first, enum thr_slot_kind kind,
                       int ctx, int src, int tag, const struct thr_peer_ref *ref)
{
  first->len = sizeof *ref;
  first->msg = NULL;
  memcpy(first->data, ref, sizeof *ref);
  publish(ring, first, 1, kind, ctx, src, tag);
}

/* ---- the split copy ---- */

static atomic_long split_messages, split_sender_chunks;

void thr_split_init(struct thr_split *s, const void *src, size_t len)
{
  s->src = src;
  s->len = len;
  s->chunk = len >= 2 * THR_SPLIT_CHUNK_BYTES ? THR_SPLIT_CHUNK_BYTES : ((len + 1) / 2 + 63) & ~(size_t)63;
}

/* Copies chunks until none is left; returns how many this side copied. */
static long split_copy(struct thr_split *s, char *dst)
{
  const char *src = s->src;
  for (long chunks = 0;; chunks++) {
    size_t at = atomic_fetch_add_explicit(&s->next, 1, memory_order_relaxed) * s->chunk;
    if (at >= s->len)
      return chunks;
    size_t n = s->len - at < s->chunk ? s->len - at : s->chunk;
    memcpy(dst + at, src + at, n);
    atomic_fetch_add_explicit(&s->copied, n, memory_order_release);
  }
}

void thr_split_help(struct thr_split *s)
{
  if (!s->len)
    return;
  uintptr_t dst = atomic_load_explicit(&s->dst, memory_order_acquire);
  long chunks = dst ? split_copy(s, (char *)dst) : 0;
  if (chunks)
    atomic_fetch_add_explicit(&split_sender_chunks, chunks, memory_order_relaxed);
}

void thr_split_receive(struct thr_split *s, void *dst)
{
  atomic_store_explicit(&s->dst, (uintptr_t)dst, memory_order_release);
  split_copy(s, dst);
  atomic_fetch_add_explicit(&split_messages, 1, memory_order_relaxed);
  unsigned polls = 0;
  while (atomic_load_explicit(&s->copied, memory_order_acquire) < s->len)
    if (++polls % 1024 == 0)
      sched_yield();
    else
      mcoll__cpu_relax();
}

void thr_split_counts(long *messages, long *sender_chunks)
{
  *messages = atomic_load(&split_messages);
  *sender_chunks = atomic_load(&split_sender_chunks);
}
