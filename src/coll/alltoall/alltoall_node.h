/* The intra-node alltoall engines (alltoall_node.c, alltoall_bruck.c) and the
 * layout of the areas they share. */
#ifndef MCOLL_ALLTOALL_NODE_H
#define MCOLL_ALLTOALL_NODE_H

#include <stddef.h>

#include "coll/alltoall/alltoall_blocks.h"
#include "shm/shm.h"

/* Intra-node steps: move the blocks between the node's ranks (the own block and
 * other nodes' blocks are done by the caller). */
struct mcoll_a2a_engine {
  size_t slot_frag; /* bytes of a block moved per round through the areas */
  size_t cma_min;   /* blocks of this many bytes or more move by single copy */
  size_t cma_frag;  /* bytes of such a block read per round (SIZE_MAX: all at once) */
  int double_buffer;
  int pair_inline; /* pair_inline: the blocks go in the ranks' inline lines */
};
/* pair_inline's largest block: a few inline lines, where one transfer of lines that
 * carry their own flags still beats the areas' flags (docs/algorithms.md). At most
 * MCOLL_INLINE_SLOTS lines, the generations a call may take. */
#define MCOLL_A2A_PAIR_MAX 256
/* A node of two ranks whose blocks between them are at most MCOLL_A2A_PAIR_MAX bytes
 * each way (alltoall_node.c): the same on both ranks, whatever the counts. */
int mcoll__a2a_pair_inline_fits(const struct mcoll_a2a *a);
/* MPI_ERR_TRUNCATE when a peer sent more than this rank expects (coll/move.h:
 * mcoll__move_guarded; alltoallv/w beyond two ranks only where a table says so). */
int mcoll__a2a_node_engine(struct mcoll_a2a *a, const struct mcoll_a2a_engine *e);
void mcoll__a2a_node_bruck(struct mcoll_a2a *a);

/* Each area starts with a header: this rank's round count, then (alltoallv/w) the
 * length of its block for each node-local rank, so that a reader whose count
 * disagrees reads the block as it was sent (on few ranks in the line of the round
 * count, which readers read anyway), then the addresses of its blocks for single
 * copy, one per node-local rank; slots follow. */
#define MCOLL_A2A_LEN_OFFSET 8
static inline size_t mcoll__a2a_addr_offset(int local_size) {
  return MCOLL_A2A_LEN_OFFSET + 8 * (size_t)local_size;
}
static inline size_t mcoll__a2a_header_bytes(int local_size) {
  size_t bytes = mcoll__a2a_addr_offset(local_size) + 8 * (size_t)local_size;
  return (bytes + MCOLL_LINE - 1) / MCOLL_LINE * MCOLL_LINE;
}

#endif
