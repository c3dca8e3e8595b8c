#ifndef MCOLL_BARRIER_H
#define MCOLL_BARRIER_H

#include "comm/context.h"

enum mcoll_barrier_alg { MCOLL_BARRIER_HIER, MCOLL_BARRIER_COUNTER, MCOLL_BARRIER_NALGS };

int mcoll__barrier(struct mcoll_comm *c);

/* MPI_Ibarrier or a persistent barrier's start on c, on the caller's stack: the
 * barrier runs as far as it gets without waiting beyond a spin (one node, the tree
 * algorithm; else -1 and nothing is taken). 1: complete; 0: begun with sequence
 * number *seq, which mcoll__barrier_finish (in a task) completes. */
int mcoll__barrier_try(struct mcoll_comm *c, uint32_t *seq);
int mcoll__barrier_finish(struct mcoll_comm *c, uint32_t seq);

#endif
