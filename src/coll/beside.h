/* Calls of one communicator side by side inside the node (task/task.h, node/area.h).
 *
 * A call of one slot generation (node/slot.h) on a communicator of one node lets
 * the later calls of its communicator start once it has posted everything it writes:
 * its generation is its own, it touches no other counter that the ranks advance in
 * step, and if it still reads its generation, that generation is kept out of this
 * rank's `done` until it is read. Between nodes a call's later steps may use the host
 * MPI in the communicator's order (hier/hier.c decides there), so not there. */
#ifndef MCOLL_BESIDE_H
#define MCOLL_BESIDE_H

#include "comm/context.h"
#include "node/area.h"
#include "task/task.h"

/* reads: the call has yet to read generation gen (and will mark it done). */
static inline void mcoll__node_call_beside(struct mcoll_comm *c, int reads, uint32_t gen) {
  if (c->topo.nnodes != 1 || !mcoll__in_task()) return;
  if (reads && !mcoll__area_reading(c->chan, gen)) return;
  mcoll__task_independent();
}

#endif
