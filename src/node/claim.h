/* First arrival: the first rank of a node to enter a call claims it, and every rank
 * of the node learns which one did (the CP bcast, docs/architecture.md: the first
 * rank to arrive leads its node's inter-node step, so a late rank delays only itself).
 *
 * The call is named by a sequence number that every rank of the node takes alike
 * (the channel's bcast_seq). Its word is first_arrival[seq % MCOLL_CLAIMS] of the
 * segment (after the inline lines): the sequence in the high half, the claimant's node-local rank in
 * the low half. A rank that finds an older sequence there tries to put its own; one
 * that finds this call's reads the winner. No rank is MCOLL_CLAIMS calls ahead of
 * another (shm/shm.h), so a word never holds a later call's claim. */
#ifndef MCOLL_NODE_CLAIM_H
#define MCOLL_NODE_CLAIM_H

#include <stdint.h>

#include "shm/shm.h"

/* The node-local rank that arrived first at call seq: this rank if it is the first. */
static inline int mcoll__claim_first(const struct mcoll_shm *shm, uint32_t seq) {
  _Atomic uint64_t *word = &shm->first_arrival[seq % MCOLL_CLAIMS];
  uint64_t mine = (uint64_t)seq << 32 | (uint32_t)shm->local_rank;
  uint64_t seen = atomic_load_explicit(word, memory_order_acquire);
  while ((uint32_t)(seen >> 32) != seq)
    if (atomic_compare_exchange_weak_explicit(word, &seen, mine, memory_order_acq_rel,
                                              memory_order_acquire))
      return shm->local_rank;
  return (int)(uint32_t)seen;
}

#endif
