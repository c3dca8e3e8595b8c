/* The node's ring: a stream of chunks from one writer (a bcast's source) to every
 * other rank of the node, through the segment's nslots chunk slots.
 *
 * Chunk generation g lives in slot g % nslots, stamped with g when it is complete.
 * A reader reports the last generation it is done with in its `consumed` flag (it
 * may report a whole window at once); the writer may put g once every reader has
 * consumed g - behind (behind <= nslots: how far it may run ahead), and reports its
 * own chunks consumed, since it never reads them. The generations are the channel's
 * ring_gen, taken by a call when it begins (coll/bcast: begin). */
#ifndef MCOLL_NODE_RING_H
#define MCOLL_NODE_RING_H

#include "shm/shm.h"

static inline char *mcoll__ring_data(const struct mcoll_shm *shm, uint32_t gen) {
  return mcoll__slot_data(shm, (int)(gen % (uint32_t)shm->nslots));
}

static inline struct mcoll_slot_ctl *mcoll__ring_ctl(const struct mcoll_shm *shm, uint32_t gen) {
  return &shm->slot[gen % (uint32_t)shm->nslots];
}

/* Writer: waits until every reader (every rank but `writer`) has consumed
 * gen - behind, so that gen's slot is free. */
static inline void mcoll__ring_wait_free(const struct mcoll_shm *shm, int writer, uint32_t gen,
                                         uint32_t behind) {
  for (int r = 0; r < shm->local_size; r++)
    if (r != writer) mcoll__flag_wait(shm, &shm->data[r].consumed, gen - behind);
}
static inline int mcoll__ring_test_free(const struct mcoll_shm *shm, int writer, uint32_t gen,
                                        uint32_t behind) {
  for (int r = 0; r < shm->local_size; r++)
    if (r != writer && !mcoll__flag_test(&shm->data[r].consumed, gen - behind)) return 0;
  return 1;
}

/* Writer: gen's slot now holds len bytes of a call of call_bytes (readers compare
 * call_bytes with theirs). */
static inline void mcoll__ring_put(const struct mcoll_shm *shm, uint32_t gen, size_t len,
                                   uint64_t call_bytes) {
  struct mcoll_slot_ctl *ctl = mcoll__ring_ctl(shm, gen);
  ctl->bytes = (uint32_t)len;
  ctl->call_bytes = call_bytes;
  mcoll__flag_set(shm, &ctl->gen, gen);
}

/* Reader: waits until gen is in its slot; its control line says what it holds. */
static inline const struct mcoll_slot_ctl *mcoll__ring_wait(const struct mcoll_shm *shm,
                                                            uint32_t gen) {
  struct mcoll_slot_ctl *ctl = mcoll__ring_ctl(shm, gen);
  mcoll__flag_wait(shm, &ctl->gen, gen);
  return ctl;
}
static inline int mcoll__ring_test(const struct mcoll_shm *shm, uint32_t gen) {
  return mcoll__flag_test(&mcoll__ring_ctl(shm, gen)->gen, gen);
}

/* Rank `r` (a reader for itself, or the writer for its own chunks) is done with
 * every generation up to upto. */
static inline void mcoll__ring_consumed(const struct mcoll_shm *shm, int r, uint32_t upto) {
  mcoll__flag_set(shm, &shm->data[r].consumed, upto);
}

#endif
