/* The transport between thread ranks of one node, below the runtime's matching
 * (runtime.c): a ring per (sender, receiver) pair, in the process's memory between its
 * threads and in a segment the node's processes share between theirs (node_copy.c), and
 * the split copy of a large message by receiver and sender together. Nothing here knows
 * MPI or the mailboxes. */
#ifndef MCOLL_THREADS_RINGS_H
#define MCOLL_THREADS_RINGS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct thr_msg;

/* One producer, one consumer. A message is an envelope and its bytes inline over
 * consecutive slots (the send is then complete), a pointer to a message of its own
 * (larger, packed or SMPI; only inside a process), or a reference to bytes in another
 * process (read by single copy). Only the receiver takes messages out, in the order
 * sent, so matching keeps MPI's non-overtaking rule; a small message costs the hand-off
 * of its slot's first cache line, no lock and no allocation. */
enum {
  THR_SLOT_BYTES = 512,
  THR_SLOT_DATA = THR_SLOT_BYTES - 32, /* a slot's inline bytes */
  THR_RING_SLOTS = 32,
  THR_INLINE_SLOTS = 3, /* the most slots one message spans */
  THR_INLINE_BYTES = THR_INLINE_SLOTS * THR_SLOT_DATA
};
struct thr_slot {
  atomic_int full; /* the sender sets it (release) after the rest, the receiver clears it */
  int ctx, src, tag;
  unsigned len;          /* (first slot) inline bytes */
  unsigned short slots;  /* (first slot) how many slots the message spans */
  unsigned short kind;   /* (first slot) enum thr_slot_kind */
  struct thr_msg *msg;   /* (first slot, THR_SLOT_MSG) the message */
  unsigned char data[THR_SLOT_DATA];
};
enum thr_slot_kind {
  THR_SLOT_INLINE, /* the bytes follow the envelope */
  THR_SLOT_MSG,    /* msg */
  THR_SLOT_PEER,   /* data holds a struct thr_peer_ref */
  THR_SLOT_BLOCK   /* data holds a struct thr_peer_ref: len bytes in block addr */
};
/* Bytes in another process of the node: the receiver reads len bytes at addr in
 * process pid, then sets the int at done there. (THR_SLOT_BLOCK: in a block of the
 * node's segment, node_copy.c.) */
struct thr_peer_ref {
  uint64_t len, addr, done;
  int32_t pid;
};
_Static_assert(sizeof(struct thr_slot) == THR_SLOT_BYTES, "a slot is whole cache lines");
struct thr_ring {
  _Alignas(64) unsigned tail; /* the sender's next slot */
  _Alignas(64) unsigned head; /* the receiver's next slot */
  /* Messages of this pair that found the ring full and went to the receiver's overflow
   * queue instead, not yet taken (runtime.c: moved under the receiver's mailbox lock).
   * While any are, the sender's later messages follow them there, in order. */
  _Alignas(64) atomic_uint overflowed;
  _Alignas(64) struct thr_slot slots[THR_RING_SLOTS];
};

/* T x T rings ([receiver x T + sender]), all empty; freed by thr_rings_free. */
void thr_rings_init(int threads);
void thr_rings_free(void);
int thr_rings_ready(void);
struct thr_ring *thr_ring_of(int receiver, int sender);

/* The consumer: the first slot of the oldest message, or NULL; its inline bytes (up to
 * n) copied out in one piece; then the message's slots given back. */
static inline struct thr_slot *thr_ring_peek(struct thr_ring *ring)
{
  struct thr_slot *slot = &ring->slots[ring->head % THR_RING_SLOTS];
  return atomic_load_explicit(&slot->full, memory_order_acquire) ? slot : NULL;
}
void thr_ring_copy_out(const struct thr_ring *ring, const struct thr_slot *first, void *dst,
                       size_t n);
void thr_ring_release(struct thr_ring *ring, const struct thr_slot *first);

/* The producer: the first of the slots a message of len inline bytes needs (len 0 for a
 * pointer), or NULL while they are not free; then the message written and published. */
unsigned thr_ring_slots_for(size_t len);
struct thr_slot *thr_ring_reserve(struct thr_ring *ring, size_t len);
void thr_ring_put_inline(struct thr_ring *ring, struct thr_slot *first, int ctx, int src,
                         int tag, const void *bytes, size_t len);
void thr_ring_put_msg(struct thr_ring *ring, struct thr_slot *first, int ctx, int src, int tag,
                      struct thr_msg *m);
void thr_ring_put_peer(struct thr_ring *ring, struct thr_slot *first, enum thr_slot_kind kind,
                       int ctx, int src, int tag, const struct thr_peer_ref *ref);

/* A large message whose receive is posted: the receiver publishes where the bytes go,
 * and it and the sender (when it waits for this send, as a blocking send does) copy
 * chunks of it in turn, two cores at once. The split lives in the sender's request; the
 * receiver touches it only until every chunk is copied. */
struct thr_split {
  atomic_uintptr_t dst; /* 0 until the receiver publishes the destination */
  atomic_size_t next;   /* the next chunk to claim */
  atomic_size_t copied; /* bytes copied, by both sides */
  const void *src;
  size_t len, chunk;
};
enum { THR_SPLIT_MIN_BYTES = 16 * 1024, THR_SPLIT_CHUNK_BYTES = 64 * 1024 };
/* A split of len bytes at src, in halves below two whole chunks. */
void thr_split_init(struct thr_split *s, const void *src, size_t len);
/* The sender's part, from its waits: chunks once the receiver has published. */
void thr_split_help(struct thr_split *s);
/* The receiver's part into dst (room for the whole message): publish, copy, wait for
 * the sender's chunks in flight. */
void thr_split_receive(struct thr_split *s, void *dst);
/* Messages split, and chunks the senders copied. */
void thr_split_counts(long *messages, long *sender_chunks);

#endif
