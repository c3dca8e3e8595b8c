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

/* Whether a one-node call would run to its end now without waiting (within a
 * spin): 1; -1 not now; -2 not a call of the one-generation protocol whose members
 * wait only for their slot and whose sink only for their data (known: every rank
 * knows every block's length, so blocks by single copy, whose owners would wait for
 * the sink, are -2 too; else -1 at such an owner). Nothing is taken. */
int mcoll__gather_node_ready(struct mcoll_comm *c, const struct mcoll_gather_node *g, int known);

/* Gather(v) of bytes: block r of dst (root only) receives rank r's `mine`. */
struct mcoll_gather_args {
  const char *mine;
  size_t my_len;
  struct mcoll_blocks *dst; /* root only */
  int root;
  int v;                    /* gatherv: non-roots know only their own length */
};

int mcoll__gather(struct mcoll_comm *c, enum mcoll_coll coll, const struct mcoll_gather_args *a);

/* MPI_Igather(v) or a persistent start, on the caller's stack before any task (once
 * the meeting failed), run as a task would run it (it sets mcoll__as_task): on one
 * node, a call of the one-generation protocol that would not wait beyond a spin
 * (mcoll__gather_node_ready) runs here: 1, *err its result. Else -1, nothing taken:
 * a task runs the whole call; -2 likewise, and not such a call (the same on every
 * rank). */
int mcoll__gather_try(struct mcoll_comm *c, enum mcoll_coll coll, const struct mcoll_gather_args *a,
                      int *err);

#endif
