#ifndef MCOLL_SCATTER_H
#define MCOLL_SCATTER_H

#include <stddef.h>

#include "coll/blocks.h"
#include "coll/move.h"
#include "comm/context.h"

/* Intra-node scatter: node-local rank `source` hands each rank of the node its
 * block. The source knows every length; the others know their own. */
struct mcoll_scatter_node {
  int source;                     /* node-local rank that sends */
  const struct mcoll_blocks *src; /* source: each comm rank's block */
  char *mine;                     /* my block; NULL at the source: leave it (MPI_IN_PLACE) */
  size_t my_len;
  int forced;                     /* MCOLL_MOVE_* or -1 */
  size_t cma_min;                 /* blocks from this size by single copy (move.h) */
  int uniform;                    /* every block has my_len bytes (scatter): all know all */
};

/* MPI_ERR_TRUNCATE at a member whose block from the source is longer than it
 * expects (an erroneous program: it keeps what fits). */
int mcoll__scatter_node(struct mcoll_comm *c, const struct mcoll_scatter_node *s);

/* Whether a one-node call would run to its end now without waiting (within a
 * spin): 1; -1 not now; -2 not a call of the one-generation protocol whose source
 * waits only for its slot and whose members only for their line (known: every rank
 * knows every block's length, so a source's single-copy readers, which it would
 * wait for, are -2 too; else -1 where this rank would wait for them). Nothing is
 * taken. */
int mcoll__scatter_node_ready(struct mcoll_comm *c, const struct mcoll_scatter_node *s, int known);

/* Scatter(v) of bytes: rank r's `mine` receives block r of src (root only). */
struct mcoll_scatter_args {
  struct mcoll_blocks *src; /* root only */
  char *mine;               /* NULL at the root: MPI_IN_PLACE */
  size_t my_len;
  int root;
  int v;                    /* scatterv: non-roots know only their own length */
};

int mcoll__scatter(struct mcoll_comm *c, enum mcoll_coll coll,
                   const struct mcoll_scatter_args *a);

/* MPI_Iscatter(v) or a persistent start, on the caller's stack before any task and
 * before the meeting, run as a task would run it (it sets mcoll__as_task): on one node,
 * a call of the one-generation protocol that would not wait beyond a spin
 * (mcoll__scatter_node_ready) runs here: 1, *err its result. Else -1, nothing taken:
 * a task runs the whole call; -2 likewise, and not such a call: the same on every
 * rank, which then meet (pmpi/wrap.c). */
int mcoll__scatter_try(struct mcoll_comm *c, enum mcoll_coll coll,
                       const struct mcoll_scatter_args *a, int *err);

#endif
