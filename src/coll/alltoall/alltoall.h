/* Alltoall, alltoallv and alltoallw as one problem: every rank has one byte block
 * for every rank and receives one from every rank. The wrappers turn the user's
 * (buffer, counts, displacements, types) into contiguous blocks (packing where a
 * type has holes), then one engine moves them: the host MPI's point-to-point for
 * blocks between nodes, shared memory inside the node. */
#ifndef MCOLL_ALLTOALL_H
#define MCOLL_ALLTOALL_H

#include <mpi.h>
#include <stddef.h>

#include "coll/alltoall/alltoall_blocks.h"
#include "coll/alltoall/alltoall_node.h"
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

/* Runs the call; the algorithm comes from the table of a->coll. */
int mcoll__a2a_run(struct mcoll_a2a *a);

/* The engine's settings for algorithm alg: where single copy starts, tiles. */
void mcoll__a2a_engine_config(const struct mcoll_a2a *a, int alg, struct mcoll_a2a_engine *e);

/* Between nodes (alltoall_inter.c): the algorithm for the call (counted), then
 * starting the transfers with every rank of other nodes (reqs has room for
 * 2·size); *nreq says how many requests are left to wait. */
enum mcoll_a2a_inter_alg { MCOLL_A2A_INTER_DIRECT, MCOLL_A2A_INTER_GRID_RSEND, MCOLL_A2A_INTER_NALGS };
int mcoll__a2a_inter_choose(const struct mcoll_a2a *a);
int mcoll__a2a_inter_start(struct mcoll_a2a *a, int alg, MPI_Request *reqs, int *nreq);

/* Tile for the cache-friendly variant: c²·T ≤ LLC/2 (c ranks sharing the LLC),
 * or MCOLL_ALLTOALL_TILE. */
size_t mcoll__a2a_tile(const struct mcoll_comm *c);
/* Looks up what the tile needs from the machine (at MPI_Init). */
void mcoll__a2a_machine_init(void);

#endif
