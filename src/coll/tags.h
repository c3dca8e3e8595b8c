/* Tags of mcoll's own point-to-point traffic, on each context's private duplicate
 * communicator (so they never match the application's messages). */
#ifndef MCOLL_TAGS_H
#define MCOLL_TAGS_H

#include "task/task.h"

enum mcoll_tag {
  MCOLL_TAG_BARRIER = 1,
  MCOLL_TAG_BCAST,
  MCOLL_TAG_GATHER_FAMILY,
  MCOLL_TAG_ALLTOALL,
  MCOLL_TAG_REDUCE,
  MCOLL_TAG_ALLTOALL_GRID, /* grid_rsend's arrival messages (never matched by blocks) */
  MCOLL_TAG_BCAST_READY,   /* first_arrival: a node's leader tells the root, even calls */
  MCOLL_TAG_BCAST_READY_ODD, /* and odd calls */
  MCOLL_TAG_END
};
/* Calls of one communicator side by side send with these plus a multiple of the
 * stride (task/task.h, mcoll__host_tag). */
_Static_assert((int)MCOLL_TAG_END <= (int)MCOLL_TASK_TAG_STRIDE, "tags fit a call's stride");

#endif
