/* Calls of one communicator side by side inside the node (task/task.h, node/area.h).
 *
 * A call of one slot generation (node/slot.h) on a communicator of one node lets
 * the later calls of its communicator start once it has posted everything it writes:
 * its generation is its own, it touches no other counter that the ranks advance in
 * step, and if it still reads its generation, that generation is kept out of this
 * rank's `done` until it is read. Between nodes a call's later steps may use the host
 * MPI in the communicator's order (hier/hier.c decides there), so not there.
 *
 * Who does: writers once posted (bcast's source, gather's members, scatter's source,
 * a reduction's ranks that write into a slot of the flat engine), and readers whose
 * later calls write (bcast's readers, whose next call may have another root;
 * allgather, alltoall(v) and the flat reductions' readers, where every rank writes:
 * side by side pays there: bench/records/burst/node.md). Not gather's sink,
 * scatter's members or a reduce's root: they only read, as their next call would. A
 * reduction that let later calls start and then finds that the ranks disagree on its
 * size leaves the node's counters where the later calls took them
 * (coll/reduce/red_node.c: resync). */
#ifndef MCOLL_BESIDE_H
#define MCOLL_BESIDE_H

#include "comm/context.h"
#include "node/area.h"
#include "shm/call.h"
#include "task/task.h"

/* A call side by side registers the generation it still reads: room for as many
 * calls as may run side by side. */
_Static_assert((int)MCOLL_AREA_READERS >= (int)MCOLL_TASK_WINDOW,
               "a reading slot for every call of the task window");

/* Whether later calls could start beside this one (a task on a one-node communicator). */
static inline int mcoll__node_beside_possible(const struct mcoll_comm *c) {
  return c->topo.nnodes == 1 && mcoll__in_task();
}

/* reads: the call has yet to read generation gen (and will mark it done). 1 if later
 * calls may now start. */
static inline int mcoll__node_call_beside(struct mcoll_comm *c, int reads, uint32_t gen) {
  if (!mcoll__node_beside_possible(c)) return 0;
  if (reads && !mcoll__area_reading(c->chan, gen)) return 0;
  mcoll__task_independent();
  /* A disagreement found later leaves the node's counters where those calls took
   * them (node/area.h: mcoll__area_resync). */
  if (mcoll__call_current) mcoll__call_current->beside = 1;
  return 1;
}

#endif
