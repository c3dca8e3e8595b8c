#ifndef MCOLL_ALLGATHER_H
#define MCOLL_ALLGATHER_H

#include <stddef.h>

#include "coll/blocks.h"
#include "coll/move.h"
#include "comm/context.h"

/* Intra-node allgather: every rank of the node reads every other's block. */
struct mcoll_allgather_node {
  const char *mine;               /* my block (already at its slot when in place) */
  size_t my_len;
  const struct mcoll_blocks *dst; /* where each comm rank's block goes */
  int forced;                     /* MCOLL_MOVE_* or -1 */
  size_t cma_min;                 /* blocks from this size by single copy (move.h) */
};

/* MPI_ERR_TRUNCATE when a peer's length is not the one this rank expects
 * (coll/move.h: mcoll__move_guarded). */
int mcoll__allgather_node(struct mcoll_comm *c, const struct mcoll_allgather_node *g);

/* Moves the node blocks among node leaders (ring over the host MPI) so that each
 * leader's dst holds every rank's block. */
int mcoll__allgather_between_nodes(struct mcoll_comm *c, const struct mcoll_blocks *dst);

/* Allgather(v) of bytes: every rank's dst receives rank r's `mine` as block r. */
int mcoll__allgather(struct mcoll_comm *c, enum mcoll_coll coll, const char *mine,
                     size_t my_len, struct mcoll_blocks *dst);

#endif
