/* MAHCAF (docs/architecture.md): one skeleton for hierarchical collectives.
 *
 * A collective is cut into pieces of `piece` bytes; every piece goes through an
 * intra-node step up (towards the node's leader for this call), an inter-node step
 * among the nodes' leaders (host MPI point-to-point), and an intra-node step down.
 * Each collective plugs in its own steps (any may be NULL). Ranks other than the
 * leader go on with piece i+1 while their leader runs the inter-node step of
 * piece i; with `overlap`, the leader too: its inter-node steps run on a companion
 * fiber (core/fiber.h) that its intra-node steps' waits drive (hier.c). */
#ifndef MCOLL_HIER_H
#define MCOLL_HIER_H

#include <stddef.h>

#include "comm/context.h"
#include "task/task.h"

struct mcoll_hier_call;

/* Works on bytes [lo, hi) of the call; returns an MPI error code. */
typedef int (*mcoll_hier_step)(struct mcoll_hier_call *call, size_t lo, size_t hi);

struct mcoll_hier_steps {
  mcoll_hier_step intra_up;   /* every rank of the node */
  mcoll_hier_step inter;      /* the call's node leader only, when there are several nodes */
  mcoll_hier_step intra_down; /* every rank of the node */
  int (*finish)(struct mcoll_hier_call *call); /* every rank, once, after the last piece */
};

struct mcoll_hier_call {
  struct mcoll_comm *c;
  const struct mcoll_hier_steps *steps;
  size_t bytes;  /* size of the pipelined data */
  size_t piece;  /* bytes per piece; 0: a single piece */
  int leader;    /* node-local rank that runs the inter-node step */
  /* The steps of piece i+1 touch none of piece i's memory: then every rank of the
   * node runs up(i+1) before down(i), and the leader's inter(i) overlaps them. */
  int overlap;
  void *args;    /* the collective's own arguments and state */
  /* An error a step found that must not stop the later steps (the node's ranks
   * disagreed on the call: the other nodes still wait for this one's messages);
   * mcoll__hier_run returns it when nothing worse happened. */
  int deferred;
};

int mcoll__hier_run(struct mcoll_hier_call *call);

/* The same for a call on one node in one piece (a settled call, coll/settled.h): only
 * its node's steps, as mcoll__hier_run runs them there. Inline, so that a caller's
 * constant steps become direct calls. */
static inline int mcoll__hier_node_run(struct mcoll_hier_call *call) {
  const struct mcoll_hier_steps *steps = call->steps;
  int err = steps->intra_up ? steps->intra_up(call, 0, call->bytes) : MPI_SUCCESS;
  if (!steps->intra_down && !steps->finish) mcoll__task_independent(); /* (node_steps_over) */
  int more = steps->intra_down ? steps->intra_down(call, 0, call->bytes) : MPI_SUCCESS;
  if (err == MPI_SUCCESS) err = more;
  more = steps->finish ? steps->finish(call) : MPI_SUCCESS;
  if (err == MPI_SUCCESS) err = more;
  return err != MPI_SUCCESS ? err : call->deferred;
}

/* Node-local index of comm rank `rank` (-1 if it is on another node). */
int mcoll__local_index(const struct mcoll_topo *t, int rank);

#endif
