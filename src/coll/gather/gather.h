#ifndef MCOLL_GATHER_H
#define MCOLL_GATHER_H

#include <stddef.h>

#include "coll/blocks.h"
#include "coll/move.h"
#include "comm/context.h"

/* Intra-node gather: every rank of the node hands its block to node-local rank
 * `sink`. The sink knows every block's length; the others know their own (and
 * every length when `lens` is given). */
struct mcoll_gather_node {
  int sink;                        /* node-local rank that receives */
  const char *mine;                /* my block; at the sink, copied to its slot unless there */
  size_t my_len;
  const struct mcoll_blocks *dst;  /* sink: where each comm rank's block goes */
  const struct mcoll_blocks *lens; /* every block's length, where known; else NULL */
  int lens_everywhere;             /* every rank has `lens` (the sink: its dst) */
  int forced;                      /* MCOLL_MOVE_* or -1 */
  size_t cma_min;                  /* blocks from this size by single copy (move.h) */
};

/* MPI_ERR_TRUNCATE at the sink when a member's length is not the one it expects
 * (coll/move.h: mcoll__move_guarded). */
int mcoll__gather_node(struct mcoll_comm *c, const struct mcoll_gather_node *g);

/* Gather(v) of bytes: block r of dst (root only) receives rank r's `mine`. */
struct mcoll_gather_args {
  const char *mine;
  size_t my_len;
  struct mcoll_blocks *dst; /* root only */
  int root;
  int v;                    /* gatherv: non-roots know only their own length */
};

int mcoll__gather(struct mcoll_comm *c, enum mcoll_coll coll, const struct mcoll_gather_args *a);

#endif
