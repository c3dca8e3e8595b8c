/* Alltoall, alltoallv and alltoallw as one problem: every rank has one byte block
 * for every rank and receives one from every rank. The wrappers turn the user's
 * (buffer, counts, displacements, types) into contiguous blocks (packing where a
 * type has holes), then one engine moves them: the host MPI's point-to-point for
 * blocks between nodes, shared memory inside the node. */
#ifndef MCOLL_ALLTOALL_H
#define MCOLL_ALLTOALL_H

#include <mpi.h>
#include <stddef.h>

#include "coll/registry.h"
#include "comm/context.h"

enum mcoll_alltoall_alg {
  MCOLL_A2A_SHM_DIRECT,
  MCOLL_A2A_BRUCK,
  MCOLL_A2A_PAIRWISE_CMA,
  MCOLL_A2A_TILED,
  MCOLL_A2A_TILED_CMA,
  MCOLL_A2A_PAIR_INLINE,
  MCOLL_A2A_NALGS
};

struct mcoll_span {
  char *ptr;
  size_t bytes;
};

/* One side of a call as the application described it. Block j is `counts[j]`
 * elements of `types[j]` at `displs[j]` (alltoallw: bytes; alltoallv: extents of
 * `type`); the arrays are NULL for alltoall, whose block j is `count` elements of
 * `type` at j·count extents. */
struct mcoll_a2a_side {
  char *buf;
  int count;
  MPI_Datatype type;
  const int *counts, *displs;
  const MPI_Datatype *types;
};

/* The contiguous view of a call on one rank. */
struct mcoll_a2a {
  struct mcoll_comm *c;
  enum mcoll_coll coll;
  struct mcoll_span *send, *recv; /* [size], indexed by comm rank */
  int uniform;                    /* alltoall: every block is `block` bytes, on every rank */
  size_t block;
  int inplace;
  int truncated; /* a peer's table said it sent me more than I expect (read what fits) */
  /* Packing state, private to alltoall_blocks.c. */
  struct mcoll_a2a_side rside;
  char *scratch;   /* packed send blocks, or the send data copied for MPI_IN_PLACE */
  char *rscratch;  /* receive blocks whose type has holes, unpacked at the end */
  unsigned char *rpacked; /* [size] receive block j lives in rscratch */
  struct mcoll_span inline_send[16], inline_recv[16]; /* small communicators: no malloc */
  unsigned char inline_packed[16];
};

/* Builds the contiguous view; sside is ignored when inplace. MPI_SUCCESS, or the
 * error of a datatype query (the caller then lets the host MPI raise it). */
int mcoll__a2a_blocks(struct mcoll_a2a *a, const struct mcoll_a2a_side *sside,
                      const struct mcoll_a2a_side *rside);
/* Unpacks what needs unpacking (when ok) and frees everything. */
void mcoll__a2a_blocks_release(struct mcoll_a2a *a, int ok);

/* Runs the call; the algorithm comes from the table of a->coll. */
int mcoll__a2a_run(struct mcoll_a2a *a);

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
void mcoll__a2a_engine_config(const struct mcoll_a2a *a, int alg, struct mcoll_a2a_engine *e);
/* MPI_ERR_TRUNCATE when a peer sent more than this rank expects (coll/move.h:
 * mcoll__move_guarded; alltoallv/w beyond two ranks only where a table says so). */
int mcoll__a2a_node_engine(struct mcoll_a2a *a, const struct mcoll_a2a_engine *e);
void mcoll__a2a_node_bruck(struct mcoll_a2a *a);

/* Between nodes (alltoall_inter.c): the algorithm for the call (counted), then
 * starting the transfers with every rank of other nodes (reqs has room for
 * 2·size); *nreq says how many requests are left to wait. */
enum mcoll_a2a_inter_alg { MCOLL_A2A_INTER_DIRECT, MCOLL_A2A_INTER_GRID_RSEND, MCOLL_A2A_INTER_NALGS };
int mcoll__a2a_inter_choose(const struct mcoll_a2a *a);
int mcoll__a2a_inter_start(struct mcoll_a2a *a, int alg, MPI_Request *reqs, int *nreq);

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

/* Tile for the cache-friendly variant: c²·T ≤ LLC/2 (c ranks sharing the LLC),
 * or MCOLL_ALLTOALL_TILE. */
size_t mcoll__a2a_tile(const struct mcoll_comm *c);
/* Looks up what the tile needs from the machine (at MPI_Init). */
void mcoll__a2a_machine_init(void);

#endif
