/* Publishing a buffer to the node's peers, and holding it until they have read it.
 *
 * The owner publishes {address, length, generation} (struct mcoll_peer_buf,
 * shm/shm.h) before it sets the flag its readers wait on; a reader that has seen
 * the flag reads the peer's memory there (node/peer.h), and the stamp says which
 * generation the address is of. The owner keeps the buffer as it is until every
 * reader has marked itself done with that generation (mcoll__hold_wait): readers
 * mark on a counter of their data line, `done` for area generations (node/area.h),
 * `cma_done` for bcast sequences.
 *
 * The usual place is the owner's data line (mcoll__publish_line). Named variants keep
 * the same record elsewhere where latency needs it: in the first words of an area
 * slot (gather's one-generation path: the slot is already in the reader's cache),
 * and tables where an entry is either an area offset or a peer address (scatter's
 * entry, which travels in the reader's own inline line; alltoallv's slot table;
 * alltoall's per-destination address table and the reductions' address words in
 * the area header): there one line carries many entries, and the generation is
 * that of the area or slot holding them. */
#ifndef MCOLL_NODE_PUBLISH_H
#define MCOLL_NODE_PUBLISH_H

#include <stdint.h>

#include "shm/shm.h"

/* A buffer's address as peers read it (node/peer.h): the record's addr, and the
 * address words of the named variants. */
static inline uint64_t mcoll__peer_addr(const void *buf) { return (uint64_t)(uintptr_t)buf; }

static inline void mcoll__publish(struct mcoll_peer_buf *at, const void *buf, size_t len,
                                  uint32_t gen) {
  atomic_store_explicit(&at->addr, mcoll__peer_addr(buf), memory_order_relaxed);
  atomic_store_explicit(&at->len, (uint64_t)len, memory_order_relaxed);
  atomic_store_explicit(&at->gen, gen, memory_order_release);
}

/* Only the length (a bcast through the areas publishes its call's bytes alone). */
static inline void mcoll__publish_len(struct mcoll_peer_buf *at, size_t len) {
  atomic_store_explicit(&at->len, (uint64_t)len, memory_order_relaxed);
}

/* Node-local rank r's data-line record. */
static inline struct mcoll_peer_buf *mcoll__publish_line(const struct mcoll_shm *shm, int r) {
  return &shm->data[r].buf;
}

static inline uint64_t mcoll__published_addr(const struct mcoll_peer_buf *at) {
  return atomic_load_explicit(&at->addr, memory_order_relaxed);
}
static inline uint64_t mcoll__published_len(const struct mcoll_peer_buf *at) {
  return atomic_load_explicit(&at->len, memory_order_relaxed);
}
/* Whether the record is of generation gen (a reader that waited on its owner's
 * flag may check that it is not reading a stale address). */
static inline int mcoll__published_is(const struct mcoll_peer_buf *at, uint32_t gen) {
  return atomic_load_explicit(&at->gen, memory_order_acquire) == gen;
}

/* A buffer that becomes readable piece by piece (bcast's single copy, whose source
 * receives its buffer from other nodes while its node reads it): after publishing
 * it, the owner counts the chunks made readable so far on its data line's
 * `cma_ready`, and readers wait for the count before reading a chunk. The count runs
 * on across calls: a call's chunks are base+1 .. base+n, base taken when it began. */
static inline void mcoll__publish_ready(const struct mcoll_shm *shm, uint32_t upto) {
  mcoll__flag_set(shm, &shm->data[shm->local_rank].cma_ready, upto);
}
static inline void mcoll__published_wait_ready(const struct mcoll_shm *shm, int owner,
                                               uint32_t chunk) {
  mcoll__flag_wait(shm, &shm->data[owner].cma_ready, chunk);
}
static inline int mcoll__published_test_ready(const struct mcoll_shm *shm, int owner,
                                              uint32_t chunk) {
  return mcoll__flag_test(&shm->data[owner].cma_ready, chunk);
}

/* Which counter of its data line a reader marks when done with a generation. */
enum mcoll_read_mark { MCOLL_MARK_AREA, MCOLL_MARK_BCAST };

static inline mcoll_flag *mcoll__read_mark(const struct mcoll_shm *shm, int r,
                                           enum mcoll_read_mark mark) {
  return mark == MCOLL_MARK_AREA ? &shm->data[r].done : &shm->data[r].cma_done;
}

/* A reader: done with generation gen of what it read. */
static inline void mcoll__read_done(const struct mcoll_shm *shm, enum mcoll_read_mark mark,
                                    uint32_t gen) {
  mcoll__flag_set(shm, mcoll__read_mark(shm, shm->local_rank, mark), gen);
}

/* The owner: waits until reader r (every peer when r < 0) is done with gen. */
static inline void mcoll__hold_wait(const struct mcoll_shm *shm, enum mcoll_read_mark mark, int r,
                                    uint32_t gen) {
  if (r >= 0) {
    mcoll__flag_wait(shm, mcoll__read_mark(shm, r, mark), gen);
    return;
  }
  for (int x = 0; x < shm->local_size; x++)
    if (x != shm->local_rank) mcoll__flag_wait(shm, mcoll__read_mark(shm, x, mark), gen);
}

/* Whether mcoll__hold_wait would return now. */
static inline int mcoll__hold_test(const struct mcoll_shm *shm, enum mcoll_read_mark mark, int r,
                                   uint32_t gen) {
  if (r >= 0) return mcoll__flag_test(mcoll__read_mark(shm, r, mark), gen);
  for (int x = 0; x < shm->local_size; x++)
    if (x != shm->local_rank && !mcoll__flag_test(mcoll__read_mark(shm, x, mark), gen)) return 0;
  return 1;
}

#endif
